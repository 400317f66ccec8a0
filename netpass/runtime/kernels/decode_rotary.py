"""The rotary embedding and the queries' and keys' RMS norms folded into the decode attention
(:func:`netpass.runtime.kernels.decode.attention_decode`'s ``rot``): C helpers that rotate,
and normalize first, each element of a query or key row as the kernel loads it.
"""
from __future__ import annotations

from .common import flit


def rot_defs(width: int, interleaved: bool, norms: tuple | None = None) -> str:
    """``rot_elem``: element ``c`` of a row ``x`` (element stride ``xs``) rotated by the
    ``cos`` and ``sin`` rows ``cr`` and ``sr`` (strides ``cs`` and ``ss``) over its first
    ``width`` elements, as kernels.eltwise.rotary: the partner half the width away
    (``rotate_half``) or the neighbour (``interleaved``), negated in the first half or at
    even places; the rest as it is. With ``norms`` (``attention_decode``'s): ``rot_q`` and
    ``rot_k`` instead, of the row normalized first (its elements times the row's ``r``, then
    times the scale ``g`` at stride ``gs`` where the norm has one), as the RmsNorm's kernel
    and its fused scale compute it."""
    out = ""
    for name, norm in [("elem", None)] if norms is None else zip("qk", norms):
        def at(j: str, norm=norm) -> str:
            if norm is None:
                return f"x[{j} * xs]"
            return f"(x[{j} * xs] * r * g[{j} * gs])" if norm[1] else f"(x[{j} * xs] * r)"
        params = "" if norm is None else \
            ", float r, __global const float* g, int gs" if norm[1] else ", float r"
        partner = f"(c & 1) ? {at('(c - 1)')} : -{at('(c + 1)')}" if interleaved else \
            f"c < {width // 2} ? -{at(f'(c + {width // 2})')} : {at(f'(c - {width // 2})')}"
        out += f"""inline float rot_{name}(__global const float* x, int xs, int c,
                       __global const float* cr, int cs, __global const float* sr,
                       int ss{params}) {{
  if (c >= {width}) return {at("c")};
  const float p = {partner};
  return mad({at("c")}, cr[c * cs], p * sr[c * ss]);
}}
"""
    return out


def rotated(x: str, xs: str, row: str, c: str = "c", side: str = "q",
          norms: tuple | None = None) -> str:
    """The rotated element ``c`` of row ``x`` (stride ``xs``) at position row ``row``:
    ``rot_elem``, or with ``norms`` ``rot_q`` / ``rot_k`` (``side``) of the normalized row
    (its scale ``r`` + ``side``, the norm's ``G`` + ``side`` where it has one)."""
    tables = f"RC + ({row}) * scm, scd, RS + ({row}) * ssm, ssd"
    if norms is None:
        return f"rot_elem({x}, {xs}, {c}, {tables})"
    g = side.upper()
    scale = f", G{g}, g{side}s" if norms["qk".index(side)][1] else ""
    return f"rot_{side}({x}, {xs}, {c}, {tables}, r{side}{scale})"


def row_scale(r: str, elem: str, d: int, eps: float) -> str:
    """C statements of one item: ``r``, the RmsNorm scale 1 / sqrt(mean(x^2) + eps) of a row
    of ``d`` elements ``elem`` (of ``c``)."""
    return f"""float {r}_ = 0.0f;
          for (int c = 0; c < {d}; ++c) {{ const float v_ = {elem}; {r}_ += v_ * v_; }}
          const float {r} = 1.0f / sqrt({r}_ / (float){d} + {flit(eps)});"""


def query_scale(d: int, eps: float, tree: str) -> str:
    """C statements of the work-group: ``rq``, the RmsNorm scale of its query row (Q), its
    squares summed over ``red`` (read before the barrier that follows the query loads)."""
    return f"""float rq_ = 0.0f;
  for (int c = lid; c < {d}; c += DLS) {{ const float v_ = Q[c * sqd]; rq_ += v_ * v_; }}
  red[lid] = rq_;
  barrier(CLK_LOCAL_MEM_FENCE);
  {tree.format(op="red[lid] + red[lid + s]")}
  const float rq = 1.0f / sqrt(red[0] / (float){d} + {flit(eps)});"""
