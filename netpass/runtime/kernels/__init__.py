"""OpenCL C templates. Every kernel of the runtime comes from one of these generators, one module
per family:

- ``eltwise``: n-ary elementwise over a collapsed iteration space with per-tensor strides
  (numpy broadcasting, transposes and strided writes are all just strides), fused post-op
  stages, and a float4 path for flat contiguous float tensors;
- ``gemm``: register-tiled batched GEMM with generic strides (MatMul, FullyConnected) and a
  fused elementwise epilogue; ``gemm_skinny`` (same arguments) for few output tiles (small M);
  ``gemm_aligned`` and ``gemm_pipelined`` (cp.async on NVIDIA) for aligned shapes on GPUs;
- ``rowop``: one work-group per row for reductions, softmax/log-softmax and MVN; ``topk``: one
  work-group per row, k selection rounds (values and indices, ties by index, NaN last);
- ``movement``: ``imap`` (copy through an index map: any pure data-movement op, the map from
  its numpy reference), ``split`` (every output of a Split in one launch), ``gather``;
- ``window``: ``conv`` (direct), ``depthwise_conv`` (tiles in local memory) and ``pool``;
- ``recurrent``: LSTM / GRU / RNN cells and sequences;
- ``attention``: scores, score ops, online softmax and the value product in one launch;
- ``mma``: the tensor-core GEMM (``mma.sync`` TF32 / 3xTF32 through inline PTX, NVIDIA) and
  the implicit-GEMM convolution; ``flash``: flash attention on the same tensor cores. Both are
  imported as modules (``from netpass.runtime.kernels import mma``), not re-exported.

``common`` holds what they share (C types, :class:`Stage`, :class:`Source`,
:func:`pack_scalars`, :func:`address_buffers`, :func:`memoized`). Sources depend only on
dtypes, ranks, op expressions and tile sizes, never on runtime dims (dims are arguments), so a
growing sequence compiles each kernel once. Which op uses which template is the runtime op
table's business (:mod:`netpass.runtime.kinds`).
"""
from __future__ import annotations

from .attention import attention
from .common import (
                     CTYPES,
                     LS,
                     Source,
                     Stage,
                     address_buffers,
                     ctype,
                     flit,
                     memoized,
                     nan_clamp,
                     nan_max,
                     nan_min,
                     pack_scalars,
)
from .eltwise import eltwise, eltwise_vec4
from .gemm import (
                     GEMM_LARGE,
                     GEMM_MEDIUM,
                     GEMM_SMALL,
                     SKINNY_RM,
                     SKINNY_WG,
                     GemmConfig,
                     gemm,
                     gemm_aligned,
                     gemm_pipelined,
                     gemm_skinny,
                     norm_prologue,
                     norm_value,
)
from .movement import gather, imap, split
from .recurrent import RNN_ACTIVATIONS, RNN_LS, recurrent
from .rowop import rowop
from .topk import topk
from .window import conv, pool

__all__ = ["CTYPES", "LS", "Source", "Stage", "ctype", "flit", "memoized", "pack_scalars",
           "address_buffers", "nan_max", "nan_min", "nan_clamp", "eltwise", "eltwise_vec4",
           "GemmConfig", "GEMM_SMALL", "GEMM_MEDIUM", "GEMM_LARGE", "SKINNY_RM", "SKINNY_WG",
           "gemm", "gemm_skinny", "gemm_aligned", "gemm_pipelined", "norm_prologue", "norm_value",
           "rowop", "topk", "imap", "split", "gather", "conv", "pool", "RNN_LS", "RNN_ACTIVATIONS",
           "recurrent", "attention"]
