"""GnaTransformationsPipeline: the whole GNA ngraph stage, in the GNA plugin's order.

1. InitNodeInfo; DecomposeMVN (when MVN is present); CommonOptimizations' rewrites in one
   traversal with ConvertGlobalAvgPoolToReduceMean, ConvertSteppedSliceToMatMul,
   ReshapeElementwiseReorder and ReshapeSequenceFusion (GnaCommonOptimizations) +
   ConstantFolding, SliceToStridedSlice disabled when the
   model has Slice and the layout block runs (transpose sinking cannot cross a StridedSlice);
   RemoveInputConvert / RemoveOutputConvert, LSTM/GRU sequence unrolling and cell
   decomposition, ReorderActivationAndPooling, RemoveSingleInputConcat, ConvertGatherToSlice
   (one traversal) +
   ConstantFolding of the split weights.
2. The layout block, when the model has Convolution, MaxPool, MVN or MatMul (netpass also runs
   it for any model holding a Transpose or Gather, so that those reach the edges too):
   ReplaceGnaNHWCLayers (also GroupConvolution), GatherSinkingTranspose + GatherAbsorb,
   TransposeMatMulForward, TSGeneral (GNA callbacks on the Concat/Split members),
   TransposeCompress, GNA TSConcatForward, GNA TSSplitBackward,
   GatherSinkingGeneral, ReshapeElementwiseReorder, ReshapeSequenceFusion, TransposeToReshape,
   TSFuse, NopElimination, MergeSharedLayoutOps, then GatherSinkingAfterCleanup (Gather
   sinking and that cleanup again where a static Gather is left inside) and GnaReshapeLayouts
   (a Gather left between Reshapes split into a spatial Transpose, a Reshape and a channel
   Gather, then another round: spatial_layout.py), then GatherIntoProducerCopy (a Gather left
   on a MatMul by constant weights or a Concat that other ops read too: a copy of the
   producer computing the gathered order).
   Between TSGeneral and TransposeCompress, RescueStuckTransposes moves Transposes of a static
   shape that GNA cannot run and that are stuck inside the graph: first backward sinking
   without the GNA axis callbacks (reaching the inputs wins over the Concat/Split axis, which
   GNA's concat/split alignment then handles; fused Transposes are not marked, so they move
   on; reductions that drop their axes read a sibling Transpose, TSReductionAlign; equal
   Transposes of one value merged), then, for those still stuck, forward sinking of the
   Transposes that do not wait at an input (down to a Reshape, where they become Gathers, or
   to a Result), with TSFuseShared fusing the Transpose pairs it leaves. When that forward
   stage ran, the pipeline warns at its end of each Transpose left inside that an Add joins with
   the same value in another layout (``layout_conflict``: no sinking can remove those). The
   backward stages also move a Transpose of the spatial axes above a GNAConvolution or
   GNAMaxPool (TSGnaSpatialBackward).
3. The Slice workaround: SliceToStridedSlice then ConvertStridedSliceToCrop (always; any
   StridedSlice is a crop for GNA), in one traversal with ConvertSliceToCrop, which makes the
   same CropIE of a Slice at once where the two would.

Stages (``GnaTransformationsPipeline().stages()``), where ``insert_before`` /
``insert_after`` put a user's passes: InitNodeInfo, DecomposeMVN, CommonOptimizations
(GnaCommonOptimizations + ConstantFolding), Preparation (the single-traversal members of step 1
+ ConstantFolding), ReplaceGnaNHWCLayers, GatherSinkingTranspose (+ GatherAbsorb),
TransposeMatMulForward, TSGeneral, RescueStuckTransposes, GnaTransposeRewrites
(TransposeCompress, TSConcatForward, TSSplitBackward), GatherSinkingGeneral, LayoutCleanup
(ReshapeElementwiseReorder, ReshapeSequenceFusion, TransposeToReshape, TSFuse, NopElimination,
MergeSharedLayoutOps; GatherSinkingAfterCleanup; GnaReshapeLayouts; GatherIntoProducerCopy),
SliceToCrop (step 3) and FinalNodeInfo.

Passes whose root op type the model lacks are not registered, and single-traversal members
share GraphRewrites, so a large model is walked as few times as possible.
"""
from __future__ import annotations

from itertools import compress, repeat
from typing import Any

from ...core.gc_pause import gc_paused
from ...core.node import Node
from ...core.subgraph import MultiSubGraphOp
from ...errors import NetpassError
from ...ops.attention import ScaledDotProductAttention
from ...ops.convolution import Convolution, GroupConvolution
from ...ops.elementwise import Convert
from ...ops.indexing import Gather
from ...ops.matmul import MatMul
from ...ops.movement import Concat, Slice, Split, Transpose, VariadicSplit
from ...ops.normalization import MVN
from ...ops.pooling import AvgPool, MaxPool
from ...ops.recurrent import GRUCell, GRUSequence, LSTMCell, LSTMSequence
from ...passes import BackwardGraphRewrite, GraphRewrite, Manager, MatcherPass, PassConfig
from ...passes.base import ModelPass
from ..common import (
    BatchNormDecomposition,
    ConstantFolding,
    ConvertDivide,
    ConvertGlobalAvgPoolToReduceMean,
    GRUCellDecomposition,
    GRUSequenceUnrolling,
    InitNodeInfo,
    LSTMCellDecomposition,
    LSTMSequenceUnrolling,
    NopElimination,
    ReshapeElementwiseReorder,
    ReshapeSequenceFusion,
    ScaledDotProductAttentionDecomposition,
    SliceToStridedSlice,
    TransposeToReshape,
)
from ..common.constant_folding import run_then_fold
from ..transpose_sinking import (
    TSFuse,
    TSFuseShared,
    TSGeneral,
    TSGeneralForward,
    TSReductionAlign,
    TSResetNoSinkingAttribute,
)
from ..transpose_sinking.general import BACKWARD, FORWARD
from ..transpose_sinking.reduction import REDUCTION_TYPES
from ..transpose_sinking.regions import TSBackwardRegions
from ..transpose_sinking.utils import is_const_transpose
from ..utils import nested_manager, static_shape
from .decompose_mvn import DecomposeMVN
from .gather_general import GatherAbsorb, GatherSinkingGeneral
from .gather_producer_copy import GatherIntoProducerCopy
from .gather_to_slice import ConvertGatherToSlice
from .gather_transpose import GatherSinkingTranspose, unsupported_transpose
from .layout_conflict import warn_interior_layout_ops, warn_layout_conflicts
from .limitations import (
    at_model_edge,
    either,
    gna_pass_config,
    interior_layout_ops,
    is_transpose_supported,
    reads_parameter,
)
from .misc import (
    MergeSharedLayoutOps,
    RemoveInputConvert,
    RemoveOutputConvert,
    RemoveSingleInputConcat,
    ReorderActivationAndPooling,
    has_twin,
)
from .replace_nhwc import ReplaceGnaNHWCLayers
from .result_layout import ResultsTakeInverseTranspose, yields_to_results
from .slice_to_crop import ConvertSliceToCrop
from .spatial_layout import TSGnaSpatialBackward, reshape_gather_split, split_reshape_gathers
from .stepped_slice_to_matmul import ConvertSteppedSliceToMatMul
from .strided_slice_to_crop import ConvertStridedSliceToCrop
from .transpose_compress import TransposeCompress
from .transpose_matmul import TransposeMatMulForward
from .ts_concat_split import TSConcatForward, TSSplitBackward

# Op classes that make the layout stages run (classes are compared exactly: the op types a
# model holds are the classes of its nodes).
LAYOUT_TRIGGERS = frozenset({Convolution, GroupConvolution, MaxPool, AvgPool, MVN, MatMul,
                             Transpose, Gather})

# Single-traversal members of stage 1, with the op types they start from.
PREPARATION: tuple[tuple[type[MatcherPass], set[type[Node]]], ...] = (
    (RemoveInputConvert, {Convert}), (RemoveOutputConvert, {Convert}),
    (LSTMSequenceUnrolling, {LSTMSequence}), (GRUSequenceUnrolling, {GRUSequence}),
    (GRUCellDecomposition, {GRUCell, GRUSequence}),
    (LSTMCellDecomposition, {LSTMCell, LSTMSequence}),
    (ReorderActivationAndPooling, {MaxPool}), (RemoveSingleInputConcat, {Concat}),
    (ConvertGatherToSlice, {Gather}),
    (ScaledDotProductAttentionDecomposition, {ScaledDotProductAttention}),
)


class GnaCommonOptimizations(GraphRewrite):
    """CommonOptimizations' rewrites in one traversal (the pipeline folds around them)."""

    def __init__(self) -> None:
        super().__init__()
        for p in (NopElimination, BatchNormDecomposition, ConvertDivide, SliceToStridedSlice,
                  ConvertGlobalAvgPoolToReduceMean, ConvertSteppedSliceToMatMul,
                  ReshapeElementwiseReorder, ReshapeSequenceFusion):
            self.add_matcher(p())


class GnaLayoutCleanup(GraphRewrite):
    def __init__(self) -> None:
        super().__init__()
        for p in (ReshapeElementwiseReorder, ReshapeSequenceFusion, TransposeToReshape, TSFuse,
                  NopElimination, MergeSharedLayoutOps):
            self.add_matcher(p())


class GnaTransposeRewrites(GraphRewrite):
    """TransposeCompress, TSConcatForward and TSSplitBackward in one traversal.

    The last two start from a Transpose GNA cannot run that a Concat reads or that reads a
    Split, and none of the three makes one (TransposeCompress's Transposes are ones GNA runs):
    on a model holding no such pair only TransposeCompress is offered the nodes, so the
    traversal visits the Transposes alone, not every Concat and Split (0.17 -> 0.02 s CPU on
    the static GNA flow at 100k nodes). TransposeCompress too starts from such a Transpose
    only (of a static shape): on a model holding none, nothing is traversed (the dynamic GNA
    flow at 100k nodes: 8.8k Transposes of a dynamic shape offered to it, ~0.1 s)."""

    def __init__(self) -> None:
        super().__init__()
        for p in (TransposeCompress, TSConcatForward, TSSplitBackward):
            self.add_matcher(p())

    def run_on_model(self, model) -> bool:
        ops = model.cached_order()
        kinds = set(map(type, ops))
        if any(issubclass(k, MultiSubGraphOp) for k in kinds):
            return super().run_on_model(model)
        # (the Transposes picked out at C level: this looks at every node of the model)
        unsupported = [t for t in compress(ops, map(isinstance, ops, repeat(Transpose)))
                       if unsupported_transpose(t.output(0))] \
            if any(issubclass(k, Transpose) for k in kinds) else []
        if not unsupported:
            return False
        if any(_meets_concat_or_split(t) for t in unsupported):
            return super().run_on_model(model)
        active: list[MatcherPass] = [mp for mp in self._active()
                                     if isinstance(mp, TransposeCompress)]
        if not active:
            return False
        with gc_paused():
            return self._traverse(model, active)


def _meets_concat_or_split(transpose: Node) -> bool:
    """A Concat reads ``transpose`` or it reads a Split (where GNA's TSConcatForward and
    TSSplitBackward may start)."""
    return isinstance(transpose.input_value(0).node, (Split, VariadicSplit)) or \
        any(isinstance(c.node, Concat) for c in transpose.output(0).consumers())


def stuck_transposes(model) -> list:
    """Transposes of a static shape that GNA cannot run, inside the graph. (GNA compiles
    static models only: a Transpose of a dynamic shape has no GNA verdict to aim at, and
    moving it cannot make the model one GNA runs.)

    ``interior_layout_ops``' Transposes, told cheapest test first: the shape, then the
    verdict, then the walk to the model's edges (which it also took for every Gather; on the
    dynamic GNA flow at 100k nodes, 6k Transposes and 6k Gathers of a dynamic shape, 82 ms)."""
    ops = model.cached_order()
    stuck = []
    for n in compress(ops, map(isinstance, ops, repeat(Transpose))):
        shape = static_shape(n.input_value(0))
        if shape is not None and not is_transpose_supported(shape) and not at_model_edge(n):
            stuck.append(n)
    return stuck


class RescueStuckTransposes(ModelPass):
    """Backward sinking without the GNA axis callbacks, then (if still needed) forward sinking
    of the Transposes that do not read a Parameter; each only when some are stuck (of a static
    shape: ``stuck_transposes``; a model with a dynamic batch is left as TSGeneral left it, as
    GNA compiles it only once its shapes are static). Both obey
    ``user_config`` (the pipeline's caller's PassConfig; default: this pass's own), which is
    read, not changed.

    The backward stage's TSFuse does not mark the Transposes it fuses (OpenVINO's marks a fused
    Transpose whose consumer forward sinking cannot pass, so that its backward stage leaves
    what its forward stage sank; no forward stage precedes this one). Marked, a stuck
    Transpose that met the one above it stopped there, and the forward stage sank every such
    pair back down to the next one: on chains of the GNA layout blocks that moved each
    Transpose over the whole graph twice; unmarked, the fused Transposes carry on to the
    inputs and the forward stage mostly has nothing left to do. TSBackwardRegions takes the
    backward stage's steps on a shadow of the graph first (the traversal after it finds what
    it did not model): each op crossed is rewritten once instead of a Transpose being built and
    dropped at every op.

    After the backward stage, TSReductionAlign rounds (each then backward sinking again):
    ``x + Unsqueeze(ReduceMean(x, keepdims=0))`` reached ``x`` as a Transpose on one branch and
    the reduction reading ``x`` in another order on the other, which no sinking step joins.
    Then MergeSharedLayoutOps: branches of one input each bring a Transpose up to it, and an
    input with two readers cannot be cut out (``reads_parameter``), equal ones become one. The
    forward stage leaves a node alone only when every Transpose it reads waits at an input
    (``x1 + x`` with ``x`` also read elsewhere sinks both down).

    The forward stage also runs TSFuseShared on the Transpose pairs it leaves whose first
    Transpose has other consumers (TSFuse refuses those; in OpenVINO's TSGeneral the backward
    traversal's TSFuse fuses some of them later, but nothing follows here): without it a ViT
    keeps a Transpose pair at every layer norm after the first and a GPT-2 key cache keeps
    two Transposes where one suffices."""

    def __init__(self, user_config: PassConfig | None = None) -> None:
        super().__init__()
        self.user_config = user_config
        # Whether the forward stage ran (some were still stuck): the pipeline then looks for
        # layout conflicts once it is done.
        self.forwarded = False

    def run_on_model(self, model) -> bool:
        user = self.user_config if self.user_config is not None else self.get_pass_config()
        stuck = stuck_transposes(model)
        if not stuck:
            return False

        def merge(model) -> None:
            manager = nested_manager(user.copy(), "RescueMerge")
            manager.register_pass(GraphRewrite(MergeSharedLayoutOps()))
            manager.run_passes(model)
        # (equal Transposes of one input, each stuck only for the other, are one Transpose at
        # the input: merged first, or the backward stage moves them apart, as in
        # ``x + tanh(conv(x))`` whose Add it took back to x's layout)
        if any(map(has_twin, stuck)):
            merge(model)
            if not stuck_transposes(model):
                return False

        def backward() -> BackwardGraphRewrite:
            return BackwardGraphRewrite(*(TSFuse(mark_fused=False) if p is TSFuse else p()
                                          for p in BACKWARD), TSGnaSpatialBackward())
        run_then_fold(model, user.copy(), TSBackwardRegions(), "RescueBackward", backward())
        # (reductions that left their data two readers read one Transpose, then backward
        # again, until none moves; a reduction moves once per level it climbs, so the number
        # of ops bounds the rounds)
        ops = model.cached_order()
        if any(isinstance(n, REDUCTION_TYPES) and not n.keep_dims for n in ops):
            for _ in range(len(ops)):
                if not run_then_fold(model, user.copy(), GraphRewrite(TSReductionAlign()),
                                     "RescueAlign"):
                    break
                run_then_fold(model, user.copy(), backward(), "RescueBackward")
        # (branches of one input each bring their own Transpose up to it: equal ones become
        # one, which the input's pre-processing takes, before they count as stuck)
        merge(model)
        stuck = stuck_transposes(model)
        if not stuck:
            return False
        # (a model output reading a value beside a stuck Transpose stops it: the output takes
        # the inverse, the Transpose sinks on; kept only where none is left stuck, tried on a
        # copy: where some stay, the forward stage makes Gathers of them, and GPT-2's key cache
        # traded two Transposes for four Gathers)
        if any(map(yields_to_results, stuck)):
            def results_yield(model) -> None:
                if run_then_fold(model, user.copy(), GraphRewrite(ResultsTakeInverseTranspose()),
                                 "RescueResults"):
                    run_then_fold(model, user.copy(), backward(), "RescueBackward")
                    merge(model)
            trial = model.clone()
            results_yield(trial)
            if not stuck_transposes(trial):
                results_yield(model)
                return False

        def at_input(node) -> bool:
            # (refused only when every Transpose it reads waits at an input: one that is
            # stuck, say on an input read twice, sinks on along with the others)
            transposes = [v.node for v in node.input_values() if is_const_transpose(v.node)]
            return bool(transposes) and all(map(reads_parameter, transposes))
        forward_config = user.copy()
        for pass_type in FORWARD:
            if pass_type is not TSFuse:
                forward_config.set_callback(either(user.get_callback(pass_type), at_input),
                                            pass_type)
        forward = TSGeneralForward()
        forward.add_matcher(TSFuseShared())
        run_then_fold(model, forward_config, forward, "RescueForward")
        self.forwarded = True
        return False


class RescueAfterGatherSinking(ModelPass):
    """Another RescueStuckTransposes, GnaTransposeRewrites and GatherSinkingGeneral round,
    only when Gather sinking left a Transpose GNA cannot run inside the graph.

    TSGeneral has no Gather rule: a channel permutation ``Gather`` next to a model input (or
    between two ops) stops the NHWC Transposes that backward sinking carries up to it. Gather
    sinking runs after transpose sinking (the GNA plugin's order) and may take that Gather away
    (into a convolution's filters or a MatMul's weights), after which the Transpose it stopped
    reaches the input on a second round, the no-sinking marks of the first cleared."""

    def __init__(self, user_config: PassConfig | None = None) -> None:
        super().__init__()
        self.rescue = RescueStuckTransposes(user_config)

    def run_on_model(self, model) -> bool:
        if not stuck_transposes(model):
            return False
        # (tried on a copy first: the round may also move Transposes GNA cannot run without
        # taking any out, as in ViT's attention, six more left inside; kept where it leaves
        # fewer layout ops inside)
        trial = model.clone()
        self._round(trial)
        if len(interior_layout_ops(trial)) < len(interior_layout_ops(model)):
            self._round(model)
        return False

    def _round(self, model) -> None:
        manager = nested_manager(self.get_pass_config(), "RescueAfterGatherSinking")
        # (the marks forward sinking left say where it stopped before the Gathers went)
        for p in (TSResetNoSinkingAttribute(), self.rescue, GnaTransposeRewrites(),
                  GatherSinkingGeneral()):
            manager.register_pass(p)
        manager.run_passes(model)


class GatherSinkingAfterCleanup(ModelPass):
    """Gather sinking and the layout cleanup once more, only when a Gather is left inside the
    graph after the cleanup.

    The cleanup fuses what Gather sinking could not cross: a flat Gather stopped at a
    ``Reshape [1, T, C] -> Reshape [1, N]`` pair (a Transpose before a Flatten, merged with
    the one the NHWC layout left) is right before the head's MatMul once the pair is one
    Reshape, and a Gather that two Transposes around a Clamp became, after backward sinking
    joined them above the Clamp, reaches the output's Reshape on a forward stage. Tried on a
    copy, kept where it leaves fewer layout ops inside."""

    def run_on_model(self, model) -> bool:
        inside = interior_layout_ops(model)
        # (static data only: GNA compiles static models, and the dynamic flow's Gathers of
        # shape arithmetic are no layout ops to move)
        if not any(isinstance(n, Gather) and n.input_value(0).partial_shape.is_static
                   for n in inside):
            return False
        trial = model.clone()
        self._round(trial)
        if len(interior_layout_ops(trial)) < len(inside):
            self._round(model)
        return False

    def _round(self, model) -> None:
        manager = nested_manager(self.get_pass_config(), "GatherSinkingAfterCleanup")
        manager.register_pass(GatherSinkingGeneral())
        manager.register_pass(GnaLayoutCleanup())
        manager.run_passes(model)


class GnaReshapeLayouts(ModelPass):
    """A Gather left inside between Reshapes (a 2-D map reshaped into 1-D channels, ``[1, H,
    W, C] -> [1, W, C*H]``) is split into a spatial Transpose of the map, a Reshape and a
    channel Gather (spatial_layout.py), then another rescue, Gather sinking and cleanup round
    takes the Transpose up to the input (the 2-D layers computing the map in its layout) and
    the Gather into the next layer's weights. Tried on a copy, kept where it leaves fewer
    layout ops inside."""

    def __init__(self, user_config: PassConfig | None = None) -> None:
        super().__init__()
        self.rescue = RescueStuckTransposes(user_config)

    def run_on_model(self, model) -> bool:
        inside = interior_layout_ops(model)
        # (static data only, as GatherSinkingAfterCleanup: the dynamic flow's Gathers are
        # shape arithmetic)
        gathers = [n for n in inside if isinstance(n, Gather)
                   and n.input_value(0).partial_shape.is_static]
        if not gathers:
            return False
        best, fewest = None, len(inside)
        # (the source Transpose kept channels last, which crosses the NHWC layers, or any,
        # which may reach the input in one step where no GNA layer is on the way)
        tries = [c for c in (True, False)
                 if any(reshape_gather_split(n, c) is not None for n in gathers)]
        # (no reference to a node of the model is kept: a replaced node would stay among
        # its producer's consumers, which the sinking rules would see)
        del inside, gathers
        for channels_last in tries:
            trial = model.clone()
            self._round(trial, channels_last)
            left = len(interior_layout_ops(trial))
            if left < fewest:
                best, fewest = channels_last, left
        if best is not None:
            self._round(model, best)
        return False

    def _round(self, model, channels_last: bool) -> None:
        split_reshape_gathers([n for n in interior_layout_ops(model) if isinstance(n, Gather)],
                              channels_last)
        manager = nested_manager(self.get_pass_config(), "GnaReshapeLayouts")
        for p in (ConstantFolding(), TSResetNoSinkingAttribute(), self.rescue,
                  GnaTransposeRewrites(), GatherSinkingGeneral(), GnaLayoutCleanup()):
            manager.register_pass(p)
        manager.run_passes(model)


# Stage names in run order (what runs there is named in the module docstring). The last two
# run in a second Manager, after the Slice workaround lets SliceToStridedSlice run again.
STAGES = ("InitNodeInfo", "DecomposeMVN", "CommonOptimizations", "Preparation",
          "ReplaceGnaNHWCLayers", "GatherSinkingTranspose", "TransposeMatMulForward",
          "TSGeneral", "RescueStuckTransposes", "GnaTransposeRewrites", "GatherSinkingGeneral",
          "LayoutCleanup", "SliceToCrop", "FinalNodeInfo")
TAIL_STAGES = ("SliceToCrop", "FinalNodeInfo")


class GnaTransformationsPipeline(ModelPass):
    """The whole GNA ngraph stage, in the GNA plugin's order.

    Extension points: ``stages()`` lists the stage names and
    ``insert_before(stage, *passes)`` / ``insert_after(stage, *passes)`` add passes (instances,
    or classes built anew for each run) that run once per pipeline run at that point, also
    when the stage itself has nothing to do on the model. Inserted passes obey the caller's
    PassConfig and are validated after they run, like the pipeline's own members.

    Returns False like OpenVINO's composite passes: its members keep every shape valid as
    they go (the caller's Manager still validates what changed)."""

    def __init__(self) -> None:
        super().__init__()
        self._inserted: dict[tuple[str, str], list] = {}

    def stages(self) -> list[str]:
        """The stage names, in run order."""
        return list(STAGES)

    def insert_before(self, stage: str, *passes: Any) -> GnaTransformationsPipeline:
        """Run ``passes`` (in order) right before ``stage``; returns the pipeline."""
        return self._insert("before", stage, passes)

    def insert_after(self, stage: str, *passes: Any) -> GnaTransformationsPipeline:
        """Run ``passes`` (in order) right after ``stage``; returns the pipeline."""
        return self._insert("after", stage, passes)

    def _insert(self, where: str, stage: str, passes: tuple) -> GnaTransformationsPipeline:
        if stage not in STAGES:
            raise NetpassError(f"GnaTransformationsPipeline has no stage '{stage}'; stages: "
                               f"{', '.join(STAGES)}")
        for p in passes:
            kind = p if isinstance(p, type) else type(p)
            if not issubclass(kind, (ModelPass, MatcherPass)):
                raise TypeError(f"insert_{where}('{stage}'): expected a ModelPass or "
                                f"MatcherPass (instance or class), got {p!r}")
        self._inserted.setdefault((where, stage), []).extend(passes)
        return self

    def run_on_model(self, model) -> bool:
        with gc_paused():
            self._run(model)
        return False

    def _members(self, types: set[type[Node]], layout: bool, user: PassConfig) -> dict[str, list]:
        """The pipeline's own passes per stage for a model holding op ``types``."""
        members: dict[str, list] = {
            "InitNodeInfo": [InitNodeInfo()],
            "CommonOptimizations": [GnaCommonOptimizations(), ConstantFolding()],
            "SliceToCrop": [GraphRewrite(ConvertSliceToCrop(), SliceToStridedSlice(),
                                         ConvertStridedSliceToCrop())],
            "FinalNodeInfo": [InitNodeInfo()],
        }
        if MVN in types:
            members["DecomposeMVN"] = [DecomposeMVN()]
        prep = [p() for p, roots in PREPARATION if roots & types]
        if prep:
            members["Preparation"] = [GraphRewrite(*prep), ConstantFolding()]
        if layout:
            if types & {Convolution, GroupConvolution, MaxPool, AvgPool}:
                # (the filters' OIHW -> OHWI Transposes folded at once: on a model that no
                # later stage changes, nothing folded them, and they stayed inside)
                members["ReplaceGnaNHWCLayers"] = [ReplaceGnaNHWCLayers(), ConstantFolding()]
            if Gather in types:
                members["GatherSinkingTranspose"] = [GatherSinkingTranspose(), GatherAbsorb()]
            if {MatMul, Transpose} <= types:
                members["TransposeMatMulForward"] = [TransposeMatMulForward()]
            members["TSGeneral"] = [TSGeneral()]
            members["RescueStuckTransposes"] = [RescueStuckTransposes(user)]
            members["GnaTransposeRewrites"] = [GnaTransposeRewrites()]
            members["GatherSinkingGeneral"] = [GatherSinkingGeneral(),
                                               RescueAfterGatherSinking(user)]
            members["LayoutCleanup"] = [GnaLayoutCleanup(), GatherSinkingAfterCleanup(),
                                        GnaReshapeLayouts(user), GatherIntoProducerCopy()]
        return members

    def _run(self, model) -> None:
        types = set(map(type, model.cached_order()))
        if ScaledDotProductAttention in types:  # its decomposition (Preparation) adds MatMuls
            types.add(MatMul)
        # The caller's config is read, never changed: the members run under a copy holding
        # its disabled passes and callbacks, the GNA axis rules after those callbacks.
        user = self.get_pass_config()
        config = gna_pass_config(user)
        layout = bool(types & LAYOUT_TRIGGERS)
        slice_workaround = Slice in types and layout and not user.is_disabled(SliceToStridedSlice)
        if slice_workaround:
            config.disable(SliceToStridedSlice)
        main = nested_manager(config, "GnaTransformationsPipeline")
        tail = nested_manager(gna_pass_config(user), "GnaSliceToCrop")
        members = self._members(types, layout, user)
        for stage in STAGES:
            manager = tail if stage in TAIL_STAGES else main
            self._register_inserted(manager, "before", stage)
            for p in members.get(stage, ()):
                manager.register_pass(p)
            self._register_inserted(manager, "after", stage)
        main.run_passes(model)
        tail.run_passes(model)
        rescues = members.get("RescueStuckTransposes", []) + \
            [p.rescue for stage in ("GatherSinkingGeneral", "LayoutCleanup")
             for p in members.get(stage, [])
             if isinstance(p, (RescueAfterGatherSinking, GnaReshapeLayouts))]
        if layout:
            warned = warn_layout_conflicts(stuck_transposes(model)) \
                if any(r.forwarded for r in rescues) else set()
            warn_interior_layout_ops(interior_layout_ops(model), warned)

    def _register_inserted(self, manager: Manager, where: str, stage: str) -> None:
        for p in self._inserted.get((where, stage), ()):
            manager.register_pass(p)
