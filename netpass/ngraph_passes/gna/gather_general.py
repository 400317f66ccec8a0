"""GatherSinkingGeneralForward / Backward (one traversal each) and GatherSinkingGeneral:
forward + ConstantFolding, then backward + ConstantFolding (returns False as OpenVINO's)."""
from __future__ import annotations

from ...core.subgraph import MultiSubGraphOp
from ...ops.indexing import Gather
from ...ops.movement import Reshape, Transpose
from ...passes import BackwardGraphRewrite, GraphRewrite
from ...passes.base import ModelPass
from ..common.constant_folding import run_then_fold
from .gather_conv import (
    GatherSinkingConvolutionBackward,
    GatherSinkingConvolutionForward,
    GatherSinkingPoolBackward,
    GatherSinkingPoolForward,
)
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
    unsupported_transpose,
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
                  GatherSinkingReshapedForward, GatherSinkingConvolutionForward,
                  GatherSinkingPoolForward, GatherSinkingFuse):
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
                  GatherSinkingReduceBackward, GatherSinkingConvolutionBackward,
                  GatherSinkingPoolBackward, GatherSinkingFuse):
            self.add_matcher(p())


class GatherAbsorb(GraphRewrite):
    """Concats and Splits take in the Gathers along their axis.

    A Gather along a Concat's or Split's axis is a reordering of pieces; also across
    Transposes above them (run first: a Gather absorbed where it stands leaves
    nothing to sink)."""

    def __init__(self) -> None:
        super().__init__()
        identity, absorb = RemoveIdentityGather(), GatherConcatAbsorbBackward()
        axis = GatherSinkingTransposeAxisBackward()
        # (the Gather the last one builds above a Transpose is visited next, by the first
        # three: it does what they would, see ``GatherSinkingTransposeAxisBackward._absorbed``)
        axis.absorb = (identity, absorb)
        for p in (identity, GatherSinkingFuse(), absorb, GatherConcatAbsorbForward(),
                  GatherSplitAbsorb(), axis):
            self.add_matcher(p)


def nothing_to_sink(model) -> bool:
    """No member of GatherSinkingGeneral's stages can match in ``model``: every member is
    rooted at a Gather or at an op reading one, but the two that turn a Transpose GNA cannot
    run next to a Reshape into a Gather (GatherSinkingTransposeReshapeForward / Backward), so a
    model holding no Gather and no such Transpose is left as it is by the three traversals
    (on the static GNA flow, whose Transposes reach the inputs, the three traversals looked at
    the whole graph for nothing). A model with bodies is not looked into: the traversals run."""
    for n in model.cached_order():
        if isinstance(n, (Gather, MultiSubGraphOp)):
            return False
        if isinstance(n, Transpose) and unsupported_transpose(n.output(0)) and (
                isinstance(n.input_value(0).node, Reshape)
                or any(isinstance(c.node, Reshape) for c in n.output(0).consumers())):
            return False
    return True


class GatherSinkingGeneral(ModelPass):
    """Forward, then backward Gather sinking, each with folding."""

    def run_on_model(self, model) -> bool:
        if nothing_to_sink(model):
            return False  # spare the three traversals
        for stage in (GatherAbsorb, GatherSinkingGeneralForward, GatherSinkingGeneralBackward):
            run_then_fold(model, self.get_pass_config(), stage(), "GatherSinkingGeneral")
        return False
