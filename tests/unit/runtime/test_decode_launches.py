"""Fewer launches per decode step (issue 17): the general rules that take the kernels of a
transformers decoder's attention mask and rotary tables out of a step, each checked against
the reference on random data and by the launches it saves.

- a Broadcast the build proves to be to its input's own shape is bypassed (its readers, an
  elementwise region among them, read its input);
- an elementwise region may change dtype along its chain (a comparison or And to bool, a
  Select back to float, a Convert): each stage typed in the kernel, the buffer in the last;
- a Concat of small inputs is one launch;
- a Gather whose computed indices the build proves ``base, base + 1, ...`` in order (a Range
  through Unsqueezes, Converts and affine arithmetic: ``index_forms``) is a view, decided from
  shapes alone;
- a Convert to bool read only as a truth value (an And's operand, a Select's condition) is
  read through;
- a Multiply by ones that broadcasts nothing is bypassed, and one-input ops of one tensor (a
  rotary table's Cos and Sin) are one launch;
- an elementwise region may grow past its head's shape by a constant (positions [B, L, 1]
  converted to float, then times the inverse frequencies [D]).
"""
from __future__ import annotations

import numpy as np
from graph_blocks import ints64, randn_f32
from launch_counts import run_counted

from netpass import Model, opset
from netpass.runtime import Program


# -- a Broadcast to its own shape ------------------------------------------------------------------
def test_broadcast_to_its_own_shape_is_bypassed(rng):
    x = opset.parameter([-1, -1], np.float32, name="x")
    b = opset.broadcast(opset.relu(x), opset.shape_of(x))
    model = Model([opset.result(opset.exp(b), name="y")], [x])
    prog = Program.from_model(model)
    assert not any(n.kind == "Broadcast" for n in prog.nodes)
    relu = next(n for n in prog.nodes if n.kind == "Relu")
    assert [f.row.name for f in relu.fused] == ["Exp"]
    _, launches = run_counted(model, [{"x": randn_f32(rng, 3, 4)}, {"x": randn_f32(rng, 1, 6)}])
    assert launches == [1, 1]


# -- regions that change dtype ---------------------------------------------------------------------
def _mask_model():
    """A decoder's additive mask: And(causal, padding) -> Select(., 0, -inf), the padding mask
    an int64 input converted to bool."""
    causal = opset.parameter([1, 1, -1, -1], np.bool_, name="causal")
    pad = opset.parameter([-1, 1, 1, -1], np.int64, name="pad")
    keep = opset.logical_and(causal, opset.convert(pad, np.bool_))
    y = opset.select(keep, np.float32([0.0]), np.float32([-np.inf]))
    return Model([opset.result(y, name="y")], [causal, pad])


def test_and_then_select_to_float_is_one_region(rng):
    prog = Program.from_model(_mask_model())
    land = next(n for n in prog.nodes if n.kind == "LogicalAnd")
    assert [f.row.name for f in land.fused] == ["Select"]
    assert land.op_dtype == np.bool_ and land.out_dtypes[0] == np.float32
    feeds = []
    for q, k in ((4, 4), (1, 9)):
        feeds.append({"causal": np.tril(np.ones((q, k), bool), k - q)[None, None],
                      "pad": rng.integers(0, 3, (1, 1, 1, k)).astype(np.int64)})
    _, launches = run_counted(_mask_model(), feeds)
    assert launches == [1, 1]  # And + Select reading the int64 (the Convert dropped)


def test_region_through_bool_and_int_stages_matches_the_reference(rng):
    """float -> Greater (bool) -> Convert (int32) -> Multiply (int32) -> Convert (float): one
    kernel, each stage in its own type."""
    x = opset.parameter([-1, 8], np.float32, name="x")
    h = opset.relu(x)
    g = opset.convert(opset.greater(h, np.float32(0.5)), np.int32)
    y = opset.convert(opset.multiply(g, np.int32(3)), np.float32)
    model = Model([opset.result(y, name="y")], [x])
    relu = next(n for n in Program.from_model(model).nodes if n.kind == "Relu")
    assert [f.row.name for f in relu.fused] == ["Greater", "Convert", "Multiply", "Convert"]
    _, launches = run_counted(model, [{"x": randn_f32(rng, 5, 8)}, {"x": randn_f32(rng, 3, 8)}])
    assert launches == [1, 1]


def test_region_ending_in_another_dtype_matches_the_reference(rng):
    """float -> Abs -> Less (bool): the buffer holds the bool, the Abs computes in float;
    an int64 head converting to float then scaled."""
    x = opset.parameter([-1, 8], np.float32, name="x")
    i = opset.parameter([-1], np.int64, name="i")
    less = opset.less(opset.abs(opset.negative(x)), np.float32(0.7))
    scaled = opset.multiply(opset.convert(opset.negative(i), np.float32), np.float32(0.25))
    model = Model([opset.result(less, name="y"), opset.result(scaled, name="z")], [x, i])
    nodes = Program.from_model(model).nodes
    assert [f.row.name for f in next(n for n in nodes if n.kind == "Negative"
                                        and n.out_dtypes[0] == np.bool_).fused] == ["Abs", "Less"]
    feeds = [{"x": randn_f32(rng, 4, 8), "i": rng.integers(-50, 50, 6).astype(np.int64)}]
    _, launches = run_counted(model, feeds)
    assert launches == [2]


# -- a Convert to bool read only as a truth value ------------------------------------------------
def test_convert_to_bool_read_as_truth_is_dropped(rng):
    """int64 -> bool read through a Reshape by an And and as a Select's condition: the Convert
    goes (the And and the Select read the int64: C's nonzero is numpy's True), the Reshape
    takes the int64; the values against the reference, negatives and large values among them."""
    a = opset.parameter([-1, -1], np.int64, name="a")
    b = opset.parameter([-1, 1, -1], np.bool_, name="b")
    x = opset.parameter([-1, 1, -1], np.float32, name="x")
    t = opset.reshape(opset.convert(a, np.bool_), ints64([0, 1, -1]), True)
    y = opset.select(opset.logical_and(b, t), x, np.float32(-1.0))
    z = opset.select(t, np.float32(2.0), x)
    model = Model([opset.result(y, name="y"), opset.result(z, name="z")], [a, b, x])
    prog = Program.from_model(model)
    assert not any(n.kind == "Convert" for n in prog.nodes)
    assert next(n for n in prog.nodes if n.kind == "Reshape").out_dtypes[0] == np.int64
    vals = np.array([0, 1, -1, 2, 1 << 40, -(1 << 40), 0, 7], np.int64)
    feeds = [{"a": rng.choice(vals, (2, 6)), "b": rng.integers(0, 2, (2, 1, 6)).astype(bool),
              "x": randn_f32(rng, 2, 1, 6)}]
    _, launches = run_counted(model, feeds)
    assert launches == [2]  # And + Select; Select (three with the Convert)


def test_convert_to_bool_read_as_data_stays(rng):
    """A Convert to bool also read as data (a Concat with another mask, a model output) or of
    a float: kept, and the values its readers see stay booleans."""
    a = opset.parameter([-1, 4], np.int64, name="a")
    f = opset.parameter([-1, 4], np.float32, name="f")
    c = opset.convert(a, np.bool_)
    m = opset.logical_and(c, opset.convert(f, np.bool_))
    model = Model([opset.result(m, name="m"), opset.result(c, name="c"),
                   opset.result(opset.concat([c, m], 0), name="cat")], [a, f])
    prog = Program.from_model(model)
    assert sum(n.kind == "Convert" for n in prog.nodes) == 2
    f_in = np.array([[0.0, np.nan, -0.0, 3.0]] * 2, np.float32)
    run_counted(model, [{"a": rng.integers(-2, 3, (2, 4)).astype(np.int64), "f": f_in}])


# -- a small Concat in one launch ------------------------------------------------------------------
def _concat_model(dtype, axis: int):
    a = opset.parameter([-1, -1, 4], dtype, name="a")
    b = opset.parameter([-1, -1, 4], dtype, name="b")
    c = opset.concat([a, b, a], axis)  # (inputs: never written in place into the concat)
    return Model([opset.result(opset.negative(c), name="y")], [a, b])


def test_small_concat_is_one_launch(rng):
    """Three inputs (one read twice) along the middle axis, floats and ints, then a negation;
    an empty input takes no part; one input left: its copy."""
    for dtype in (np.float32, np.int32):
        def arr(*shape, dtype=dtype):
            return (rng.standard_normal(shape) * 50).astype(dtype)
        _, launches = run_counted(_concat_model(dtype, 1), [
            {"a": arr(2, 3, 4), "b": arr(2, 5, 4)}, {"a": arr(1, 1, 4), "b": arr(1, 0, 4)},
            {"a": arr(1, 0, 4), "b": arr(1, 2, 4)}])
        assert launches == [2, 2, 2]
    _, launches = run_counted(_concat_model(np.float32, -1), [{"a": randn_f32(rng, 2, 3, 4),
                                                        "b": randn_f32(rng, 2, 3, 4)}])
    assert launches == [2]


def test_large_concat_copies_each_input(rng):
    from netpass.runtime.kinds.movement import CONCAT_ONE_LAUNCH_MAX
    rows = CONCAT_ONE_LAUNCH_MAX // 8 + 1
    _, launches = run_counted(_concat_model(np.float32, 1), [{"a": randn_f32(rng, 1, rows, 4),
                                                       "b": randn_f32(rng, 1, rows, 4)}])
    assert launches == [3 + 1]


# -- a Gather by indices the build proves an arange ------------------------------------------------
def _gathered_mask_model(start: int = 0, step: int = 1, idx_type=np.int64):
    """A decoder's padding mask gathered per key (transformers' ``padding_mask[b * T + j]``):
    indices ``start + step * j + b * T`` over [B, 1, 1, L] (L the causal mask's last dim, T the
    padding mask's), from Ranges, Unsqueezes, a Multiply, an Add and a Convert."""
    causal = opset.parameter([-1, 1, -1, -1], np.bool_, name="causal")
    pad = opset.parameter([-1, -1], np.int64, name="pad")
    cs, ps = opset.shape_of(causal), opset.shape_of(pad)
    length = opset.gather(cs, ints64(3), ints64(0))
    batch = opset.gather(ps, ints64(0), ints64(0))
    total = opset.gather(ps, ints64([1]), ints64(0))
    j = opset.range(ints64(start), opset.add(length, ints64(start)) if step == 1 else
                    opset.add(opset.multiply(length, ints64(step)), ints64(start)), ints64(step), "i64")
    j = opset.unsqueeze(opset.unsqueeze(j, ints64([0])), ints64([0, 1]))
    b = opset.unsqueeze(opset.range(ints64(0), batch, ints64(1), "i64"), ints64([1, 2, 3]))
    idx = opset.convert(opset.add(j, opset.multiply(b, total)), idx_type)
    flat = opset.reshape(opset.convert(pad, np.bool_), ints64([-1, 1]), False)
    m = opset.squeeze(opset.gather(flat, idx, ints64(0)), ints64([4]))
    y = opset.select(opset.logical_and(causal, m), np.float32([0.0]), np.float32([-np.inf]))
    return Model([opset.result(y, name="y")], [causal, pad])


def _mask_feeds(rng, batch: int, q: int, length: int, total: int):
    return {"causal": np.tril(np.ones((q, length), bool), length - q)[None, None].repeat(batch, 0),
            "pad": rng.integers(0, 2, (batch, total)).astype(np.int64)}


def test_gather_by_a_proven_arange_is_a_view(rng):
    """Batch 1: the indices are 0..L-1 (the Gather a view of the whole mask, or of its first L
    where T > L); batch 2: the kernel (the build does not know the row stride T, a value: it
    decides from shapes alone). Each against the reference."""
    from netpass.runtime.index_forms import form_of
    prog = Program.from_model(_gathered_mask_model())
    g = next(n for n in prog.nodes if n.kind == "Gather" and n.inputs[0][0].kind == "Reshape")
    assert g.runtime_skippable
    src, k = g.inputs[1]
    assert form_of(src, k).base == 0 and form_of(src, k).slopes[3] == 1
    _, launches = run_counted(_gathered_mask_model(), [
        _mask_feeds(rng, 1, 4, 4, 4), _mask_feeds(rng, 1, 1, 9, 9), _mask_feeds(rng, 1, 1, 5, 7),
        _mask_feeds(rng, 2, 3, 6, 6), _mask_feeds(rng, 2, 1, 5, 8)])
    assert launches == [1, 1, 1, 2, 2]  # And + Select (and the Gather where it runs)


def test_gather_by_an_offset_arange_is_a_slice_view(rng):
    """Indices 2..L+1 (int32 after the Convert): a view at offset 2 where they fit the mask,
    the kernel where they do not (never out of range: the reference's own result)."""
    model = _gathered_mask_model(start=2, idx_type=np.int32)
    _, launches = run_counted(model, [_mask_feeds(rng, 1, 1, 5, 7), _mask_feeds(rng, 1, 2, 6, 9)])
    assert launches == [1, 1]


def test_gather_by_a_strided_range_runs_its_kernel(rng):
    """Indices 0, 2, 4...: a form, but no contiguous piece: the Gather's kernel each time."""
    model = _gathered_mask_model(step=2)
    _, launches = run_counted(model, [_mask_feeds(rng, 1, 1, 4, 8), _mask_feeds(rng, 1, 1, 1, 1)])
    assert launches == [2, 1]  # (one index: 0, a view)


def test_index_forms_of_constants_and_broadcasts():
    from netpass.runtime.index_forms import Form, _fitted
    assert _fitted(np.arange(12).reshape(3, 4) * 2 + 5) == Form(5, (8, 2))
    assert _fitted(np.array([[0, 1], [2, 4]])) is None
    assert Form(3, (None, 1)).at((1, 7)) == (3, (0, 1))
    assert Form(3, (None, 1)).at((2, 7)) is None
    # both sides of an Add may be broadcast along a dynamic axis: the slopes there unknown
    a = opset.parameter([-1], np.int64, name="a")
    b = opset.parameter([-1], np.int64, name="b")
    n = opset.shape_of(a)
    r = opset.range(ints64(0), opset.squeeze(n, ints64([0])), ints64(1), "i64")
    s = opset.add(r, b)
    prog = Program.from_model(Model([opset.result(s, name="y")], [a, b]))
    from netpass.runtime.index_forms import form_of
    add = next(n for n in prog.nodes if n.kind == "Add")
    assert form_of(add) is None  # (b has no form)


# -- a Multiply by ones; Cos and Sin of one tensor -------------------------------------------------
def _special(rng, *shape):
    x = randn_f32(rng, *shape)
    x.reshape(-1)[:4] = [np.nan, np.inf, -0.0, -np.inf]
    return x


def test_multiply_by_ones_is_bypassed(rng):
    """``relu(x) * 1`` then Exp: one region of Relu and Exp (NaN, infinities and -0 kept as
    they were); ones that broadcast ``x`` to a larger shape stay a Multiply."""
    x = opset.parameter([-1, 4], np.float32, name="x")
    y = opset.exp(opset.multiply(opset.relu(x), np.ones((1, 4), np.float32)))
    z = opset.multiply(np.ones((2, 1, 4), np.float32), x)
    model = Model([opset.result(y, name="y"), opset.result(z, name="z")], [x])
    prog = Program.from_model(model)
    assert sum(n.kind == "Multiply" for n in prog.nodes) == 1
    assert [f.row.name for f in next(n for n in prog.nodes if n.kind == "Relu").fused] == ["Exp"]
    _, launches = run_counted(model, [{"x": _special(rng, 3, 4)}])
    assert launches == [2]


def _trig_model(read_by_add: bool = False):
    """cos and sin of one tensor of angles (a concat, as LLaMA's tables), read through a
    MatMul and an Unsqueeze, or the cos by an Add."""
    x = opset.parameter([-1, 3], np.float32, name="x")
    f = opset.concat([x, x], 1)
    c, s = opset.cos(f), opset.sin(f)
    w = np.eye(6, dtype=np.float32)
    a = opset.add(c, np.float32(1.0)) if read_by_add else opset.matmul(c, w, False, False)
    s = opset.unsqueeze(s, ints64([0]))
    return Model([opset.result(a, name="c"), opset.result(s, name="s")], [x])


def test_cos_and_sin_of_one_tensor_are_one_launch(rng):
    prog = Program.from_model(_trig_model())
    (u,) = [n for n in prog.nodes if n.kind == "Unaries"]
    assert u.num_outputs == 2 and not any(n.kind in ("Cos", "Sin") for n in prog.nodes)
    _, launches = run_counted(_trig_model(), [{"x": _special(rng, 5, 3) * 10}, {"x": randn_f32(rng, 1, 3)}])
    assert launches == [3, 3]  # Concat, Cos + Sin, MatMul


def test_sibling_read_by_an_elementwise_op_keeps_its_region(rng):
    """Cos read by an Add heads its own region (Cos + Add): not merged with the Sin."""
    prog = Program.from_model(_trig_model(read_by_add=True))
    assert not any(n.kind == "Unaries" for n in prog.nodes)
    cos = next(n for n in prog.nodes if n.kind == "Cos")
    assert [f.row.name for f in cos.fused] == ["Add"]
    run_counted(_trig_model(read_by_add=True), [{"x": _special(rng, 4, 3)}])


# -- a region grown by a constant ------------------------------------------------------------------
def _positions_model(side=None):
    """positions [B, L] int64 -> [B, L, 1] -> float -> times [8] (a constant, or ``side``) ->
    Cos."""
    p = opset.parameter([-1, -1], np.int64, name="p")
    a = opset.convert(opset.unsqueeze(p, ints64([2])), np.float32)
    inv = np.float32(1.0 / 10000 ** (np.arange(8) / 8))
    y = opset.cos(opset.multiply(a, inv if side is None else side))
    return Model([opset.result(y, name="y")], [p] + ([side] if side is not None else []))


def test_region_grown_by_a_constant(rng):
    """Convert [B, L, 1] -> Multiply [B, L, 8] -> Cos: one kernel over the larger shape, at
    lengths that come back (step plans, symbolic records) and batch 2."""
    prog = Program.from_model(_positions_model())
    conv = next(n for n in prog.nodes if n.kind == "Convert")
    assert [f.row.name for f in conv.fused] == ["Multiply", "Cos"] and conv.grown_by == [(8,)]
    feeds = [{"p": rng.integers(0, 500, (b, n)).astype(np.int64)}
             for b, n in ((1, 6), (1, 1), (1, 1), (2, 3), (1, 6), (1, 1))]
    req, launches = run_counted(_positions_model(), feeds)
    assert launches == [1] * 6


def test_region_not_grown_by_a_computed_tensor(rng):
    """The same chain times a [B, L, 8] input: the Multiply is no stage of the Convert's."""
    side = opset.parameter([-1, -1, 8], np.float32, name="s")
    model = _positions_model(side)
    conv = next(n for n in Program.from_model(model).nodes if n.kind == "Convert")
    assert conv.fused == [] and conv.grown_by == []
    _, launches = run_counted(model, [{"p": rng.integers(0, 9, (1, 4)).astype(np.int64),
                                "s": randn_f32(rng, 1, 4, 8)}])
    assert launches == [2]
