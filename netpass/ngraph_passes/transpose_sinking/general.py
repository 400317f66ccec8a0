"""TSGeneralForward / TSGeneralBackward (one traversal each, passes in OpenVINO's order) and
TSGeneral: forward + ConstantFolding, then backward + ConstantFolding (each folding only when
its stage changed something), then the
no_transpose_sinking marks are cleared (OpenVINO 2024's TSResetNoSinkingAttribute)."""
from __future__ import annotations

from ...passes import BackwardGraphRewrite, GraphRewrite
from ...passes.base import ModelPass
from ..common.constant_folding import run_then_fold
from .attr import NO_SINKING, reset_no_sinking
from .base import TSForwardBase
from .concat_split import TSConcatBackward, TSConcatForward, TSSplitBackward, TSSplitForward
from .data_movement import (
    TSDataMovementBackward,
    TSDataMovementForward,
    TSSliceBackward,
    TSSliceForward,
)
from .elementwise import TSBinaryBackward, TSBinaryForward, TSUnaryBackward, TSUnaryForward
from .fuse import TSFuse
from .reduction import (
    TSReductionBackward,
    TSReductionForward,
    TSSqueezeBackward,
    TSSqueezeForward,
    TSUnsqueezeBackward,
    TSUnsqueezeForward,
)

FORWARD = (TSUnaryForward, TSBinaryForward, TSConcatForward, TSSplitForward, TSDataMovementForward,
           TSReductionForward, TSSqueezeForward, TSUnsqueezeForward, TSSliceForward, TSFuse)
BACKWARD = (TSUnaryBackward, TSBinaryBackward, TSConcatBackward, TSSplitBackward,
            TSDataMovementBackward, TSReductionBackward, TSSqueezeBackward, TSUnsqueezeBackward,
            TSSliceBackward, TSFuse)


class TSGeneralForward(GraphRewrite):
    """Every forward transpose sinking pass in one traversal.

    TSFuse is the only member rooted at a Transpose, and a step's new Transposes are the first
    nodes visited after it: a Transpose a step puts on an input right after one whose order it
    undoes is removed by TSFuse at once. The steps cancel such pairs themselves instead of
    building the Transpose (``TSForwardBase.fuser``): ~1700 Transposes and TSFuse matches per
    1000 GNA layout blocks, most of them at a Concat's inputs."""

    def __init__(self) -> None:
        super().__init__()
        passes = [p() for p in FORWARD]
        fuser = passes[FORWARD.index(TSFuse)]
        for p in passes:
            if isinstance(p, TSForwardBase):
                p.fuser = fuser
            self.add_matcher(p)


class TSGeneralBackward(BackwardGraphRewrite):
    """Every backward transpose sinking pass in one traversal."""

    def __init__(self) -> None:
        super().__init__()
        for p in BACKWARD:
            self.add_matcher(p())


class TSResetNoSinkingAttribute(ModelPass):
    """Clears the no_transpose_sinking marks that sinking left."""

    def run_on_model(self, model) -> bool:
        for node in model.cached_order():
            rt = node._rt  # (read directly: this looks at every node; marks are rare)
            if rt and NO_SINKING in rt:
                reset_no_sinking(node)
        return False


class TSGeneral(ModelPass):
    """Forward, then backward transpose sinking, each followed by folding.

    Returns False like OpenVINO's (its members keep shapes valid as they go).
    """

    def run_on_model(self, model) -> bool:
        for stage in (TSGeneralForward, TSGeneralBackward):
            run_then_fold(model, self.get_pass_config(), stage(), "TSGeneral")
        # (OpenVINO registers it in the stage's Manager: a user's PassConfig may disable it)
        if not self.get_pass_config().is_disabled(TSResetNoSinkingAttribute):
            TSResetNoSinkingAttribute().run_on_model(model)
        return False
