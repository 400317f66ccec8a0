"""OpenVINO AdaptiveAvgPool-8 and AdaptiveMaxPool-8 (what OpenVINO's PyTorch frontend writes
for ``adaptive_avg_pool*d`` / ``adaptive_max_pool*d``): netpass's reference against OpenVINO's
CPU plugin on the IR netpass writes (1 to 3 spatial axes, output sizes that divide the input,
that do not, that are larger than it, and 1; i32 indices), against torch (i64 indices), on IR
OpenVINO writes (its opset8 builders and the torch functions converted), the IR round trip,
the runtime (host fallback) on dynamic shapes, shape inference with dynamic dims, and the
errors. Tolerance rtol 1e-4, atol 1e-5 (opcheck); indices exact."""
from __future__ import annotations

import numpy as np
import pytest
from opcheck import (
    check_ir_round_trip,
    check_openvino,
    check_reads_openvino_ir,
    check_runtime,
    check_torch_ir,
)

import netpass
from netpass import Model, opset
from netpass.core.shape import PartialShape
from netpass.errors import NetpassError
from netpass.ops.adaptive_pool import AdaptiveAvgPool, AdaptiveMaxPool

RNG = np.random.default_rng(8)


def _x(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _model(kind, shape, out, index_type="i64", dynamic=False):
    x = opset.parameter([-1] * len(shape) if dynamic else list(shape), "f32", "x")
    if kind == "avg":
        node = opset.adaptive_avg_pool(x, out)
        return Model([node.output(0)], [x])
    node = opset.adaptive_max_pool(x, out, index_type)
    return Model([node.output(0), node.output(1)], [x])


CASES = {
    "1d_uneven": ((2, 3, 11), [4]),
    "2d_divides": ((2, 3, 8, 6), [4, 3]),
    "2d_uneven": ((1, 4, 7, 5), [3, 2]),
    "2d_grows": ((1, 2, 3, 4), [5, 7]),
    "2d_global": ((2, 3, 5, 9), [1, 1]),
    "3d_uneven": ((1, 2, 5, 7, 6), [2, 3, 4]),
}


@pytest.mark.parametrize("kind", ["avg", "max"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_reference_matches_openvino(kind, name, tmp_path):
    """i32 indices: OpenVINO's CPU plugin refuses i64 ones (its PyTorch frontend writes i32
    and a Convert); the i64 default is checked against torch below."""
    shape, out = CASES[name]
    check_openvino(_model(kind, shape, out, "i32"), {"x": _x(*shape)}, tmp_path)


@pytest.mark.parametrize("name", ["1d_uneven", "2d_uneven", "2d_grows", "3d_uneven"])
def test_reference_matches_torch(name):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    shape, out = CASES[name]
    x = _x(*shape)
    n = len(out)
    avg = getattr(F, f"adaptive_avg_pool{n}d")(torch.from_numpy(x), out).numpy()
    mx, at = getattr(F, f"adaptive_max_pool{n}d")(torch.from_numpy(x), out, return_indices=True)
    got = netpass.reference.infer(_model("avg", shape, out), {"x": x})
    np.testing.assert_allclose(next(iter(got.values())), avg, rtol=1e-5, atol=1e-6)
    model = _model("max", shape, out)
    got = netpass.reference.infer(model, {"x": x})
    assert got[model.output_names[1]].dtype == np.int64
    np.testing.assert_array_equal(got[model.output_names[0]], mx.numpy())
    np.testing.assert_array_equal(got[model.output_names[1]], at.numpy())


@pytest.mark.parametrize("kind,cls", [("avg", AdaptiveAvgPool), ("max", AdaptiveMaxPool)])
def test_ir_round_trip(kind, cls, tmp_path):
    shape, out = CASES["3d_uneven"]
    back = check_ir_round_trip(_model(kind, shape, out, "i32"), {"x": _x(*shape)}, tmp_path)
    assert sum(isinstance(n, cls) for n in back.get_ordered_ops()) == 1


def test_reads_the_ir_openvino_writes(tmp_path):
    ov = pytest.importorskip("openvino")
    from openvino import opset1, opset8
    x = opset1.parameter([2, 3, 9, 7], ov.Type.f32, name="x")
    size = opset1.constant(np.array([4, 3], np.int32))
    mx = opset8.adaptive_max_pool(x, size, "i32")
    model = ov.Model([opset8.adaptive_avg_pool(x, size).output(0), mx.output(0), mx.output(1)],
                     [x])
    check_reads_openvino_ir(model, {"x": _x(2, 3, 9, 7)}, tmp_path)


def test_reads_torch_functions_converted_by_openvino(tmp_path):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    model = check_torch_ir(lambda t: (F.adaptive_avg_pool2d(t, (3, 2)),
                                      *F.adaptive_max_pool2d(t, (4, 3), return_indices=True)),
                           [_x(2, 3, 7, 5)], tmp_path)
    types = {type(n) for n in model.get_ordered_ops()}
    assert {AdaptiveAvgPool, AdaptiveMaxPool} <= types


@pytest.mark.parametrize("kind", ["avg", "max"])
def test_runtime_over_dynamic_shapes(kind):
    model = _model(kind, (1, 2, 7, 5), [3, 2], dynamic=True)
    req = netpass.compile_model(model, netpass.testing.RUNTIME_DEVICE).create_infer_request()
    for shape in ((1, 2, 7, 5), (3, 1, 4, 9)):
        feeds = {"x": _x(*shape)}
        got, want = req.infer(feeds), netpass.reference.infer(model, feeds)
        for name in model.output_names:
            np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-5)
            assert got[name].shape[2:] == (3, 2)


def test_runtime_matches_reference():
    check_runtime(_model("max", (2, 3, 8, 6), [4, 3]), {"x": _x(2, 3, 8, 6)})


def test_shape_inference_keeps_dynamic_dims():
    x = opset.parameter(PartialShape([-1, 3, -1, (4, 9)]), "f32", "x")
    assert opset.adaptive_avg_pool(x, [2, 5]).get_output_partial_shape(0) == \
        PartialShape([-1, 3, 2, 5])
    sizes = opset.parameter([2], "i64", "sizes")
    node = opset.adaptive_max_pool(x, sizes)
    assert node.get_output_partial_shape(1) == PartialShape([-1, 3, -1, -1])
    y = opset.parameter(PartialShape(None), "f32", "y")
    assert opset.adaptive_avg_pool(y, [2, 2, 2]).get_output_partial_shape(0) == \
        PartialShape([-1, -1, 2, 2, 2])


@pytest.mark.parametrize("shape,out,dtype,match", [
    ((2, 3, 8, 6), [4], "f32", "output_shape has 1 elements for the 2 spatial axes"),
    ((2, 3), [4], "f32", r"\[N, C, \*spatial\]"),
    ((2, 3, 8, 6), [0, 2], "f32", "must be positive"),
    ((2, 3, 8, 6), [4, 3], "i32", "must be a float tensor"),
])
def test_bad_inputs_name_the_op(shape, out, dtype, match):
    x = opset.parameter(list(shape), dtype, "x")
    for factory, op in ((opset.adaptive_avg_pool, "AdaptiveAvgPool"),
                        (opset.adaptive_max_pool, "AdaptiveMaxPool")):
        with pytest.raises(NetpassError, match=match) as err:
            factory(x, out)
        assert op in str(err.value)


def test_bad_index_type():
    x = opset.parameter([1, 2, 4, 4], "f32", "x")
    with pytest.raises(NetpassError, match="index_element_type must be i32 or i64"):
        opset.adaptive_max_pool(x, [2, 2], "f32")
