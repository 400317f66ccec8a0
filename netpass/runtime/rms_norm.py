"""RMSNorm chains as one :class:`~netpass.runtime.kinds.normalization.RmsNorm` node, one launch.

Exports write RMSNorm (LLaMA, Mistral, Qwen, T5) as ops: ``x * 1 / sqrt(mean(x^2) + eps)``
(transformers' ``hidden * torch.rsqrt(variance + eps)``; the ONNX RMSNormalization import), or
``x / sqrt(mean(x^2) + eps)``: four or five launches per norm, two per decoder layer. The
``rowop`` "rms" kernel reads each row twice and writes it once; the scale that follows (a
Multiply by a constant) fuses into it as the epilogue, as a LayerNorm's does into MVN.

LayerNorm written as the RMSNorm of the centered rows (Cohere: ``d = x - mean(x)``, then
``d * rsqrt(mean(d^2) + eps)``) is an MVN over the last axis (eps inside the square root):
:func:`center_rms_norms` makes it one, one ``rowop`` "mvn" launch in place of three (the mean,
the difference, the RmsNorm), and ``norm_gemm`` folds it into the GEMMs that read it like any
LayerNorm. (Its variance is the mean of ``d^2``, which is what the MVN kernel computes.)

Conditions (:func:`fuse_rms_norms`): float32; the square is ``Power(x, 2)`` or ``x * x``; the
mean a ReduceMean over the last axis keeping it; ``eps`` a constant scalar added to it (or
none: eps 0); the reciprocal square root ``1 / Sqrt``, ``Power(., -0.5)`` or ``Power(Sqrt,
-1)``, multiplied by ``x`` (or ``x`` divided by the Sqrt); each op read only by the next one.
"""
from __future__ import annotations

import numpy as np

from ..core.boundary import Constant
from ..ops.elementwise import Add, Divide, Multiply, Power, Sqrt, Subtract
from ..ops.normalization import MVN
from ..ops.reduction import ReduceMean
from ..ops.shape_ops import ShapeOf
from .kinds.normalization import RmsNorm, RmsNormDesc
from .program_node import ProgramNode, fuse_matches, read_once, standing_for

F32 = np.dtype(np.float32)


def _scalar(node, k: int = 0) -> float | None:
    """The value of a constant float scalar (any shape of one element)."""
    if not node.is_constant or k:
        return None
    v = np.asarray(node.value)
    return float(v.reshape(-1)[0]) if v.size == 1 and v.dtype.kind == "f" else None


def _other(n, src) -> tuple | None:
    """The input of binary ``n`` that is not ``src`` (a node)."""
    (a, ka), (b, kb) = n.inputs
    return (b, kb) if a is src else (a, ka) if b is src else None


def _last_axis_mean(m, users: dict) -> bool:
    """Whether ``m`` is a ReduceMean over the last axis of its input, keeping it, read once."""
    if not m.is_a(ReduceMean) or not m.attrs.get("keep_dims") or not read_once(m, users) \
            or not m.inputs[1][0].is_constant:
        return False
    src, k = m.inputs[0]
    ps = src.out_pshapes[k]
    axes = np.asarray(m.inputs[1][0].value).reshape(-1)
    return ps.rank_is_static and axes.size == 1 and int(axes[0]) % len(ps) == len(ps) - 1


def _mean_square(m, users: dict) -> tuple | None:
    """(x, k, [square, mean]) when ``m`` is ReduceMean(x^2) over the last axis, keeping it."""
    if not _last_axis_mean(m, users):
        return None
    sq, _ = m.inputs[0]
    if not read_once(sq, users):
        return None
    if sq.is_a(Power) and _scalar(*sq.inputs[1]) == 2.0:
        return (*sq.inputs[0], [sq, m])
    if sq.is_a(Multiply) and sq.inputs[0] == sq.inputs[1]:
        return (*sq.inputs[0], [sq, m])
    return None


def _root_sqrt(t, users: dict) -> tuple | None:
    """(x, k, eps, [square, mean, add]) when ``t`` is mean(x^2) + eps, or (x, k, 0, [square,
    mean]) when it is mean(x^2) (Helium's dynamo export adds no eps)."""
    found = _mean_square(t, users)
    if found is not None:
        return found[0], found[1], 0.0, found[2]
    if not t.is_a(Add) or not read_once(t, users):
        return None
    for (m, _), (c, kc) in (t.inputs, t.inputs[::-1]):
        eps = _scalar(c, kc)
        found = _mean_square(m, users) if eps is not None and eps >= 0 else None
        if found is not None:
            return found[0], found[1], eps, found[2] + [t]
    return None


def _inverse_root(r, users: dict) -> tuple | None:
    """(x, k, eps, chain) when ``r`` is 1 / sqrt(mean(x^2) + eps) in one of its spellings."""
    if not read_once(r, users):
        return None
    if r.is_a(Divide) and _scalar(*r.inputs[0]) == 1.0 and r.inputs[1][0].is_a(Sqrt):
        s = r.inputs[1][0]
    elif r.is_a(Power) and _scalar(*r.inputs[1]) == -1.0 and r.inputs[0][0].is_a(Sqrt):
        s = r.inputs[0][0]
    elif r.is_a(Power) and _scalar(*r.inputs[1]) == -0.5:
        found = _root_sqrt(r.inputs[0][0], users)
        return None if found is None else (*found[:3], found[3] + [r])
    else:
        return None
    found = _root_sqrt(s.inputs[0][0], users) if read_once(s, users) else None
    return None if found is None else (*found[:3], found[3] + [s, r])


def _match(n, users: dict) -> tuple | None:
    """(x, k, eps, replaced nodes) when ``n`` computes an RMSNorm of ``x`` without scale."""
    if n.out_dtypes[0] != F32 or n.num_outputs != 1:
        return None
    if n.is_a(Divide) and n.inputs[1][0].is_a(Sqrt) and read_once(n.inputs[1][0], users):
        s = n.inputs[1][0]
        found = _root_sqrt(s.inputs[0][0], users)
        if found is not None and (found[0], found[1]) == n.inputs[0]:
            return (*found[:3], found[3] + [s])
    if n.is_a(Multiply):
        for j in (0, 1):
            found = _inverse_root(n.inputs[1 - j][0], users)
            if found is not None and (found[0], found[1]) == n.inputs[j]:
                return found
    return None


def _rms_norm(n, users: dict) -> tuple | None:
    found = _match(n, users) if n.is_a(Multiply, Divide) else None
    if found is None:
        return None
    x, k, eps, chain = found
    return [standing_for(n, RmsNorm.type_name, [(x, k)], RmsNormDesc(eps, chain))], chain


def fuse_rms_norms(nodes: list) -> list:
    """``nodes`` (topological) with every RMSNorm chain replaced by an RmsNorm node."""
    return fuse_matches(nodes, _rms_norm)


def _centered(n, users: dict) -> tuple | None:
    """(x, k, [mean, difference]) when RmsNorm ``n`` reads ``x - mean(x)`` (a ReduceMean over
    the last axis, keeping it, read only by the Subtract) of float32 ``x``, the difference
    read for its data by ``n`` alone (ShapeOfs may read its shape: ``x``'s)."""
    if not n.is_a(RmsNorm):
        return None
    d, dk = n.inputs[0]
    if not d.is_a(Subtract) or dk or d.is_output or d.out_dtypes[0] != F32:
        return None
    (x, k), (m, mk) = d.inputs
    if mk or not _last_axis_mean(m, users) or m.inputs[0] != (x, k) \
            or x.out_pshapes[k] != d.out_pshapes[0]:
        return None
    if any(u is not n and not u.is_a(ShapeOf) for u, _ in users.get(id(d), ())):
        return None
    return x, k, [m, d]


def _mvn(n, users: dict) -> tuple | None:
    found = _centered(n, users)
    if found is None:
        return None
    x, k, absorbed = found
    d = absorbed[-1]
    for u, j in users.get(id(d), ()):
        if u is not n:  # (a ShapeOf: the difference has x's shape)
            u.inputs[j] = (x, k)
    axes = ProgramNode(f"{n.id}/axes", Constant.type_name, value=np.array([-1], np.int64))
    mvn = ProgramNode(n.id, MVN.type_name,
                      {"normalize_variance": True, "eps": n.subgraph.eps,
                       "eps_mode": "INSIDE_SQRT"},
                      [(x, k), (axes, 0)], out_dtypes=n.out_dtypes, out_pshapes=n.out_pshapes,
                      name=n.name)
    return [axes, mvn], absorbed


def center_rms_norms(nodes: list) -> list:
    """``nodes`` (topological) with every RmsNorm of ``x - mean(x)`` (module docstring) an
    MVN of ``x`` over its last axis, eps inside the square root."""
    return fuse_matches(nodes, _mvn)
