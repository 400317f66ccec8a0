"""CommonOptimizations: the target-independent clean-up every pipeline starts with."""
from __future__ import annotations

from ...passes.base import ModelPass
from ..utils import nested_manager
from .batch_norm_decomposition import BatchNormDecomposition
from .constant_folding import ConstantFolding
from .convert_divide import ConvertDivide
from .nop_elimination import NopElimination
from .sdpa_decomposition import ScaledDotProductAttentionDecomposition
from .slice_to_strided_slice import SliceToStridedSlice


class CommonOptimizations(ModelPass):
    """Target-independent clean-up: folding, no-ops, decompositions.

    ConstantFolding, NopElimination, BatchNormDecomposition,
    ScaledDotProductAttentionDecomposition, ConvertDivide, SliceToStridedSlice, then folding and
    no-op removal again. Runs a Manager sharing this pass's PassConfig, so a caller can disable
    any member (the GNA pipeline disables SliceToStridedSlice) or set callbacks."""

    def run_on_model(self, model) -> bool:
        manager = nested_manager(self.get_pass_config(), "CommonOptimizations")
        for p in (ConstantFolding, NopElimination, BatchNormDecomposition,
                  ScaledDotProductAttentionDecomposition, ConvertDivide, SliceToStridedSlice,
                  ConstantFolding, NopElimination):
            manager.register_pass(p())
        return manager.run_passes(model)
