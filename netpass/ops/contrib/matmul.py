"""onnxruntime's fused products: FusedMatMul (``alpha * op(A) @ op(B)``, each operand optionally
transposed on its last two dims and/or with its first dim moved behind the batch dims),
FusedGemm and FusedConv (Gemm / Conv, FusedConv's optional ``Z`` added, then an activation), and
MatMulNBits (blockwise 2/4/8-bit weights, dequantized at import: netpass has no packed-int
matmul, so the weights become a float constant)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...core.node import Output
from ..base import to_output
from ..elementwise import Add, Clamp, HardSigmoid, Multiply, PRelu, Relu, Sigmoid, Tanh, const_like
from ..matmul import MatMul
from ..movement import Transpose
from ..registry import find_onnx_rule, onnx_rule
from .common import MS, refuse_inputs


def _operand(x: Output, batch: bool, trans: bool, ctx: Any) -> tuple[Output, bool]:
    """FusedMatMul's operand with its batch transpose applied: ``[d0, d1..dn-2, dn-1]`` ->
    ``[d1..dn-2, d0, dn-1]`` (``[.., dn-1, d0]`` with ``trans``); the last-two-dims transpose
    left to MatMul otherwise."""
    if not batch:
        return x, trans
    ps = x.partial_shape
    if not ps.rank_is_static or len(ps) < 2:
        ctx.error(f"a batch transpose needs an operand of known rank >= 2, got {ps}")
    r = len(ps)
    perm = list(range(1, r - 1)) + ([r - 1, 0] if trans else [0, r - 1])
    return Transpose([x, to_output(np.asarray(perm, np.int64))]).output(0), False


@onnx_rule("FusedMatMul", domain=MS)
def _import_fused_matmul(ctx):
    a, ta = _operand(ctx.inputs[0], bool(ctx.attr("transBatchA", 0)),
                     bool(ctx.attr("transA", 0)), ctx)
    b, tb = _operand(ctx.inputs[1], bool(ctx.attr("transBatchB", 0)),
                     bool(ctx.attr("transB", 0)), ctx)
    y = MatMul([a, b], transpose_a=ta, transpose_b=tb).output(0)
    alpha = float(ctx.attr("alpha", 1.0))
    return y if alpha == 1.0 else Multiply([y, const_like(alpha, y)]).output(0)


def _activation(ctx: Any, y: Output, params: list[float]) -> Output:
    """``y`` through the node's ``activation`` (with its parameters, defaults as ORT's)."""
    kind = ctx.attr("activation", "")
    kind = kind.decode() if isinstance(kind, bytes) else kind

    def param(i: int, default: float) -> Output:
        return const_like(params[i] if i < len(params) else default, y)

    table = {"Relu": lambda: Relu([y]), "Tanh": lambda: Tanh([y]),
             "Sigmoid": lambda: Sigmoid([y]),
             "LeakyRelu": lambda: PRelu([y, param(0, 0.01)]),
             "HardSigmoid": lambda: HardSigmoid([y, param(0, 0.2), param(1, 0.5)])}
    if kind == "Clip" and len(params) == 2:
        return Clamp([y], min=float(params[0]), max=float(params[1])).output(0)
    if kind not in table:
        ctx.error(f"activation {kind!r} (parameters {params}) is not supported")
    return table[kind]().output(0)


@onnx_rule("FusedGemm", domain=MS)
def _import_fused_gemm(ctx):
    y = find_onnx_rule("Gemm", ctx.opset)(ctx)
    params = [ctx.attr(k) for k in ("activation_alpha", "activation_beta", "activation_gamma")]
    return _activation(ctx, y, [float(p) for p in params if p is not None])


@onnx_rule("FusedConv", domain=MS)
def _import_fused_conv(ctx):
    y = find_onnx_rule("Conv", ctx.opset)(ctx)
    z = ctx.input(3)
    if z is not None:
        y = Add([y, z]).output(0)
    return _activation(ctx, y, [float(p) for p in ctx.attr("activation_params", [])])


def _unpack(packed: np.ndarray, bits: int, count: int) -> np.ndarray:
    """The unsigned ``bits``-wide values packed little end first in each byte of ``packed``
    (last axis), the first ``count`` of each row."""
    per_byte = 8 // bits
    shifts = np.arange(per_byte, dtype=np.uint8) * bits
    values = (packed[..., None] >> shifts) & np.uint8((1 << bits) - 1)
    return values.reshape(*packed.shape[:-1], -1)[..., :count]


@onnx_rule("MatMulNBits", domain=MS)
def _import_matmul_nbits(ctx):
    """``A @ W [+ bias]``, W [K, N] dequantized from B [N, k_blocks, blob] as
    ``(q - zero_point) * scale`` per block of ``block_size`` along K."""
    a, b, scales, zero_points = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2], ctx.input(3)
    refuse_inputs(ctx, {4: "g_idx (deprecated) is not supported"})
    if ctx.attr("weight_prepacked", 0):
        ctx.error("prepacked weights are not supported")
    bits, block = int(ctx.attr("bits", 4)), int(ctx.attr("block_size", 0))
    n, k = int(ctx.attr("N", 0)), int(ctx.attr("K", 0))
    if bits not in (2, 4, 8) or block < 16 or n <= 0 or k <= 0:
        ctx.error(f"bits={bits}, block_size={block}, N={n}, K={k} are not valid")
    if b.value is None or scales.value is None or \
            (zero_points is not None and zero_points.value is None):
        ctx.error("B, scales and zero_points must be constants (netpass dequantizes them)")
    blocks = -(-k // block)
    q = _unpack(np.asarray(b.value, np.uint8).reshape(n, blocks, -1), bits, block)
    dt = np.dtype(a.element_type.dtype or np.float32)
    if zero_points is None:
        zp = np.full((n, blocks, 1), 1 << (bits - 1), dt)
    elif np.asarray(zero_points.value).dtype == np.uint8:
        zp = _unpack(np.asarray(zero_points.value).reshape(n, -1), bits, blocks)[..., None]
    else:
        zp = np.asarray(zero_points.value).reshape(n, blocks, 1)
    scale = np.asarray(scales.value).reshape(n, blocks, 1)
    w = ((q.astype(dt) - zp.astype(dt)) * scale.astype(dt)).reshape(n, -1)[:, :k]
    y = MatMul([a, to_output(np.ascontiguousarray(w.T))], transpose_a=False,
               transpose_b=False).output(0)
    bias = ctx.input(5)
    return y if bias is None else Add([y, bias]).output(0)
