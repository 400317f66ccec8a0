"""The ONNX Attention op (torch's dynamo exporter writes it for scaled_dot_product_attention
from opset 23) as a fused attention (netpass.runtime.attention): 4-D q, k, v with
grouped-query heads and a boolean or additive mask run on the decode and row kernels of any
device, what they do not take keeps the op (its flash kernel, else the host), and a shape the
kernels cannot take runs the op's own reference. Against the reference on random data
(rel. L2 <= 1e-5)."""
from __future__ import annotations

import numpy as np
import pytest
from graph_blocks import randn_f32, rel_l2_unfloored

import netpass
from netpass import Model, opset
from netpass.ops.attention import attention
from netpass.runtime import Program, compile_program
from netpass.testing import RUNTIME_DEVICE


def _model(mask_dtype=None, heads=(4, 2), mask_shape=(-1, 1, -1, -1), **attrs) -> Model:
    """q [2, 4, s, 16], k and v of 2 heads (v 12 wide), an optional mask."""
    q = opset.parameter([2, heads[0], -1, 16], np.float32, name="q")
    k = opset.parameter([2, heads[1], -1, 16], np.float32, name="k")
    v = opset.parameter([2, heads[1], -1, 12], np.float32, name="v")
    ins = [q, k, v]
    mask = None
    if mask_dtype is not None:
        mask = opset.parameter(list(mask_shape), mask_dtype, name="mask")
        ins.append(mask)
    y = attention(q, k, v, attn_mask=mask, **attrs)
    return Model([opset.result(y.output(0), name="y")], ins)


def _feeds(rng, s: int, mask_dtype=None, keys=None, q_heads=4) -> dict:
    n = keys or s
    feeds = {"q": randn_f32(rng, 2, q_heads, s, 16), "k": randn_f32(rng, 2, 2, n, 16), "v": randn_f32(rng, 2, 2, n, 12)}
    if mask_dtype is np.bool_:
        m = rng.random((2, 1, s, n)) < 0.7
        m[0] = True
        m[1, 0, 0] = False  # a row that sees no key: zeros
        feeds["mask"] = m
    elif mask_dtype is not None:
        feeds["mask"] = np.where(rng.random((2, 1, s, n)) < 0.3, -np.inf,
                                 randn_f32(rng, 2, 1, s, n)).astype(np.float32)
    return feeds


def _check(model, feeds_list, fallbacks=0):
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    for feeds in feeds_list:
        with np.errstate(invalid="ignore"):
            want = netpass.reference.infer(model, feeds)["y"]
        got = req.infer(feeds)["y"]
        assert got.shape == want.shape and np.all(np.isfinite(got))
        assert rel_l2_unfloored(got, want) <= 1e-5, {n: a.shape for n, a in feeds.items()}
    assert req.stats["host_fallbacks"] == fallbacks


def _kinds(model) -> list:
    return [n.kind for n in Program.from_model(model).nodes]


@pytest.mark.parametrize("mask_dtype", [None, np.bool_, np.float32])
def test_grouped_heads_and_masks_run_on_the_fused_kernels(mask_dtype, rng):
    model = _model(mask_dtype, scale=0.3)
    kinds = _kinds(model)
    assert kinds.count("FusedAttention") == 1 and "Attention" not in kinds
    # one query row (the decode kernel), more than one block of keys (the row kernel)
    _check(model, [_feeds(rng, s, mask_dtype) for s in (5, 1, 70, 5)])


@pytest.mark.parametrize("attrs", [{"is_causal": True}, {"softcap": 2.0},
                                   {"qk_matmul_output_mode": 1}])
def test_what_the_kernels_do_not_take_keeps_the_op(attrs):
    assert "FusedAttention" not in _kinds(_model(**attrs))


@pytest.mark.parametrize("case", ["short mask", "grouped heads left dynamic"])
def test_shapes_the_kernels_cannot_take_run_the_op_reference(case, rng):
    """A mask shorter than the keys (ONNX pads it with "not attended"), or grouped heads the
    graph leaves dynamic (the node reads them ungrouped): the host runs the op's own
    reference."""
    if case == "short mask":
        model = _model(np.bool_, mask_shape=(2, 1, -1, -1))
        feeds = [_feeds(rng, 5, np.bool_, keys=7) for _ in range(2)]
        for f in feeds:
            f["mask"] = f["mask"][..., :5]
    else:
        model = _model(heads=(-1, -1))
        feeds = [_feeds(rng, s) for s in (5, 6)]
    _check(model, feeds, fallbacks=2)
