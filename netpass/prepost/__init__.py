"""Pre/post-processing split: edge Transposes and Gathers run on the host.

After the GNA layout pipeline, the Transposes and Gathers the target cannot run sit next to
the model's inputs and outputs. ``split_pre_post_processing`` cuts each one out into a small
Model of its own (keyed by the input or output name) and leaves the main model without it;
at inference the small models run on the CPU with the reference evaluator, around the device
graph. Semantics follow OpenVINO's GNA ``RemoveInputsProcessing``/``RemoveOutputsProcessing``.

The cut keeps data flat-order compatible: single-consumer Reshapes between the parameter (or
result) and the cut op only reinterpret the buffer, so the host applies the small model to the
user's data reshaped to the cut op's input shape.
"""
from __future__ import annotations

from .split import PrePostProcessModels, split_pre_post_processing

__all__ = ["PrePostProcessModels", "split_pre_post_processing"]
