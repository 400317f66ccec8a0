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
   Concat/Split axis rule kept them there, and no rewrite satisfies both), the layout passes
   run once more without the axis callbacks and with backward sinking only (forward sinking
   would take the Transposes back down to where they stuck): getting Transposes to the edges wins over the
   Concat/Split axis, which GNA's own concat/split alignment then has to handle.
3. The Slice workaround: SliceToStridedSlice then ConvertStridedSliceToCrop (always; any
   StridedSlice is a crop for GNA).
"""
from __future__ import annotations

from ...passes import Manager
from ...passes.base import ModelPass
from ..common import (CommonOptimizations, ConstantFolding, GRUCellDecomposition,
                      GRUSequenceUnrolling, InitNodeInfo, LSTMCellDecomposition,
                      LSTMSequenceUnrolling, NopElimination, ReshapeSequenceFusion,
                      SliceToStridedSlice, TransposeToReshape)
from ..transpose_sinking import TSFuse, TSGeneral, TSGeneralBackward
from .decompose_mvn import DecomposeMVN
from .gather_general import GatherSinkingGeneral
from .gather_transpose import GatherSinkingTranspose
from .limitations import install_gna_callbacks, interior_layout_ops
from .misc import (RemoveInputConvert, RemoveOutputConvert, RemoveSingleInputConcat,
                   ReorderActivationAndPooling)
from .replace_nhwc import ReplaceGnaNHWCLayers
from .strided_slice_to_crop import ConvertStridedSliceToCrop
from .transpose_compress import TransposeCompress
from .ts_concat_split import TSConcatForward, TSSplitBackward

LAYOUT_TRIGGERS = {"Convolution", "MaxPool", "MVN", "MatMul", "Transpose", "Gather"}


def _register_layout_block(manager: Manager, sinking: tuple) -> None:
    for p in (*sinking, TransposeCompress, TSConcatForward, TSSplitBackward, GatherSinkingGeneral,
              ReshapeSequenceFusion, TransposeToReshape, TSFuse, NopElimination):
        manager.register_pass(p())


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
        if layout:
            main.register_pass(ReplaceGnaNHWCLayers())
            main.register_pass(GatherSinkingTranspose())
            _register_layout_block(main, (TSGeneral,))
        changed = main.run_passes(model)
        if layout and interior_layout_ops(model):
            fallback = Manager(name="GnaLayoutWithoutAxisRules")
            _register_layout_block(fallback, (TSGeneralBackward, ConstantFolding))
            fallback.run_passes(model)
        if slice_workaround:
            config.enable(SliceToStridedSlice)
        tail = Manager(config, name="GnaSliceToCrop")
        for p in (InitNodeInfo, SliceToStridedSlice, ConvertStridedSliceToCrop):
            tail.register_pass(p())
        return tail.run_passes(model) or changed
