"""Pre/post-processing split: edge Transposes and Gathers run on the host.

After the GNA layout pipeline, the Transposes and Gathers the target cannot run sit next to
the model's inputs and outputs. ``split_pre_post_processing`` cuts them out into a small
Model per input or output (keyed by its name; several ops in a row, as a Gather then a
Transpose, make one chain) and leaves the main model without them;
at inference the small models run on the CPU with the reference evaluator, around the device
graph. Semantics follow OpenVINO's GNA ``RemoveInputsProcessing``/``RemoveOutputsProcessing``.

The cut keeps data flat-order compatible: single-consumer Reshapes between the parameter (or
result) and the cut op only reinterpret the buffer, so the host applies the small model to the
user's data reshaped to the cut op's input shape.
"""
from __future__ import annotations

from .split import PrePostProcessModels, split_pre_post_processing

__all__ = ["PrePostProcessModels", "split_pre_post_processing"]
