"""Target-independent transformations (OpenVINO's common transformations)."""
from __future__ import annotations

from .avg_pool_to_reduce_mean import ConvertGlobalAvgPoolToReduceMean
from .batch_norm_decomposition import BatchNormDecomposition
from .common_optimizations import CommonOptimizations
from .constant_folding import (
                               DISABLE_CONSTANT_FOLDING,
                               ConstantFolding,
                               constant_folding_is_disabled,
                               disable_constant_folding,
                               enable_constant_folding,
)
from .convert_divide import ConvertDivide
from .init_node_info import InitNodeInfo
from .make_stateful import BuildStateInitializer, MakeStateful, find_kv_cache_pairs, variable_name
from .nop_elimination import NOP_RULES, EliminateNop, NopElimination
from .reshape_fusion import ReshapeElementwiseReorder, ReshapeSequenceFusion, TransposeToReshape
from .rnn_decomposition import (
                               GRUCellDecomposition,
                               GRUSequenceUnrolling,
                               LSTMCellDecomposition,
                               LSTMSequenceUnrolling,
)
from .sdpa_decomposition import ScaledDotProductAttentionDecomposition
from .slice_to_strided_slice import SliceToStridedSlice

__all__ = [
    "BatchNormDecomposition", "BuildStateInitializer", "CommonOptimizations", "ConstantFolding",
    "ConvertDivide", "ConvertGlobalAvgPoolToReduceMean", "DISABLE_CONSTANT_FOLDING",
    "EliminateNop", "GRUCellDecomposition", "GRUSequenceUnrolling", "InitNodeInfo",
    "LSTMCellDecomposition", "LSTMSequenceUnrolling", "MakeStateful", "NOP_RULES",
    "NopElimination", "ReshapeElementwiseReorder", "ReshapeSequenceFusion",
    "ScaledDotProductAttentionDecomposition", "SliceToStridedSlice",
    "TransposeToReshape",
    "constant_folding_is_disabled", "disable_constant_folding", "enable_constant_folding",
    "find_kv_cache_pairs", "variable_name",
]
