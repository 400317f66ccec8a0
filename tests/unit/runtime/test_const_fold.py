"""Values known before any input become program constants (runtime.const_fold): nodes of
constants alone, and shape values whose partial values are static, as an attention's scale
computed from q's static head width."""
from __future__ import annotations

import numpy as np
from graph_blocks import ints64, randn_f32

import netpass
from netpass import Model, opset
from netpass.runtime import Program
from netpass.testing import RUNTIME_DEVICE

I64_MAX = np.iinfo(np.int64).max


def _attention_scaled_by_shape():
    """softmax((q s) (k^T s)) v with s = 1 / sqrt(sqrt(q.shape[-1])), as torch exports
    scaled_dot_product_attention: the head width is static, the batch and length are not."""
    q, k, v = (opset.parameter([-1, 2, -1, 16], np.float32, name=n) for n in "qkv")
    width = opset.convert(opset.slice(opset.shape_of(q), ints64([-1]), ints64([I64_MAX]), ints64([1])), np.float32)
    s = opset.sqrt(opset.divide(np.array([1.0], np.float32), opset.sqrt(width)))
    kt = opset.transpose(k, ints64([0, 1, 3, 2]))
    scores = opset.matmul(opset.multiply(q, s), opset.multiply(kt, s), False, False)
    y = opset.matmul(opset.softmax(scores, -1), v, False, False)
    return Model([opset.result(y, name="y")], [q, k, v])


def test_shape_computed_scale_is_absorbed_into_the_attention(run_shapes, rng):
    model = _attention_scaled_by_shape()
    prog = Program.from_model(model)
    att = next(n for n in prog.nodes if n.kind == "FusedAttention")
    assert len(att.subgraph.prescaled) == 2 and abs(att.subgraph.scale - 0.25) < 1e-7
    assert not [n for n in prog.nodes if n.kind in ("Multiply", "Sqrt", "ShapeOf", "Divide")]
    feeds = [{n: randn_f32(rng, b, 2, s, 16) for n in "qkv"} for b, s in ((1, 5), (2, 9), (2, 9))]
    req = run_shapes(model, feeds)
    assert req.stats["kernels_enqueued"] == 3


def test_constant_sub_graphs_fold_and_dynamic_shapes_do_not(rng):
    """x * (c1 + c2) + x.shape[0]: the sum of constants folds; the dynamic batch does not."""
    x = opset.parameter([-1, 4], np.float32, name="x")
    c = opset.add(np.full([4], 2.0, np.float32), np.arange(4, dtype=np.float32))
    rows = opset.convert(opset.gather(opset.shape_of(x), ints64([0]), ints64(0)), np.float32)
    model = Model([opset.result(opset.add(opset.multiply(x, c), rows), name="y")], [x])
    prog = Program.from_model(model)
    consts = [n for n in prog.nodes if n.kind == "Constant" and n.value.shape == (4,)]
    assert any(np.array_equal(n.value, [2.0, 3.0, 4.0, 5.0]) for n in consts)
    assert [n for n in prog.nodes if n.kind == "ShapeOf"]
    from netpass.runtime import compile_program
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    for r in (1, 3):
        feeds = {"x": randn_f32(rng, r, 4)}
        np.testing.assert_allclose(req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"], rtol=1e-6)
