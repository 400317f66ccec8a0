"""The op-fuzz families by name (``test_op_fuzz.py``; ``test_openvino_written_ir.py`` draws the
same models through OpenVINO): each a hypothesis strategy of single-op or chain models."""
from __future__ import annotations

from op_fuzz_index import gather, movement, pad, scatter, slice_
from op_fuzz_math import (
    binary,
    cast,
    einsum,
    generate,
    matmul,
    norm,
    reduce,
    scan_search,
    softmax,
    unary,
)
from op_fuzz_spatial import conv, depth_space, pool, resize

FAMILIES = {f.__name__.rstrip("_"): f for f in (
    conv, pool, resize, depth_space, slice_, gather, scatter, pad, movement, reduce, einsum,
    matmul, softmax, norm, binary, unary, cast, scan_search, generate)}
