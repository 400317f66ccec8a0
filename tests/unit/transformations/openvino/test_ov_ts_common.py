"""Ported from OpenVINO ``src/common/transformations/tests/transpose_sinking/ts_common_test.cpp``
(``TSTestFixture``): every forward and backward sinking pass on its op family, one op or a
chain of them, against the graph OpenVINO expects.

Also the TSTestFixture cases of ``ts_squeeze_test.cpp``. Not ported, with the reason:
FakeQuantize, BatchToSpace and SpaceToBatch (netpass had no such ops when the cases were ported;
it has them now, the cases remain to port); Interpolate, CumSum and Tile (OpenVINO 2024 added
TSInterpolate/TSCumSum/TSTile passes that the GNA-era TSGeneral netpass follows does not have).
"""
from __future__ import annotations

import numpy as np
import pytest
from ov_port import (
    Desc,
    Factory,
    Pre,
    TSCase,
    const,
    gather_of_reversed_order,
    param,
    set_gather_for,
    set_transpose_for,
    transpose,
)
from ts_factories import (
    BINARY,
    COMMON_UNARY,
    LOGICAL_UNARY,
    PAD,
    REDUCTIONS,
    RESHAPE,
    SLICE,
    SPLIT3,
    SQUEEZE,
    UNSQUEEZE,
    concat,
)

from netpass import opset
from netpass.ngraph_passes import transpose_sinking as ts

T = set_transpose_for
LOGICAL_NOT = {"LogicalNot": "netpass's LogicalNot takes boolean input only (OpenVINO builds it on f32)"}


def new_constant(values):
    """Input 1 replaced by a Constant of ``values`` with the old one's type and shape."""
    def step(idxs, outs):
        old = outs[1]
        res = list(outs)
        res[1] = opset.constant(np.array(values, old.element_type.dtype).reshape(old.partial_shape.to_shape())).output(0)
        return res
    return step


def new_transpose(order, index=0):
    def step(idxs, outs):
        res = list(outs)
        res[index] = transpose(outs[index], order).output(0)
        return res
    return step


def _broadcast_order(idxs, outs):
    res = list(outs)
    for i in idxs:
        order = [2, 1, 0] if outs[i].node.type_name == "PRelu" else [0, 3, 2, 1]
        res[i] = transpose(outs[i], order).output(0)
    return res


def P(*steps):
    return Pre(list(steps))


def fwd(name, pass_type, inputs, nums, main, ref_main=None, model_pre=None, ref_pre=None,
        ref_post=None, **kw):
    return TSCase(name, lambda: [pass_type()], inputs, nums,
                  Desc(model_pre or P((T, [0])), main),
                  Desc(ref_pre or P(), ref_main or main, ref_post or P((T, [0]))), **kw)


def bwd(name, pass_type, inputs, nums, main, ref_main=None, ref_pre=None, model_post=None, **kw):
    return TSCase(name, lambda: [pass_type()], inputs, nums,
                  Desc(P(), main, model_post or P((T, [0]))),
                  Desc(ref_pre or P((T, [0])), ref_main or main, P()), **kw)


SLICE_INPUTS = [param([6, 4, 5, 3]), const(np.int32, [3], [1, 2, 3]), const(np.int32, [3], [0, 4, 11]),
                const(np.int32, [3], [1, 2, -1]), const(np.int32, [3], [0, 1, 2])]
PAD_INPUTS = [param([1, 3, 55, 55]), const(np.int32, [4], [1, 2, 3, 4]), const(np.int32, [4], [1, 2, 3, 4])]
NEG_PAD_INPUTS = [param([1, 3, 55, 55]), const(np.int32, [4], [1, -2, -3, -4]),
                  const(np.int32, [4], [1, -2, -3, -4])]

CASES = [
    # -- forward --
    fwd("UnaryForward", ts.TSUnaryForward, [param([1, 96, 55, 55])], [1, 10], COMMON_UNARY, skip=LOGICAL_NOT),
    fwd("LogicalUnaryForward", ts.TSUnaryForward, [param([1, 96, 55, 55])], [1], LOGICAL_UNARY),
    fwd("BinaryForward", ts.TSBinaryForward, [param([1, 96, 55, 55]), param([55, 55, 96, 1])], [1, 10],
        BINARY, ref_pre=P((T, [1]))),
    fwd("BinaryForwardBroadcasted", ts.TSBinaryForward, [param([96, 55, 55]), param([1, 1, 1, 1])],
        [1, 10], BINARY, ref_pre=P((_broadcast_order, [1])), ref_post=P((_broadcast_order, [0])),
        skip={"PRelu": "netpass's PRelu refuses a slope of higher rank than the data ([1,1,1,1] on 3-D)"}),
    fwd("ConcatForward", ts.TSConcatForward,
        [param([1, 96, 55, 55]), param([55, 55, 96, 1]), param([55, 55, 96, 1])], [1, 3],
        [concat(1)], ref_main=[concat(2)], ref_pre=P((T, [1, 2]))),
    fwd("SplitForward", ts.TSSplitForward, [param([1, 9, 55, 55]), const(np.int32, [], [2])], [1, 2],
        [SPLIT3], ref_pre=P((new_constant([1]), [1])), ref_post=P((T, [0, 1, 2])), result_names=False),
    fwd("PadForward", ts.TSDataMovementForward, PAD_INPUTS, [1, 2], [PAD], ref_pre=P((set_gather_for, [1, 2]))),
    fwd("NegativePad12Forward", ts.TSDataMovementForward, NEG_PAD_INPUTS, [1, 2], [PAD],
        ref_pre=P((set_gather_for, [1, 2])),
        skip={"Pad": "the case pads a dimension of 3 by -3 - 3: netpass's Pad refuses a negative size"}),
    fwd("ReductionForward", ts.TSReductionForward, [param([32, 4, 2, 1]), const(np.int32, [2], [1, 3])], [1],
        REDUCTIONS, ref_pre=P((new_constant([2, 0]), [1]))),
    fwd("SqueezeForward", ts.TSSqueezeForward, [param([32, 1, 2, 1]), const(np.int32, [2], [0, 2])], [1],
        [SQUEEZE], ref_pre=P((new_constant([3, 1]), [1]))),
    fwd("UnsqueezeForward", ts.TSUnsqueezeForward, [param([32, 3, 2, 1]), const(np.int32, [2], [0, 2])], [1],
        [UNSQUEEZE], ref_pre=P((new_constant([0, 2]), [1])), ref_post=P((new_transpose([0, 5, 2, 4, 3, 1]), [0]))),
    fwd("SliceForward", ts.TSSliceForward, SLICE_INPUTS, [1], [SLICE],
        ref_pre=P((gather_of_reversed_order, [4]))),
    fwd("ReshapeSqueezeForward", ts.TSSqueezeForward, [param([6, 1, 5, 1, 4]), const(np.int32, [3], [4, 5, 6])],
        [1], [RESHAPE], ref_pre=P((new_constant([6, 5, 4]), [1]))),
    fwd("ReshapeUnsqueezeForward", ts.TSUnsqueezeForward,
        [param([6, 5, 4]), const(np.int32, [5], [4, 1, 5, 1, 6])], [1], [RESHAPE],
        ref_pre=P((new_constant([6, 1, 5, 1, 4]), [1])), ref_post=P((new_transpose([4, 1, 2, 3, 0]), [0]))),
    # -- backward --
    bwd("UnaryBackward", ts.TSUnaryBackward, [param([1, 96, 55, 55])], [1, 10], COMMON_UNARY, skip=LOGICAL_NOT),
    bwd("BinaryBackward", ts.TSBinaryBackward, [param([1, 96, 55, 55]), param([1, 96, 55, 55])], [1, 10],
        BINARY, ref_pre=P((T, [0, 1]))),
    bwd("ConcatBackward", ts.TSConcatBackward, [param([1, 96, 55, 55])] * 3, [1, 3], [concat(1)],
        ref_main=[concat(2)], ref_pre=P((T, [0, 1, 2]))),
    bwd("SplitBackward", ts.TSSplitBackward, [param([1, 9, 55, 55]), const(np.int32, [], [1])], [1, 2],
        [SPLIT3], ref_pre=P((T, [0]), (new_constant([2]), [1])), model_post=P((T, [0, 1, 2])),
        result_names=False),
    bwd("PadBackward", ts.TSDataMovementBackward, PAD_INPUTS, [1, 2], [PAD],
        ref_pre=P((T, [0]), (set_gather_for, [1, 2]))),
    bwd("ReductionBackward", ts.TSReductionBackward, [param([32, 4, 2, 1]), const(np.int32, [2], [1, 3])], [1],
        REDUCTIONS, ref_pre=P((T, [0]), (new_constant([2, 0]), [1]))),
    bwd("UnsqueezeBackward", ts.TSUnsqueezeBackward, [param([32, 3, 2, 1]), const(np.int32, [2], [0, 2])], [1],
        [UNSQUEEZE], ref_pre=P((T, [0]), (new_constant([5, 3]), [1]))),
    bwd("SliceBackward", ts.TSSliceBackward, SLICE_INPUTS, [1], [SLICE],
        ref_pre=P((T, [0]), (gather_of_reversed_order, [4]))),
    bwd("ReshapeSqueezeBackward", ts.TSSqueezeBackward,
        [param([4, 1, 5, 1, 6]), const(np.int32, [3], [4, 5, 6])], [1], [RESHAPE],
        ref_pre=P((new_transpose([4, 1, 2, 3, 0]), [0]), (new_constant([6, 5, 4]), [1]))),
    bwd("ReshapeUnsqueezeBackward", ts.TSUnsqueezeBackward,
        [param([4, 5, 6]), const(np.int32, [5], [4, 1, 5, 1, 6])], [1], [RESHAPE],
        ref_pre=P((T, [0]), (new_constant([6, 1, 5, 1, 4]), [1]))),
]


# ts_squeeze_test.cpp: TSSqueezeForward with 1-3 squeezed axes, on a Constant, and without axes.
def _squeeze_case(i, inputs, new_axes):
    squeeze = Factory("Squeeze", lambda v: opset.squeeze(v[0], v[1]) if len(v) > 1 else opset.squeeze(v[0]))
    pre = P((lambda idxs, outs: outs[:1] + ([new_axes().output(0)] if len(outs) > 1 else []), [1]))
    return fwd(f"TSCommonSqueezeForward_{i}", ts.TSSqueezeForward, inputs, [1], [squeeze], ref_pre=pre)


CASES += [
    _squeeze_case(0, [param([1, 2]), const(np.int32, [1], [1])], const(np.int32, [1], [0])),
    _squeeze_case(1, [param([1, 2, 1]), const(np.int32, [2], [0, 2])], const(np.int32, [2], [2, 0])),
    _squeeze_case(2, [param([1, 1, 2, 1]), const(np.int32, [3], [0, 2, 3])], const(np.int32, [3], [3, 1, 0])),
    _squeeze_case(3, [const(np.int32, [1, 2], [1]), const(np.int32, [1], [1])], const(np.int32, [1], [0])),
    _squeeze_case(4, [param([1, 2])], None),
]


@pytest.mark.parametrize("case, main_index, num_ops", [p for c in CASES for p in c.params()])
def test_ts_common(case, main_index, num_ops):
    case.run(main_index, num_ops)
