"""GatherND over a grid of aranges as a Slice and a Reshape (netpass.runtime.gather_grid): the
dynamo exporter's padding mask, proven by the index forms (a Broadcast's too), runs as views
and gives the reference's values; grids in another order stay GatherNDs."""
from __future__ import annotations

import numpy as np
import pytest

import netpass
from netpass import Model, opset
from netpass.runtime import compile_program
from netpass.runtime.index_forms import form_of
from netpass.testing import RUNTIME_DEVICE

I64 = np.int64


def _dim(x, axis: int):
    """Dim ``axis`` of ``x`` as a scalar (as the exporter reads a length)."""
    return opset.squeeze(opset.gather(opset.shape_of(x), np.array([axis], I64), I64(0)),
                         np.array([0], I64))


def _mask_gather(mask, length, swapped=False):
    """dynamo's ``mask[arange(B)[:, None, None, None], arange(L)[None, None, None, :]]``: the
    two aranges unsqueezed, broadcast to their Maximum's shape, stacked on a last axis, then
    GatherND (``swapped``: the components the other way round, a transposed gather)."""
    rb = opset.range(I64(0), _dim(mask, 0), I64(1), np.int64)
    rl = opset.range(I64(0), length, I64(1), np.int64)
    ub = opset.unsqueeze(rb, np.array([1, 2, 3], I64))
    ul = opset.unsqueeze(rl, np.array([0, 1, 2], I64))
    target = opset.shape_of(opset.maximum(ub, ul))
    pieces = [opset.unsqueeze(opset.broadcast(u, target, "bidirectional"), np.array([-1], I64))
              for u in ((ul, ub) if swapped else (ub, ul))]
    return opset.gather_nd(mask, opset.concat(pieces, -1), 0)


def _model(swapped=False):
    """scores [B, 1, 1, L] + 1000 * (mask's first L columns, gathered), L read off scores."""
    mask = opset.parameter([-1, -1], np.float32, name="mask")
    scores = opset.parameter([-1, 1, 1, -1], np.float32, name="scores")
    picked = _mask_gather(mask, _dim(scores, 3), swapped)
    y = opset.add(scores, opset.multiply(picked, np.float32(1000.0))) if not swapped else picked
    return Model([opset.result(y, name="y")], [mask, scores])


def _same(got, want):
    """The reference's values up to the rounding of ``scores + 1000 * mask`` (a GPU contracts
    it to one fused multiply-add: 1 ulp)."""
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)


def _kinds(cm):
    return {n.kind for n in cm.program.nodes}


@pytest.mark.parametrize("b, n, length", [(1, 7, 7), (2, 5, 5), (3, 6, 4), (1, 1, 1)])
def test_the_mask_gather_runs_as_views(rng, b, n, length):
    """No GatherND left (nor the grid: the shapes come from the indices' shape); the values
    are the reference's, the mask longer than the scores' length too."""
    model = _model()
    cm = compile_program(model, RUNTIME_DEVICE)
    assert "GatherND" not in _kinds(cm)
    feeds = {"mask": rng.standard_normal((b, n)).astype(np.float32),
             "scores": rng.standard_normal((b, 1, 1, length)).astype(np.float32)}
    _same(cm.create_infer_request().infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"])


def test_one_request_over_growing_lengths(rng):
    """A decoding loop's lengths through one request (its step plans replay the views)."""
    model = _model()
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    for length in (4, 5, 6, 7, 8, 9):
        feeds = {"mask": rng.standard_normal((1, length)).astype(np.float32),
                 "scores": rng.standard_normal((1, 1, 1, length)).astype(np.float32)}
        _same(req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"])


def test_a_transposed_grid_stays_a_gather(rng):
    """Components in the other order pick ``mask[j, i]``: not a slice, left to GatherND."""
    model = _model(swapped=True)
    cm = compile_program(model, RUNTIME_DEVICE)
    assert "GatherND" in _kinds(cm)
    feeds = {"mask": rng.standard_normal((4, 4)).astype(np.float32),
             "scores": rng.standard_normal((4, 1, 1, 4)).astype(np.float32)}
    np.testing.assert_array_equal(cm.create_infer_request().infer(feeds)["y"],
                                  netpass.reference.infer(model, feeds)["y"])


def test_broadcast_keeps_a_slope_where_the_dims_are_the_same():
    """A Broadcast's form: an arange broadcast along its own (same) dim keeps its slope; where
    the input may stretch (a dynamic dim of another size) the slope is unknown."""
    x = opset.parameter([-1], np.float32, name="x")
    r = opset.range(I64(0), _dim(x, 0), I64(1), np.int64)
    same = opset.broadcast(opset.unsqueeze(r, np.array([0], I64)),
                           opset.shape_of(opset.unsqueeze(r, np.array([0], I64))), "numpy")
    other = opset.parameter([-1, -1], np.float32, name="other")
    stretched = opset.broadcast(opset.unsqueeze(r, np.array([0], I64)), opset.shape_of(other),
                                "numpy")
    model = Model([opset.result(same, name="a"), opset.result(stretched, name="b")], [x, other])
    prog = compile_program(model, RUNTIME_DEVICE).program
    a, b = (next(n for n in prog.nodes if n.is_result and n.name == name).inputs[0][0]
            for name in ("a", "b"))
    assert form_of(a).base == 0 and form_of(a).slopes == (0, 1)
    assert form_of(b).slopes[1] is None


@pytest.mark.parametrize("index", [[[-2]], [[0]], [[5]], [[-1]], [2], [-6]])
def test_one_constant_index_tuple_is_a_slice(rng, index):
    """GatherND of constant indices holding one tuple (Falcon's dynamo export, ``x[-2]`` of the
    fused projection): a Slice (and a Squeeze where the indices have fewer leading dims than
    components), no GatherND; the reference's values."""
    x = opset.parameter([6, -1, 4], np.float32, name="x")
    y = opset.gather_nd(x, np.array(index, I64), 0)
    model = Model([opset.result(opset.multiply(y, np.float32(2.0)), name="y")], [x])
    cm = compile_program(model, RUNTIME_DEVICE)
    assert "GatherND" not in _kinds(cm)
    feeds = {"x": rng.standard_normal((6, 3, 4)).astype(np.float32)}
    np.testing.assert_array_equal(cm.create_infer_request().infer(feeds)["y"],
                                  netpass.reference.infer(model, feeds)["y"])


@pytest.mark.parametrize("index", [[[6]], [[0], [1]], [[[0]], [[1]]], [1, 2], [[[3]]]])
def test_indices_out_of_range_or_several_stay_gathers(rng, index):
    """An index past the static dim, several tuples, a component along a dynamic dim (its
    range unknown), more leading dims than components: left to GatherND."""
    x = opset.parameter([6, -1, 4], np.float32, name="x")
    model = Model([opset.result(opset.gather_nd(x, np.array(index, I64), 0), name="y")], [x])
    cm = compile_program(model, RUNTIME_DEVICE)
    assert "GatherND" in _kinds(cm)
    if index != [[6]]:
        feeds = {"x": rng.standard_normal((6, 3, 4)).astype(np.float32)}
        np.testing.assert_array_equal(cm.create_infer_request().infer(feeds)["y"],
                                      netpass.reference.infer(model, feeds)["y"])
