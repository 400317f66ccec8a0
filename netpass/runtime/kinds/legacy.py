"""Legacy "IE" ops (``netpass/ops/legacy.py``): FullyConnected on the GEMM kernels (weights
reordered once to [K, N], fake-aligned allocations, bias in the epilogue), PowerIE, ReLUIE,
Eltwise and ScaleShiftIE as elementwise expressions (float32), CropIE as a view where the crop
is one contiguous piece of its input, else an index-map copy."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import NetpassError
from ...ops.elementwise import Add, Divide, Maximum, Minimum, Multiply, Subtract
from ...ops.legacy import CropIE, Eltwise, FullyConnected, PowerIE, ReLUIE, ScaleShiftIE
from ..impls import (
    Impl,
    Launch,
    Params,
    Scratch,
    epilogue,
    epilogue_args,
    fused_stages,
    size,
    work_1d,
)
from ..kernels import decode_gemv, mma_plan, tma_gemm
from ..kernels.common import flit
from ..kernels.decode_mlp import MLP_WG, decode_mlp, mlp_partials
from ..kernels.eltwise import gated_activation
from .attention import attention_impl
from .base import ExprRule, OpKind, Skip, table
from .elementwise import ROW, elementwise, per_channel_impl, with_bias
from .matmul import gemm_launch, norm_out_plan
from .movement import index_map_impl


def fully_connected_impl(p: Params, key: Any) -> Impl | None:
    """X[..., K] @ W^T + bias (W is [N, K], or [K, N] once reordered: ``update_weights``)."""
    if any(np.dtype(d) != np.float32 for d in p.in_dtypes):
        return None
    x = p.in_shapes[0]
    # a normalized A (norm_gemm.NormDesc) or a gated one (parallel_gemms.GatedDesc: input 0
    # holds the gate's and the up projection's columns side by side)
    desc = getattr(p.node, "subgraph", None)
    m = size(x[:-1])
    # (an MLP's up projection: the down projection's kernel runs it)
    up_of = getattr(p.node, "mlp_fold", None)
    if up_of is not None and up_of.chunk(p.engine, m):
        impl = Impl(key)
        impl.weights_as_given = True
        return impl
    # (a down projection: fused_mlp.MlpDesc; an attention's output projection:
    # attention_proj.ProjDesc, whose fold has the attention)
    fold: Any = getattr(desc, "fold", None)
    if fold is not None and getattr(fold, "attention", None) is not None:
        if fold.applies(p.in_shapes[fold.first]):
            return _attention_proj_impl(p, key, fold)
        desc = fold = None
    if fold is not None:
        hc = fold.chunk(p.engine, m)
        if hc:
            return _decode_mlp_impl(p, key, desc, hc)
        desc = desc.inner  # type: ignore[union-attr]
    gated = desc is not None and desc.gated
    # (its activation's stages: parallel_gemms.GatedDesc.gate, a GatedActivationDesc)
    gate = desc.gate.stages if desc is not None and gated else None
    kdim = x[-1] // 2 if gated else x[-1]
    w = p.in_shapes[1]
    n = w[0]
    # a few rows run as GEMVs over the weights as they are (each column a contiguous row)
    gemv = decode_gemv.gemv_width(m, kdim, 1, n) is not None
    as_given = gemv or _tensor_cores_read_as_given(p, m, n, kdim)
    reordered = p.attrs.get("_weights_reordered", False) and not as_given
    q = with_bias(p, (size(p.in_shapes[2]),), p.in_dtypes[2])
    refs = [("i", 2)] + [("e", j) for j in range(len(p.extra_shapes or []))]
    norm = folded = a_written = None
    if desc is not None and not gated:
        norm = desc.kernel_params()
        if reordered and desc.foldable(p.node):  # (a LayerNorm over constant vectors folds
            folded = norm_out_plan(q, m, n, kdim)  # into the reordered weights: one launch)
    elif gated and not gemv:  # (the GEMV takes act(g) * u as it reads the rows)
        a_written = Launch(gated_activation(gate), *work_1d(m * kdim),
                           [("i", 0), ("b", 0), 0, m * kdim, kdim])
    # the epilogue indexes side inputs over the real output shape (the GEMM's flat index is
    # the same): a residual [b, s, n] broadcasts as it does in the graph
    # (weights in mma.sync fragment order where the tensor cores' bfrag loop reads them)
    frag = mma_plan.bfrag_width(q.engine, q.precision, m, n, kdim) \
        if reordered and desc is None else 0
    g = gemm_launch(q, (m, kdim), (kdim, n) if reordered else (n, kdim), False, not reordered,
                    (0, 1), tuple(p.out_shapes[0]),
                    a_strides=(2 * kdim, 1) if gated and gemv else None, extra_refs=refs,
                    norm=norm, norm_first=3, folded=folded, gate=gate if gemv else None,
                    a_written=a_written, b_frag=frag)
    if g is None:
        return None
    impl = Impl(key, *g)
    impl.weights_as_given, impl.weights_folded = as_given, folded is not None
    impl.weights_frag = frag
    return impl


def _decode_mlp_impl(p: Params, key: Any, desc, hc: int) -> Impl:
    """Down projection ``p`` and its up projection (``desc``: fused_mlp.MlpDesc) at one row, in
    one launch (kernels.decode_mlp): inputs 3 on are the up projection's (x, weights, bias, its
    norm's vectors); the down projection's bias and fused ops make the epilogue."""
    fold = desc.fold
    up = fold.up
    norm = up.subgraph.kernel_params() if up.subgraph is not None else None
    # (a gated MLP's activation and product: GatedActivationDesc.stages; else the up
    # projection's fused ops)
    act = desc.inner.gate.stages if fold.gated else fused_stages(up.fused, 0)
    q = with_bias(p, (fold.n,), p.in_dtypes[2])
    stages, n_extra, edt, edims, est = epilogue(q, tuple(p.out_shapes[0]))
    ptx = getattr(p.engine, "mma", "") == "ptx"  # (NVIDIA: inline PTX)
    src = p.cached(("decode_mlp", hc, len(edims)), lambda: decode_mlp(
        fold.k, fold.h, fold.n, hc, norm, act, stages, edt, len(edims), fold.gated, ptx))
    vectors = [("i", 6 + j) for j in range(len(up.inputs) - 3)]
    spec = [("i", 3), ("i", 4), ("i", 5), ("i", 1)] + vectors + [("o", 0), ("b", 0), ("b", 1)]
    spec += epilogue_args(n_extra, edims, est, [("i", 2)] + [("e", j) for j in
                                                           range(len(p.extra_shapes or []))])
    rows, counts = mlp_partials(fold.h, fold.n, hc)
    impl = Impl(key, [Launch(src, (fold.h // hc * MLP_WG, 1, 1), (MLP_WG, 1, 1), spec)],
                [Scratch(4 * rows), np.zeros(counts, np.int32)])
    impl.weights_as_given = True
    return impl


def _attention_proj_impl(p: Params, key: Any, fold: Any) -> Impl:
    """Output projection ``p`` and the attention it reads (``fold``: attention_proj.ProjFold;
    its inputs are ``p``'s from ``fold.first`` on) in one launch: the decode attention kernel
    with the projection folded in (``kernels.decode.attention_decode``'s ``proj``), its own
    arguments as the attention's impl makes them, then the weights, the output, the widths,
    the partial rows' and arrival counts' buffers and the epilogue (bias, fused ops)."""
    a, first = fold.attention, fold.first
    shapes = list(p.in_shapes[first:])
    values = {j - first: v for j, v in (p.values or {}).items() if j >= first}
    ap = Params(row=p.row, attrs=a.attrs, in_shapes=shapes, in_dtypes=list(p.in_dtypes[first:]),
                out_shapes=a.subgraph.infer_shapes(shapes, values), out_dtypes=list(a.out_dtypes),
                values=values, fused=[], extra_shapes=[], extra_dtypes=[], node=a,
                engine=p.engine, memo=p.memo, precision=p.precision,
                in_strides=list(p.in_strides[first:]) if p.in_strides else None)
    n, k = p.in_shapes[1]
    q = with_bias(p, (n,), p.in_dtypes[2])
    stages, n_extra, edt, edims, est = epilogue(q, tuple(p.out_shapes[0]))
    impl = attention_impl(ap, key, (stages, edt, len(edims)))
    if impl is None or len(impl.launches) != 1 or k % 4:
        raise NetpassError(f"FullyConnected '{p.node.name}': the attention '{a.name}' folded "
                           f"into it has no decode kernel for q, k, v {shapes[:3]}")
    ln = impl.launches[0]
    spec = [("i", it[1] + first, *it[2:]) if type(it) is tuple and it[0] == "i" else it
            for it in ln.spec]
    rows, nbuf = ln.gws[1] * ln.gws[2], len(impl.buffers)
    spec += [("i", 1), ("o", 0), n, k, ("b", nbuf), ("b", nbuf + 1)]
    spec += epilogue_args(n_extra, edims, est, [("i", 2)] + [("e", j) for j in
                                                           range(len(p.extra_shapes or []))])
    out = Impl(key, [Launch(ln.source, ln.gws, ln.lws, spec)],
               list(impl.buffers) + [Scratch(4 * rows * n), np.zeros(rows, np.int32)])
    out.weights_as_given = True
    return out


def _tensor_cores_read_as_given(p: Params, m: int, n: int, kdim: int) -> bool:
    """Whether the tensor-core GEMM reads the weights as given, [N, K]: Hopper's TMA GEMM
    (``kernels.tma_gemm``) always, the others where N is not a
    multiple of 4 (an LM head's 50257), the rows of the reordered [K, N] copy are not 16-byte
    aligned and its stages fill element by element, while [N, K] rows fill by 16-byte copies
    (H200, [1024, 768] x [768, 50257]: TF32 1.40 -> 0.87 ms, 3xTF32 1.79 -> 1.58 ms). A
    LayerNorm in front then runs as a row kernel ahead of the GEMM instead of folding into
    the reordered weights."""
    if tma_gemm.plan(p.engine, p.precision, m, n, kdim, 1, [kdim, 1], [1, kdim], None) \
            is not None:
        return True  # (Hopper's TMA GEMM reads K-contiguous weights: [N, K])
    return mma_plan.on_tensor_cores(p.engine, p.precision, m) and n % 4 != 0 and kdim % 4 == 0


def _float32(expr: ExprRule) -> ExprRule:
    """``expr`` where every tensor is float32, else None (the host runs it)."""
    def rule(attrs: dict, in_dtypes: Sequence[Any], out_dtype: Any) -> str | None:
        if any(np.dtype(d) != np.float32 for d in list(in_dtypes) + [out_dtype]):
            return None
        return expr(attrs, in_dtypes, out_dtype)
    return rule


def _power(attrs: dict, in_dtypes: Sequence[Any], out_dtype: Any) -> str:
    base = f"({{0}} * {flit(attrs.get('scale', 1.0))} + {flit(attrs.get('shift', 0.0))})"
    power = float(attrs.get("power", 1.0))
    return base if power == 1.0 else f"pow({base}, {flit(power)})"


def _relu(attrs: dict, in_dtypes: Sequence[Any], out_dtype: Any) -> str:
    return f"({{0}} > 0.0f ? {{0}} : {{0}} * {flit(attrs.get('negative_slope', 0.0))})"


# Eltwise ``operation`` -> the elementwise op it computes
OPERATIONS = {"sum": Add, "prod": Multiply, "max": Maximum, "min": Minimum, "sub": Subtract,
              "div": Divide}


def _eltwise(attrs: dict, in_dtypes: Sequence[Any], out_dtype: Any) -> str | None:
    op = OPERATIONS.get(str(attrs.get("operation", "sum")).lower())
    expr = ROW[op].expr if op is not None else None
    return expr({}, in_dtypes, out_dtype) if expr is not None else None


def _scale_shift(attrs: dict, in_dtypes: Sequence[Any], out_dtype: Any) -> str:
    return "({0} * {1} + {2})"


def _contiguous_crop_offset(inst: Any) -> int | None:
    """Element offset of a CropIE whose result is one contiguous piece of its input (all dims
    before the first cropped one are 1, all after it are whole), else None."""
    a = inst.node.attrs
    shape, out = inst.in_shapes[0], inst.out_shapes[0]
    cropped = [i for i, (d, o) in enumerate(zip(shape, out)) if d != o]
    if not cropped:
        return 0
    first = cropped[0]
    if size(shape[:first]) != 1 or cropped != [first]:
        return None
    stride = size(shape[first + 1:])
    off = dict(zip(a.get("axes", []), a.get("offset", [])))
    return sum(int(off.get(i, 0)) * (stride if i == first else 0) for i in range(len(shape)))


ROWS = table(
    OpKind(FullyConnected, impl=fully_connected_impl, epilogue=True, reorders_weights=True,
           fake_aligned=True),
    elementwise(PowerIE, _float32(_power)),
    elementwise(ReLUIE, _float32(_relu)),
    elementwise(Eltwise, _float32(_eltwise)),
    OpKind(ScaleShiftIE, impl=per_channel_impl, expr=_float32(_scale_shift), epilogue=True),
    OpKind(CropIE, impl=index_map_impl, movement=True,
           skip=Skip(lambda n, same: not n.is_output and same, _contiguous_crop_offset)),
)
