"""GnaTransformationsPipeline: the whole GNA ngraph stage, in the GNA plugin's order.

1. InitNodeInfo; DecomposeMVN (when MVN is present); CommonOptimizations (SliceToStridedSlice
   disabled when the model has Slice and the layout block runs: transpose sinking cannot
   cross a StridedSlice); RemoveInputConvert / RemoveOutputConvert; LSTM/GRU sequence
   unrolling and cell decomposition (+ folding of the split weights);
   ReorderActivationAndPooling; RemoveSingleInputConcat.
2. The layout block, when the model has Convolution, MaxPool, MVN or MatMul (netpass also runs
   it for any model holding a Transpose or Gather, so that those reach the edges too):
   ReplaceGnaNHWCLayers, GatherSinkingTranspose, TSGeneral (GNA callbacks on the Concat/Split
   members), TransposeCompress, GNA TSConcatForward, GNA TSSplitBackward,
   GatherSinkingGeneral, ReshapeSequenceFusion, TransposeToReshape, TSFuse, NopElimination.
   When Transposes GNA cannot run or Gathers are still inside the graph after that (the GNA
   Concat/Split axis rule kept them there, and no rewrite satisfies both), the block runs
   again from the graph before it, without the axis callbacks (``STRATEGIES``): getting
   Transposes to the edges wins over the Concat/Split axis, which GNA's own concat/split
   alignment then has to handle.
3. The Slice workaround: SliceToStridedSlice then ConvertStridedSliceToCrop (always; any
   StridedSlice is a crop for GNA).
"""
from __future__ import annotations

from ...passes import Manager, PassConfig
from ...passes.base import ModelPass
from ..common import (CommonOptimizations, ConstantFolding, GRUCellDecomposition,
                      GRUSequenceUnrolling, InitNodeInfo, LSTMCellDecomposition,
                      LSTMSequenceUnrolling, NopElimination, ReshapeSequenceFusion,
                      SliceToStridedSlice, TransposeToReshape)
from ..transpose_sinking import TSFuse, TSGeneral, TSGeneralBackward, TSGeneralForward
from ..transpose_sinking.general import FORWARD
from ..transpose_sinking.utils import first_transpose_input
from .decompose_mvn import DecomposeMVN
from .gather_general import GatherSinkingGeneral
from .gather_transpose import GatherSinkingTranspose
from .limitations import install_gna_callbacks, interior_layout_ops, reads_parameter
from .misc import (RemoveInputConvert, RemoveOutputConvert, RemoveSingleInputConcat,
                   ReorderActivationAndPooling)
from .replace_nhwc import ReplaceGnaNHWCLayers
from .strided_slice_to_crop import ConvertStridedSliceToCrop
from .transpose_compress import TransposeCompress
from .ts_concat_split import TSConcatForward, TSSplitBackward

LAYOUT_TRIGGERS = {"Convolution", "MaxPool", "MVN", "MatMul", "Transpose", "Gather"}


# Layout strategies, tried in order until no unsupported Transpose or Gather is left inside the
# graph: OpenVINO's (GNA axis callbacks on); the same plus one more forward sinking (a
# Transpose that backward sinking parked under a GNA op moves down to a Reshape, where it
# becomes a Gather that MatMul weights absorb); then, without the callbacks, backward sinking
# only (forward sinking can push a Transpose down to a Reshape it then cannot leave), both
# directions, and both plus forward. The last result stands when none succeeds.
class SinkInteriorTransposesForward(ModelPass):
    """TSGeneralForward + ConstantFolding for the Transposes that do not read a Parameter
    (those already are where pre-processing cuts them out)."""

    def run_on_model(self, model) -> bool:
        config = PassConfig()
        config.add_disabled_passes(self.get_pass_config())

        def at_input(node) -> bool:
            info = first_transpose_input(node)
            return info is not None and reads_parameter(info.transpose)
        for pass_type in FORWARD:
            if pass_type is not TSFuse:
                config.set_callback(at_input, pass_type)
        manager = Manager(config, name="SinkInteriorTransposesForward")
        manager.register_pass(TSGeneralForward())
        manager.register_pass(ConstantFolding())
        manager.run_passes(model)
        return False


STRATEGIES = (
    (True, (TSGeneral,)),
    (True, (TSGeneral, SinkInteriorTransposesForward)),
    (False, (TSGeneralBackward, ConstantFolding)),
    (False, (TSGeneral,)),
    (False, (TSGeneral, SinkInteriorTransposesForward)),
)


def _layout_manager(sinking: tuple, callbacks: bool, config: PassConfig) -> Manager:
    if not callbacks:  # the same disabled passes, without the GNA axis callbacks
        plain = PassConfig()
        plain.add_disabled_passes(config)
        config = plain
    manager = Manager(config, name="GnaLayout")
    for p in (ReplaceGnaNHWCLayers, GatherSinkingTranspose, *sinking, TransposeCompress,
              TSConcatForward, TSSplitBackward, GatherSinkingGeneral, ReshapeSequenceFusion,
              TransposeToReshape, TSFuse, NopElimination):
        manager.register_pass(p())
    return manager


def _restore(model, backup) -> None:
    """Put ``backup``'s graph (a clone of ``model``) behind ``model``'s Parameters and Results."""
    for p, pb in zip(model.parameters, backup.parameters):
        pb.output(0).replace(p.output(0))
    for r, rb in zip(model.results, backup.results):
        r.input(0).replace_source_output(rb.input_value(0))


class GnaTransformationsPipeline(ModelPass):
    def run_on_model(self, model) -> bool:
        types = {n.type_name for n in model.get_ordered_ops()}
        config = self.get_pass_config()
        install_gna_callbacks(config)
        layout = bool(types & LAYOUT_TRIGGERS)
        slice_workaround = "Slice" in types and layout
        if slice_workaround:
            config.disable(SliceToStridedSlice)
        main = Manager(config, name="GnaTransformationsPipeline")
        main.register_pass(InitNodeInfo())
        if "MVN" in types:
            main.register_pass(DecomposeMVN())
        for p in (CommonOptimizations, RemoveInputConvert, RemoveOutputConvert,
                  LSTMSequenceUnrolling, GRUSequenceUnrolling, GRUCellDecomposition,
                  LSTMCellDecomposition, ConstantFolding, ReorderActivationAndPooling,
                  RemoveSingleInputConcat):
            main.register_pass(p())
        changed = main.run_passes(model)
        if layout:
            backup = model.clone()
            for attempt, (callbacks, sinking) in enumerate(STRATEGIES):
                if attempt:
                    _restore(model, backup)
                    backup = model.clone() if attempt + 1 < len(STRATEGIES) else None
                _layout_manager(sinking, callbacks, config).run_passes(model)
                if not interior_layout_ops(model):
                    break
            changed = True
        if slice_workaround:
            config.enable(SliceToStridedSlice)
        tail = Manager(config, name="GnaSliceToCrop")
        for p in (InitNodeInfo, SliceToStridedSlice, ConvertStridedSliceToCrop):
            tail.register_pass(p())
        return tail.run_passes(model) or changed
