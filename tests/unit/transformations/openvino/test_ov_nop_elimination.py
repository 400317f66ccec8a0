"""Ported from OpenVINO ``src/common/transformations/tests/common_optimizations/
nop_elimination.cpp`` (NopElimination): the cases whose ops netpass's rules cover
(``NOP_RULES``: Reshape / Squeeze / Unsqueeze / Broadcast that keep the shape, Convert to the
same type, one-input Concat, ...), each run on the model and checked by op counts (as
OpenVINO's) and by value.

Found and fixed: Reshape, Squeeze and Unsqueeze were no-ops only for equal static shapes;
OpenVINO also drops one whose dynamic shape is the input's with one dynamic dim (the element
count fixes it: ``reshape_reshape_elimination_v1_dynamic``,
``reshape_arithmetical_reduce_elimination_dynamic``) and a 1-D to 1-D Reshape
(``reshape_v1_1D``).

Second round (the rest of the file): Tile by ones over a dynamic shape (``NopTile``), a Gather
of every slice in order (``gather_3d_indices_constant_axis_1``) and a Slice/StridedSlice from 0
"to the end" with step 1 over a dynamic shape (``EliminateStridedSlice*``) were kept; the rules
now bypass them (OpenVINO's NopElimination runs them in CommonOptimizations).
"""
from __future__ import annotations

import numpy as np
import pytest
from ov_port import model_of
from ov_values import feeds, port, run, same_values

from netpass import opset
from netpass.core.shape import PartialShape
from netpass.ngraph_passes.common import NopElimination

NOT_PORTED = {
    "shared_const_einsum_after_common_optimizations": "Einsum and SharedOpOptimization "
    "(shared Constants merged) are not in netpass",
    "convert_type_agnostic": "netpass keeps a Convert that changes the type (its "
    "NopElimination has no type-agnostic-consumer rule)",
    "squeeze_reshape_elimination_check_info / squeeze_unsqueeze_elimination / "
    "squeeze_unsqueeze_overlap_elimination / squeeze_squeeze_overlap_elimination / "
    "unsqueeze_unsqueeze_overlap_elimination / unsqueeze_squeeze_elimination and the later "
    "pair, Gather, Split/Concat, Pad and Loop eliminations":
        "pairs of ops that cancel (Squeeze+Unsqueeze fusion into Reshape, ...): netpass's "
        "NopElimination bypasses single no-op ops only (NOP_RULES, docs/transformations.md); "
        "Reshape pairs fuse in ReshapeSequenceFusion",
    "pass_property": "pass properties (CHANGE_DYNAMIC_STATE) are not in netpass",
    "squeeze_unsqueeze_elimination_dynamic_without_squeeze_axis / reshape_unsqueeze / "
    "reshape_squeeze / reshape_reshape / squeeze_reshape / unsqueeze_reshape / "
    "squeeze_unsqueeze_elimination_negative / SqueezeBinaryReshape": "the same pair fusions "
    "(netpass keeps both ops of a pair unless each is a no-op alone)",
    "EliminateEltwise* / eliminate_eltwise_dequantization_subgraph": "x + 0, x - 0, x * 1, "
    "x / 1 are kept: NopElimination has no eltwise rule",
    "SplitConcatElimination*": "Concat of all of a Split's outputs in order is kept: no rule",
    "gather_to_squeeze / not_gather_to_squeeze_with_vector_indices": "a Gather of one index "
    "of a dim of 1 stays a Gather (OpenVINO rewrites it into a Squeeze)",
    "gather_3d_indices_constant_axis_1 cases with an index past the axis ({1,3,2} index 1 on "
    "axis 0, {3,2,1} index 1 on axis 2)": "OpenVINO drops the Gather because the shapes "
    "match; netpass's Gather gives zeros for an out-of-range index, so it is not a no-op and "
    "stays (its rule needs the indices 0..n-1)",
    "Nopv1Broadcast / Nopv3Broadcast": "a numpy-mode Broadcast to all ones over dynamic dims "
    "is kept: it fixes those dims to 1 (an input that is not all ones fails at run time), and "
    "netpass bypasses a Broadcast only to the same static shape",
    "EliminateSliceBeforeGatherElements / EliminateConcatStridedSlice* / "
    "ScatterNDUpdates15Elimination / EliminateIdentityConvert_* / TransposeWithEmptyOrder / "
    "EliminateStridedSliceByShape*": "rules netpass does not have (an empty-order Transpose "
    "is kept above rank 1, as OpenVINO's test expects)",
}


def _count(model, type_name):
    return sum(n.type_name == type_name for n in model.get_ordered_ops())


def _run_checked(model, shapes=None):
    original = model.clone()
    run(model, NopElimination())
    same_values(model, original, feeds(original, shapes or {}))
    return model


def test_eliminate_convert():
    x = opset.parameter([], np.float32)
    m = _run_checked(model_of([opset.abs(opset.convert(x, np.float32))], [x]))
    assert _count(m, "Convert") == 0


def test_eliminate_broadcast():
    x = opset.parameter([1], np.float32)
    b = opset.broadcast(x, opset.constant(np.array([1], np.uint64)))
    m = _run_checked(model_of([opset.abs(b)], [x]))
    assert _count(m, "Broadcast") == 0


@pytest.mark.parametrize("special_zero", [False, True])
def test_reshape_elimination_v1(special_zero):
    x = opset.parameter([8, 16, 2, 3], np.int64)
    pattern = [8, 16, 6]
    r = opset.reshape(opset.reshape(x, opset.constant(np.array(pattern, np.int64)), special_zero),
                      opset.constant(np.array(pattern, np.int64)), special_zero)
    m = _run_checked(model_of([opset.abs(r)], [x]))
    assert _count(m, "Reshape") == 1


@pytest.mark.parametrize("input_dim, requested", [(7, 7), (7, -1), (-1, -1)])
def test_reshape_v1_1d(input_dim, requested):
    x = opset.parameter([input_dim], np.int64)
    r = opset.reshape(opset.abs(x), opset.constant(np.array([requested], np.int64)), False)
    m = _run_checked(model_of([r], [x]), {0: [7]})
    assert _count(m, "Reshape") == 0


def test_reshape_reshape_elimination_v1_dynamic():
    def build(with_top):
        x = opset.parameter([-1, 32, 1, 128], np.float32)
        y = opset.parameter([-1, 4096], np.float32)
        top = opset.reshape(x, opset.constant(np.array([-1, 32, 1, 128], np.int32)), False) \
            if with_top else x
        bottom = opset.reshape(top, opset.constant(np.array([-1, 4096], np.int32)), False)
        return model_of([opset.add(bottom, y)], [x, y])
    model = build(True)
    port(model, build(False), NopElimination(),
         inputs=feeds(model, {0: [2, 32, 1, 128], 1: [2, 4096]}))


def test_reshape_elimination_v1_dynamic_negative():
    x = opset.parameter(PartialShape.dynamic(), np.int64)
    p = opset.parameter(PartialShape.dynamic(1), np.int64)
    m = run(model_of([opset.abs(opset.reshape(x, p, False))], [x, p]), NopElimination())
    assert _count(m, "Reshape") == 1


@pytest.mark.parametrize("et, reduce", [(np.int64, "mean"), (np.bool_, "logical_and")])
def test_reshape_reduce_elimination_dynamic(et, reduce):
    """``reshape_arithmetical_reduce_elimination_dynamic`` / ``reshape_logical_*``: the
    reduction's ``[?, 96, 1, 1]`` reshaped by ``{0, 96, 1, 1}``."""
    x = opset.parameter([-1, 96, 100, 100], et)
    axes = opset.constant(np.array([2, 3], np.int64))
    red = opset.reduce_mean(x, axes, True) if reduce == "mean" else \
        opset.reduce_logical_and(x, axes, True)
    r = opset.reshape(red, opset.constant(np.array([0, 96, 1, 1], np.int64)), True)
    tail = opset.abs(r) if reduce == "mean" else opset.non_zero(r)
    m = _run_checked(model_of([tail], [x]), {0: [1, 96, 100, 100]})
    assert _count(m, "Reshape") == 0


def test_reshape_elimination_v1_check_consumer_count():
    x = opset.parameter([8, 16, 1, 3], np.float32)
    r1 = opset.reshape(x, opset.constant(np.array([128, 3], np.int64)), False)
    r2 = opset.reshape(r1, opset.constant(np.array([8, 16, 1, 3], np.int64)), False)
    m = _run_checked(model_of([r2, opset.relu(r1)], [x]))
    assert _count(m, "Reshape") == 2


@pytest.mark.parametrize("shape, consumer, kept", [
    ([2, 3], None, 1), ([2, 3], "abs", 0), ([-1, 3], "abs", 0)],
    ids=["single_node", "single_input", "single_input_dynamic"])
def test_concat_elimination(shape, consumer, kept):
    x = opset.parameter(shape, np.float32)
    c = opset.concat([x], 0)
    m = _run_checked(model_of([opset.abs(c) if consumer else c], [x]), {0: [2, 3]})
    assert _count(m, "Concat") == kept


def test_unsqueeze_elimination():
    x = opset.parameter([3, -1, -1], np.float32)
    m = run(model_of([opset.unsqueeze(x, opset.constant(np.int64(0)))], [x]), NopElimination())
    assert _count(m, "Unsqueeze") == 1


@pytest.mark.parametrize("shape", [[-1, -1, -1, -1], [2, 3, 4, 5]])
def test_nop_tile(shape):
    x = opset.parameter(shape, np.float32)
    t = opset.tile(x, opset.constant(np.array([1, 1, 1, 1], np.int32)))
    m = _run_checked(model_of([opset.relu(t)], [x]), {0: [2, 3, 4, 5]})
    assert _count(m, "Tile") == 0


def test_tile_by_ones_adding_axes_stays():
    x = opset.parameter([-1, 3], np.float32)
    t = opset.tile(x, opset.constant(np.array([1, 1, 1], np.int32)))
    m = _run_checked(model_of([opset.relu(t)], [x]), {0: [2, 3]})
    assert _count(m, "Tile") == 1


@pytest.mark.parametrize("i32", [True, False])
@pytest.mark.parametrize("multiout", [True, False])
@pytest.mark.parametrize("shape, indices, axis, kept", [
    ([3, 2, 1], [0, 1], 1, 0), ([3, 2, 1], [-2, 1], -2, 0), ([1, 16], [0, 0], 0, 1),
    ([3, 2, 1], [1, 0], 1, 1)])
def test_gather_3d_indices_constant_axis_1(i32, multiout, shape, indices, axis, kept):
    et = np.int32 if i32 else np.int64
    x = opset.parameter(shape, np.float32)
    src = opset.topk(x, opset.constant(np.int64(1)), len(shape) - 1, "max", "none").output(0) \
        if multiout else opset.abs(x)
    g = opset.gather(src, opset.constant(np.array(indices, et)), opset.constant(et(axis)))
    m = _run_checked(model_of([opset.abs(g)], [x]))
    assert _count(m, "Gather") == kept


def _ss(x, begin, end, strides, begin_mask, end_mask, end_type=np.int64):
    return opset.strided_slice(
        x, opset.constant(np.array(begin, np.int32)), opset.constant(np.array(end, end_type)),
        opset.constant(np.array(strides, np.int32)), begin_mask, end_mask)


@pytest.mark.parametrize("end, end_type", [(2**63 - 1, np.int64), (2**31 - 1, np.int32)],
                         ids=["int64max", "int32max"])
def test_eliminate_strided_slice(end, end_type):
    x = opset.parameter([-1, 4, -1, 64], np.float32)
    relu = opset.relu(x)
    model = model_of([_ss(relu, [0, 0], [0, end], [1, 1], [1, 0, 1, 1], [1, 0, 1, 1],
                          end_type)], [x])
    x = opset.parameter([-1, 4, -1, 64], np.float32)
    port(model, model_of([opset.relu(x)], [x]), NopElimination(),
         inputs=feeds(model, {0: [2, 4, 3, 64]}))


@pytest.mark.parametrize("end, kept", [(2**31 - 1, 0), (-1, 1)], ids=["to_the_end", "negative"])
def test_eliminate_strided_slice_by_shape(end, kept):
    """``EliminateStridedSliceByShape`` / ``...Negative``: end -1 drops the last element."""
    x = opset.parameter([1, 4, 8, 64], np.float32)
    m = _run_checked(model_of([_ss(opset.relu(x), [0, 0], [0, end], [1, 1], [1, 0], [1, 0])],
                              [x]))
    assert _count(m, "StridedSlice") == kept


@pytest.mark.parametrize("et, stop", [(np.int64, 2**63 - 1), (np.int32, 2**31 - 1)],
                         ids=["EliminateSlice", "int32max"])
@pytest.mark.parametrize("shape", [[3, 6, 9], [-1, -1, 9]], ids=["static", "dynamic"])
def test_eliminate_slice(et, stop, shape):
    x = opset.parameter(shape, np.float32)
    c = [opset.constant(np.array([v], et)) for v in (0, stop, 1, 1)]
    m = _run_checked(model_of([opset.relu(opset.slice(x, *c))], [x]), {0: [3, 6, 9]})
    assert _count(m, "Slice") == 0


def test_slice_with_step_2_stays():
    x = opset.parameter([-1, 6], np.float32)
    c = [opset.constant(np.array([v], np.int64)) for v in (0, 2**63 - 1, 2, 1)]
    m = _run_checked(model_of([opset.relu(opset.slice(x, *c))], [x]), {0: [3, 6]})
    assert _count(m, "Slice") == 1


def test_transpose_elimination():
    x = opset.parameter([1, 2], np.float32)
    t = opset.transpose(opset.relu(x), opset.constant(np.array([0, 1], np.int32)))
    model = model_of([t], [x])
    x = opset.parameter([1, 2], np.float32)
    port(model, model_of([opset.relu(x)], [x]), NopElimination())


def test_topk_convert_elimination():
    x = opset.parameter([20, 3, 4], np.float32)
    topk = opset.topk(opset.abs(x), opset.constant(np.int64(10)), 0, "max", "none")
    c = opset.convert(topk.output(0), np.float32)
    m = _run_checked(model_of([opset.abs(c)], [x]))
    assert _count(m, "Convert") == 0
