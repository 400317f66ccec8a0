"""onnxruntime's contrib ops (domain ``com.microsoft``, and the few ORT registers in the default
domain), as onnxruntime's transformer optimizer and ``optimum`` write them into BERT, GPT-2 and
LLaMA-style models: import rules composing standard netpass ops, one module per family."""
from __future__ import annotations

from . import activations, attention, group_query_attention, matmul, normalization, quantized  # noqa: F401
