"""Dropout, Bernoulli, RandomUniformLike: seeded draws equal onnx's reference evaluator
(numpy's RandomState); inference-mode Dropout is the identity; statistics of unseeded draws;
errors; ONNX export; the runtime draws the same seeded values on every inference."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto
from opcheck import check_export, check_import, check_runtime, one_node

import netpass
from netpass import Model, opset
from netpass.errors import NetpassError

RNG = np.random.default_rng(7)


@pytest.mark.parametrize("ratio", [0.0, 0.3, 0.75])
@pytest.mark.parametrize("training", [False, True])
def test_dropout_matches_reference(ratio, training):
    feeds = {"x": RNG.standard_normal((4, 5, 6)).astype(np.float32),
             "r": np.array(ratio, np.float32), "t": np.array(training)}
    proto = one_node("Dropout", feeds, n_out=2, opset=13, seed=5)
    check_import(proto, feeds, engine="reference")


def test_inference_dropout_is_the_identity():
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    model = netpass.read_model(one_node("Dropout", {"x": x}, opset=13))
    assert [n.type_name for n in model.get_ordered_ops()] == ["Parameter", "Result"]


@pytest.mark.parametrize("dtype", [None, TensorProto.DOUBLE])
def test_seeded_bernoulli_and_uniform_match_reference(dtype):
    feeds = {"p": RNG.uniform(0, 1, (50,)).astype(np.float32)}
    attrs = {"dtype": dtype} if dtype else {}
    check_import(one_node("Bernoulli", feeds, opset=22, seed=3.0, **attrs), feeds,
                 engine="reference")
    check_import(one_node("RandomUniformLike", feeds, opset=22, seed=3.0, low=-2.0, high=5.0,
                          **attrs), feeds, engine="reference")


def test_unseeded_draws_have_the_right_statistics():
    p = opset.parameter([20000], "f32", "p")
    model = Model([opset.bernoulli(p), opset.random_uniform_like(p, -1.0, 3.0)], [p])
    out = list(netpass.reference.infer(model, {"p": np.full(20000, 0.25, np.float32)}).values())
    assert set(np.unique(out[0])) <= {0.0, 1.0} and abs(out[0].mean() - 0.25) < 0.02
    assert out[1].min() >= -1 and out[1].max() < 3 and abs(out[1].mean() - 1.0) < 0.05


def test_dropout_ratio_out_of_range():
    x = opset.parameter([4], "f32", "x")
    model = Model([opset.dropout(x, np.float32(1.0), True, seed=1).output(0)], [x])
    with pytest.raises(NetpassError, match="ratio"):
        netpass.reference.infer(model, {"x": np.ones(4, np.float32)})


def test_export_and_runtime_repeat_seeded_draws():
    x = opset.parameter([3, 8], "f32", "x")
    d = opset.dropout(x, np.float32(0.5), True, seed=11)
    model = Model([d.output(0), d.output(1), opset.random_uniform_like(x, seed=2.0)], [x])
    feeds = {"x": RNG.standard_normal((3, 8)).astype(np.float32)}
    check_export(model, feeds, engine="reference")
    stats = check_runtime(model, feeds)
    assert stats["host_fallback_kinds"].get("Dropout")
