"""GatherSinkingGeneralForward / Backward (one traversal each) and GatherSinkingGeneral:
forward + ConstantFolding, then backward + ConstantFolding (returns False as OpenVINO's)."""
from __future__ import annotations

from ...ops.indexing import Gather
from ...ops.movement import Transpose
from ...passes import BackwardGraphRewrite, GraphRewrite
from ...passes.base import ModelPass
from ..common.constant_folding import run_then_fold
from .gather_movement import (
    GatherConcatAbsorbBackward,
    GatherConcatAbsorbForward,
    GatherSinkingConcatBackward,
    GatherSinkingConcatForward,
    GatherSinkingReduceBackward,
    GatherSinkingReduceForward,
    GatherSinkingReshapedForward,
    GatherSinkingTransposeAxisBackward,
    GatherSinkingTransposeAxisForward,
    GatherSplitAbsorb,
    RemoveIdentityGather,
)
from .gather_sinking import (
    GatherSinkingBinaryForward,
    GatherSinkingFuse,
    GatherSinkingMatmulForward,
    GatherSinkingReshapeForward,
    GatherSinkingSplitForward,
    GatherSinkingUnaryForward,
)
from .gather_sinking_backward import (
    GatherSinkingBinaryBackward,
    GatherSinkingMatmulBackward,
    GatherSinkingReshapeBackward,
    GatherSinkingSplitBackward,
    GatherSinkingUnaryBackward,
)
from .gather_transpose import (
    GatherSinkingTransposeReshapeBackward,
    GatherSinkingTransposeReshapeForward,
)


class GatherSinkingGeneralForward(GraphRewrite):
    """Every forward Gather sinking pass in one traversal."""

    def __init__(self) -> None:
        super().__init__()
        for p in (RemoveIdentityGather, GatherSinkingUnaryForward, GatherSinkingBinaryForward,
                  GatherSinkingTransposeReshapeForward, GatherSinkingMatmulForward,
                  GatherSinkingReshapeForward, GatherSinkingSplitForward, GatherSplitAbsorb,
                  GatherConcatAbsorbForward, GatherSinkingConcatForward,
                  GatherSinkingTransposeAxisForward, GatherSinkingReduceForward,
                  GatherSinkingReshapedForward, GatherSinkingFuse):
            self.add_matcher(p())


class GatherSinkingGeneralBackward(BackwardGraphRewrite):
    """Every backward Gather sinking pass in one traversal."""

    def __init__(self) -> None:
        super().__init__()
        for p in (RemoveIdentityGather, GatherSinkingUnaryBackward, GatherSinkingBinaryBackward,
                  GatherSinkingTransposeReshapeBackward, GatherSinkingReshapeBackward,
                  GatherSinkingMatmulBackward, GatherSinkingSplitBackward,
                  GatherConcatAbsorbBackward, GatherSinkingConcatBackward,
                  GatherSinkingTransposeAxisBackward,
                  GatherSinkingReduceBackward, GatherSinkingFuse):
            self.add_matcher(p())


class GatherAbsorb(GraphRewrite):
    """Concats and Splits take in the Gathers along their axis.

    A Gather along a Concat's or Split's axis is a reordering of pieces; also across
    Transposes above them (run first: a Gather absorbed where it stands leaves
    nothing to sink)."""

    def __init__(self) -> None:
        super().__init__()
        for p in (RemoveIdentityGather, GatherSinkingFuse, GatherConcatAbsorbBackward,
                  GatherConcatAbsorbForward, GatherSplitAbsorb, GatherSinkingTransposeAxisBackward):
            self.add_matcher(p())


class GatherSinkingGeneral(ModelPass):
    """Forward, then backward Gather sinking, each with folding."""

    def run_on_model(self, model) -> bool:
        if not any(isinstance(n, (Gather, Transpose)) for n in model.get_ordered_ops()):
            return False  # nothing to turn into a Gather or to sink: spare the traversals
        for stage in (GatherAbsorb, GatherSinkingGeneralForward, GatherSinkingGeneralBackward):
            run_then_fold(model, self.get_pass_config(), stage(), "GatherSinkingGeneral")
        return False
