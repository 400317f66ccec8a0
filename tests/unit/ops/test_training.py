"""The ai.onnx.preview.training optimizer steps (Adagrad, Adam, Momentum): netpass's reference
against onnx's reference evaluator (onnxruntime's CPU build has no kernels for them), one and
several tensors, T = 0 (no bias correction, Momentum's beta taken as 1) and T > 0, every
attribute; the ONNX export, the IR round trip, the runtime (host fallback), a model importing
the training domain alone, and the errors. rtol 1e-5: the steps run in float64 in both."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from opcheck import (
    assert_close,
    check_export,
    check_ir_round_trip,
    check_runtime,
    expected,
    one_node,
)

import netpass
from netpass.errors import NetpassError

DOMAIN = "ai.onnx.preview.training"
RNG = np.random.default_rng(11)
RTOL, ATOL = 1e-5, 1e-6


def _feeds(groups: int, shapes, t: int, dtype=np.float32) -> dict:
    feeds = {"R": np.array(0.1 + RNG.random(), dtype), "T": np.array(t, np.int64)}
    for g in range(groups):
        for k, shape in enumerate(shapes):
            a = RNG.uniform(0.1, 1.0, shape) * RNG.choice([-1, 1], shape)
            if g >= 2:  # accumulated squares stay positive
                a = np.abs(a)
            feeds[f"{'XGVH'[g] if groups == 4 else 'XGH'[g]}{k}"] = a.astype(dtype)
    return feeds


CASES = {
    "adagrad": ("Adagrad", 3, dict(decay_factor=0.1, epsilon=1e-5, norm_coefficient=0.001)),
    "adagrad_defaults": ("Adagrad", 3, {}),
    "adam": ("Adam", 4, dict(alpha=0.95, beta=0.1, epsilon=1e-7, norm_coefficient=0.001,
                             norm_coefficient_post=0.01)),
    "adam_defaults": ("Adam", 4, {}),
    "momentum": ("Momentum", 3, dict(alpha=0.95, beta=0.1, mode="standard",
                                     norm_coefficient=0.001)),
    "nesterov": ("Momentum", 3, dict(alpha=0.9, beta=0.8, mode="nesterov",
                                     norm_coefficient=0.01)),
}


def _proto(op, groups, attrs, feeds, n):
    return one_node(op, feeds, n_out=n * (groups - 1), domain=DOMAIN, **attrs)


def check_import(proto, feeds, rtol=RTOL, atol=ATOL, engine="auto") -> netpass.Model:
    """As ``opcheck.check_import``, the engine's outputs cast to the tensors' type (onnx's
    reference Adam returns float64 for float32 tensors; the schema types them as the inputs)."""
    model = netpass.read_model(proto)
    got = netpass.reference.infer(model, feeds)
    x_type = feeds[proto.graph.input[2].name].dtype
    for vo, ref in zip(proto.graph.output, expected(proto, feeds, engine)):
        assert_close(got[vo.name], np.asarray(ref).astype(x_type), rtol, atol, vo.name)
    return model


@pytest.mark.parametrize("t", [0, 3])
@pytest.mark.parametrize("shapes", [[(4, 3)], [(2,), (3, 5), ()]])
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_onnx_reference(name, shapes, t):
    op, groups, attrs = CASES[name]
    feeds = _feeds(groups, shapes, t)
    check_import(_proto(op, groups, attrs, feeds, len(shapes)), feeds, RTOL, ATOL)


def test_double_tensors():
    op, groups, attrs = CASES["adam"]
    feeds = _feeds(groups, [(3, 2)], 2, np.float64)
    model = check_import(_proto(op, groups, attrs, feeds, 1), feeds, RTOL, ATOL)
    assert all(o.element_type.name == "f64" for o in model.outputs)


@pytest.mark.parametrize("name", ["adagrad", "adam", "nesterov"])
def test_export_ir_round_trip_and_runtime(name, tmp_path):
    op, groups, attrs = CASES[name]
    feeds = _feeds(groups, [(2, 3), (4,)], 5)
    model = netpass.read_model(_proto(op, groups, attrs, feeds, 2))
    proto = check_export(model, feeds, RTOL, ATOL, engine="reference")
    assert (DOMAIN, 1) in [(o.domain, o.version) for o in proto.opset_import]
    check_ir_round_trip(model, feeds, tmp_path)
    assert check_runtime(model, feeds, RTOL, ATOL)["host_fallbacks"] >= 1


def test_model_importing_only_the_training_domain_reads():
    op, groups, attrs = CASES["momentum"]
    feeds = _feeds(groups, [(3,)], 1)
    proto = _proto(op, groups, attrs, feeds, 1)
    del proto.opset_import[:]
    proto.opset_import.append(helper.make_opsetid(DOMAIN, 1))
    check_import(proto, feeds, RTOL, ATOL, engine="reference")


def test_mismatched_shapes_name_the_node():
    op, groups, attrs = CASES["adagrad"]
    feeds = _feeds(groups, [(3,)], 1)
    feeds["G0"] = np.ones(4, np.float32)
    proto = _proto(op, groups, attrs, feeds, 1)
    proto.graph.node[0].name = "step0"
    with pytest.raises(NetpassError, match="step0"):
        netpass.read_model(proto)


def test_bad_mode_names_the_node():
    feeds = _feeds(3, [(3,)], 1)
    proto = _proto("Momentum", 3, dict(alpha=0.9, beta=0.8, mode="heavy", norm_coefficient=0.0),
                   feeds, 1)
    proto.graph.node[0].name = "m0"
    with pytest.raises(NetpassError, match="m0.*mode"):
        netpass.read_model(proto)


def test_wrong_input_count_names_the_node():
    feeds = _feeds(3, [(3,)], 1)
    del feeds["H0"]
    proto = _proto("Adagrad", 3, {}, feeds, 1)
    proto.graph.node[0].name = "a0"
    with pytest.raises(NetpassError, match="a0"):
        netpass.read_model(proto)
