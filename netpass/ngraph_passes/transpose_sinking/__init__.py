"""Transpose sinking (OpenVINO's transpose_sinking group): move Transposes forward and backward
through elementwise ops, Concat/Split, Pad/ReverseSequence, reductions, Squeeze/Unsqueeze and
Slice, fuse them, and remove those that cancel, so that they end at a model's edges."""
from __future__ import annotations

from .attr import NO_SINKING, is_sinking_disabled, mark_as_no_sinking, reset_no_sinking
from .base import TSBackwardBase, TSForwardBase
from .concat_split import TSConcatBackward, TSConcatForward, TSSplitBackward, TSSplitForward
from .data_movement import (
                            TSDataMovementBackward,
                            TSDataMovementForward,
                            TSSliceBackward,
                            TSSliceForward,
)
from .elementwise import TSBinaryBackward, TSBinaryForward, TSUnaryBackward, TSUnaryForward
from .fuse import TSFuse, TSFuseShared
from .general import TSGeneral, TSGeneralBackward, TSGeneralForward, TSResetNoSinkingAttribute
from .reduction import (
                            TSReductionAlign,
                            TSReductionBackward,
                            TSReductionForward,
                            TSSqueezeBackward,
                            TSSqueezeForward,
                            TSUnsqueezeBackward,
                            TSUnsqueezeForward,
)
from .utils import update_forward_sinking_ability

UpdateForwardSinkingAbility = update_forward_sinking_ability

__all__ = [
    "NO_SINKING", "TSBackwardBase", "TSBinaryBackward", "TSBinaryForward", "TSConcatBackward",
    "TSConcatForward", "TSDataMovementBackward", "TSDataMovementForward", "TSForwardBase", "TSFuse",
    "TSFuseShared", "TSGeneral", "TSGeneralBackward", "TSGeneralForward", "TSReductionAlign",
    "TSReductionBackward", "TSReductionForward", "TSResetNoSinkingAttribute", "TSSliceBackward",
    "TSSliceForward", "TSSplitBackward", "TSSplitForward", "TSSqueezeBackward", "TSSqueezeForward",
    "TSUnaryBackward", "TSUnaryForward", "TSUnsqueezeBackward", "TSUnsqueezeForward",
    "UpdateForwardSinkingAbility", "is_sinking_disabled", "mark_as_no_sinking", "reset_no_sinking",
    "update_forward_sinking_ability",
]
