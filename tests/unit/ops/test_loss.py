"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: import vs onnxruntime over random
shapes ([N, C] to [N, C, d1, d2, d3]), every reduction, with and without class weights, with
ignore_index inside and outside [0, C); partial-shape inference; errors; ONNX export, IR round
trip and the runtime. Tolerance rtol 1e-4, atol 1e-5.
"""
from __future__ import annotations

import numpy as np
import pytest
from opcheck import check_export, check_import, check_ir_round_trip, check_runtime, one_node

import netpass
from netpass import Model, opset
from netpass.core.dimension import Dimension
from netpass.core.shape import PartialShape
from netpass.errors import NetpassError

RNG = np.random.default_rng(12)
SHAPES = [(3, 5), (2, 4, 3), (2, 3, 2, 4), (1, 6, 2, 2, 3)]


def _feeds(shape, weight: bool, ignore: int | None, op: str):
    n, c, *rest = shape
    x = RNG.standard_normal(shape).astype(np.float32)
    if op == "NegativeLogLikelihoodLoss":
        x = x - np.log(np.exp(x).sum(axis=1, keepdims=True))  # log-probabilities
    t = RNG.integers(0, c, size=(n, *rest)).astype(np.int64)
    if ignore is not None:
        t.reshape(-1)[::3] = ignore
    feeds = {"x": x, "t": t}
    if weight:
        feeds["w"] = RNG.uniform(0.2, 2.0, c).astype(np.float32)
    return feeds


@pytest.mark.parametrize("op", ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weight,ignore", [(False, None), (True, None), (True, 1), (False, -3),
                                           (True, 17)])
def test_import_matches_onnxruntime(op, shape, reduction, weight, ignore):
    feeds = _feeds(shape, weight, ignore, op)
    attrs = {"reduction": reduction}
    if ignore is not None:
        attrs["ignore_index"] = ignore
    n_out = 2 if op == "SoftmaxCrossEntropyLoss" else 1
    check_import(one_node(op, feeds, n_out=n_out, opset=13, **attrs), feeds)


def test_double_and_later_opset():
    feeds = _feeds((4, 3, 2), True, 0, "NegativeLogLikelihoodLoss")
    feeds = {k: v.astype(np.float64) if v.dtype == np.float32 else v for k, v in feeds.items()}
    check_import(one_node("NegativeLogLikelihoodLoss", feeds, opset=22, ignore_index=0), feeds)


def test_all_ignored_mean_is_nan():
    x = opset.parameter([2, 3], "f32", "x")
    loss = opset.negative_log_likelihood_loss(x, np.array([1, 1], np.int64), ignore_index=1)
    out = netpass.reference.infer(Model([loss], [x]), {"x": np.ones((2, 3), np.float32)})
    assert np.isnan(next(iter(out.values())))


def test_partial_shape_inference():
    n = Dimension(1, 16)
    x = opset.parameter(PartialShape([n, 5, -1, 7]), "f32", "x")
    t = opset.parameter(PartialShape([-1, 3, -1]), "i64", "t")
    none = opset.softmax_cross_entropy_loss(x, t, reduction="none")
    assert none.output(0).partial_shape == PartialShape([n, 3, 7])
    assert none.output(1).partial_shape == x.output(0).partial_shape
    assert opset.negative_log_likelihood_loss(x, t).output(0).partial_shape == PartialShape([])
    dyn = opset.negative_log_likelihood_loss(opset.parameter(PartialShape(None), "f32"),
                                             opset.parameter(PartialShape(None), "i64"),
                                             reduction="none")
    assert not dyn.output(0).partial_shape.rank_is_static


def test_errors_name_the_problem():
    x = opset.parameter([2, 3, 4], "f32", "x")
    with pytest.raises(NetpassError, match="target"):
        opset.negative_log_likelihood_loss(x, opset.parameter([2, 5], "i64"))
    with pytest.raises(NetpassError, match="reduction"):
        opset.negative_log_likelihood_loss(x, opset.parameter([2, 4], "i64"), reduction="max")
    with pytest.raises(NetpassError, match="integers"):
        opset.negative_log_likelihood_loss(x, opset.parameter([2, 4], "f32"))


def _built():
    x = opset.parameter([3, 4, 2], "f32", "x")
    t = opset.parameter([3, 2], "i64", "t")
    w = opset.constant(np.array([0.5, 1.0, 2.0, 1.5], np.float32))
    sce = opset.softmax_cross_entropy_loss(x, t, w, reduction="mean", ignore_index=2)
    nll = opset.negative_log_likelihood_loss(sce.output(1), t, reduction="none")
    feeds = {"x": RNG.standard_normal((3, 4, 2)).astype(np.float32),
             "t": np.array([[0, 2], [3, 1], [2, 2]], np.int64)}
    return Model([sce.output(0), sce.output(1), nll.output(0)], [x, t]), feeds


def test_export_round_trip():
    model, feeds = _built()
    check_export(model, feeds)


def test_ir_round_trip(tmp_path):
    model, feeds = _built()
    check_ir_round_trip(model, feeds, tmp_path)


def test_runtime_host_fallback():
    model, feeds = _built()
    stats = check_runtime(model, feeds)
    assert stats["host_fallback_kinds"].get("SoftmaxCrossEntropyLoss")
