"""The GNA layout pipeline: NHWC convolution/pooling, transpose and gather sinking under GNA's
rules, and ``GnaTransformationsPipeline``, the one pass that runs the whole stage."""
from __future__ import annotations

from ..common import ReshapeSequenceFusion, TransposeToReshape
from .decompose_mvn import DecomposeMVN
from .gather_general import (
                             GatherAbsorb,
                             GatherSinkingGeneral,
                             GatherSinkingGeneralBackward,
                             GatherSinkingGeneralForward,
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
from .gather_to_slice import ConvertGatherToSlice
from .gather_transpose import (
                             GatherSinkingTranspose,
                             GatherSinkingTransposeBackward,
                             GatherSinkingTransposeForward,
                             GatherSinkingTransposeReshapeBackward,
                             GatherSinkingTransposeReshapeForward,
)
from .limitations import (
                             GNA_CALLBACKS,
                             at_model_edge,
                             gna_pass_config,
                             install_gna_callbacks,
                             interior_layout_ops,
                             is_transpose_supported,
)
from .misc import (
                             MergeSharedLayoutOps,
                             RemoveInputConvert,
                             RemoveOutputConvert,
                             RemoveSingleInputConcat,
                             ReorderActivationAndPooling,
)
from .pipeline import GnaTransformationsPipeline
from .replace_nhwc import (
                             ReplaceGnaNHWCLayers,
                             SubstituteGNAConvolution,
                             SubstituteGNAGroupConvolution,
                             SubstituteGNAMaxPool,
)
from .slice_to_crop import ConvertSliceToCrop
from .stepped_slice_to_matmul import ConvertSteppedSliceToMatMul
from .strided_slice_to_crop import ConvertStridedSliceToCrop
from .support import GNA_TARGETS, OpSupport, check_support, unsupported
from .transpose_compress import TransposeCompress
from .transpose_matmul import TransposeMatMulForward
from .ts_concat_split import TSConcatForward, TSSplitBackward

__all__ = [
    "GatherAbsorb", "GatherConcatAbsorbBackward", "GatherConcatAbsorbForward",
    "GatherSinkingConcatBackward", "GatherSinkingConcatForward", "GatherSinkingReduceBackward",
    "GatherSinkingReduceForward", "GatherSinkingReshapedForward",
    "GatherSinkingTransposeAxisBackward", "GatherSinkingTransposeAxisForward", "GatherSplitAbsorb",
    "MergeSharedLayoutOps", "RemoveIdentityGather", "GNA_TARGETS", "OpSupport", "check_support",
    "unsupported", "ConvertGatherToSlice", "ConvertSliceToCrop", "ConvertSteppedSliceToMatMul",
    "ConvertStridedSliceToCrop", "DecomposeMVN", "GNA_CALLBACKS", "GatherSinkingBinaryBackward",
    "GatherSinkingBinaryForward", "GatherSinkingFuse", "GatherSinkingGeneral",
    "GatherSinkingGeneralBackward", "GatherSinkingGeneralForward", "GatherSinkingMatmulBackward",
    "GatherSinkingMatmulForward", "GatherSinkingReshapeBackward", "GatherSinkingReshapeForward",
    "GatherSinkingSplitBackward", "GatherSinkingSplitForward", "GatherSinkingTranspose",
    "GatherSinkingTransposeBackward", "GatherSinkingTransposeForward",
    "GatherSinkingTransposeReshapeBackward", "GatherSinkingTransposeReshapeForward",
    "GatherSinkingUnaryBackward", "GatherSinkingUnaryForward", "GnaTransformationsPipeline",
    "RemoveInputConvert", "RemoveOutputConvert", "RemoveSingleInputConcat",
    "ReorderActivationAndPooling", "ReplaceGnaNHWCLayers", "ReshapeSequenceFusion",
    "SubstituteGNAConvolution", "SubstituteGNAGroupConvolution", "SubstituteGNAMaxPool",
    "TSConcatForward", "TSSplitBackward", "TransposeCompress", "TransposeMatMulForward",
    "TransposeToReshape", "at_model_edge", "gna_pass_config", "install_gna_callbacks",
    "interior_layout_ops", "is_transpose_supported",
]
