"""compile_model keeps the original model's interface: input and output element types, and the
versioned op semantics, whatever the pipeline and the legacy stage do on the way.

- The GNA pipeline takes a float Convert after a Parameter into the Parameter
  (RemoveInputConvert) and drops one before a Result (RemoveOutputConvert); the infer request
  still takes and returns the original element types, with the same values.
- The legacy stage keeps an op's class, so OneHot-16 and ScatterNDUpdate-15 keep their
  attributes (negative indices counted from depth, reductions) on the runtime.
- A model that gives the device no work (only Constants and shape math) compiles and runs.
Checked against the reference evaluator (exact, or rtol 1e-6 for floats).
"""
from __future__ import annotations

import numpy as np
import pytest

import netpass
from netpass import Model, opset
from netpass.ops.indexing.scatter import ScatterNDUpdate15
from netpass.testing import RUNTIME_DEVICE

RNG = np.random.default_rng(11)


@pytest.fixture(params=[RUNTIME_DEVICE, "REFERENCE"])
def device(request):
    return request.param


def _run(model: Model, feeds: dict, device: str) -> dict:
    for i, r in enumerate(model.results):  # output names that survive the pipeline's rewrites
        r.friendly_name = f"out{i}"
    return netpass.compile_model(model, device=device).create_infer_request().infer(feeds)


@pytest.mark.parametrize("src,dst", [("f32", "f64"), ("f64", "f32"), ("f32", "f16"),
                                     ("f16", "f32")])
def test_input_convert_keeps_the_input_type(device, src, dst):
    x = opset.parameter([2, 5], src, "x")
    c = opset.convert(x, dst)
    y = opset.multiply(c, c)
    model = Model([y], [x])
    feed = RNG.standard_normal((2, 5)).astype(np.dtype(model.parameters[0].output(0)
                                                        .element_type.dtype))
    got = _run(model, {"x": feed}, device)
    ref = netpass.reference.infer(model, {"x": feed})
    out = model.output_names[0]
    assert got[out].dtype == ref[out].dtype
    np.testing.assert_allclose(got[out], ref[out], rtol=1e-6)


def test_output_convert_keeps_the_output_type(device):
    x = opset.parameter([3, 4], "f32", "x")
    model = Model([opset.convert(opset.relu(x), "f16")], [x])
    feed = RNG.standard_normal((3, 4)).astype(np.float32)
    got = next(iter(_run(model, {"x": feed}, device).values()))
    ref = next(iter(netpass.reference.infer(model, {"x": feed}).values()))
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, ref)


def test_one_hot_16_counts_negative_indices_from_depth(device):
    idx = opset.parameter([4], "i64", "idx")
    y = opset.one_hot(idx, 5, np.float32(2), np.float32(-1), -1, "normalize")
    model = Model([y], [idx])
    feeds = {"idx": np.array([-1, 3, -5, 7], np.int64)}
    got = next(iter(_run(model, feeds, device).values()))
    np.testing.assert_array_equal(got, next(iter(netpass.reference.infer(model, feeds).values())))
    assert got[0, 4] == 2 and got[2, 0] == 2 and (got[3] == -1).all()


@pytest.mark.parametrize("reduction", ["sum", "prod", "min", "max"])
def test_scatter_nd_15_reductions(device, reduction):
    data = opset.parameter([4, 3], "f32", "data")
    upd = opset.parameter([3, 3], "f32", "upd")
    idx = opset.constant(np.array([[1], [3], [1]], np.int64))
    model = Model([ScatterNDUpdate15([data.output(0), idx.output(0), upd.output(0)],
                                     reduction=reduction)], [data, upd])
    feeds = {"data": RNG.standard_normal((4, 3)).astype(np.float32),
             "upd": RNG.standard_normal((3, 3)).astype(np.float32)}
    got = next(iter(_run(model, feeds, device).values()))
    ref = next(iter(netpass.reference.infer(model, feeds).values()))
    np.testing.assert_allclose(got, ref, rtol=1e-6)
    assert not np.allclose(ref, feeds["data"])


def test_model_without_device_work(device):
    x = opset.parameter([2, -1], "f32", "x")
    model = Model([opset.shape_of(x), opset.constant(np.arange(4, dtype=np.int32))], [x])
    got = _run(model, {"x": np.ones((2, 7), np.float32)}, device)
    a, b = (got[n] for n in model.output_names)
    np.testing.assert_array_equal(a, [2, 7])
    np.testing.assert_array_equal(b, np.arange(4, dtype=np.int32))
