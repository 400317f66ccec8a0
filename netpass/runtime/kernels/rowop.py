"""Row kernels: one work-group of ``LS`` items per row for reductions, softmax / log-softmax
and MVN (the last three with fused elementwise epilogues)."""
from __future__ import annotations

from collections.abc import Sequence

from .common import (
    LS,
    Source,
    Stage,
    ctype,
    flit,
    header,
    memoized,
    nan_max,
    nan_min,
    offsets,
    stage_code,
)

_REDUCE = {  # kind -> (init, accumulate(acc, v), combine(a, b), finish(acc, R))
    "sum": ("0.0f", "{a} + {v}", "{a} + {b}", "{a}"),
    "mean": ("0.0f", "{a} + {v}", "{a} + {b}", "{a} / (float)R"),
    "max": ("-INFINITY", nan_max("{a}", "{v}"), nan_max("{a}", "{b}"), "{a}"),
    "min": ("INFINITY", nan_min("{a}", "{v}"), nan_min("{a}", "{b}"), "{a}"),
    "prod": ("1.0f", "{a} * {v}", "{a} * {b}", "{a}"),
    "l1": ("0.0f", "{a} + fabs({v})", "{a} + {b}", "{a}"),
    "l2": ("0.0f", "{a} + {v} * {v}", "{a} + {b}", "sqrt({a})"),
    "sumsquare": ("0.0f", "{a} + {v} * {v}", "{a} + {b}", "{a}"),
    "logsum": ("0.0f", "{a} + {v}", "{a} + {b}", "log({a})"),
    "logsumexp": ("0.0f", "{a} + exp({v})", "{a} + {b}", "log({a})"),
    "and": ("1.0f", "(({a} != 0) && ({v} != 0)) ? 1.0f : 0.0f",
            "({a} != 0 && {b} != 0) ? 1.0f : 0.0f", "{a}"),
    "or": ("0.0f", "(({a} != 0) || ({v} != 0)) ? 1.0f : 0.0f",
           "({a} != 0 || {b} != 0) ? 1.0f : 0.0f", "{a}"),
}


def _local_reduce(var: str, combine: str) -> str:
    return f"""  sh[lid] = {var};
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = LS / 2; s > 0; s >>= 1) {{
    if (lid < s) sh[lid] = {combine.format(a='sh[lid]', b='sh[lid + s]')};
    barrier(CLK_LOCAL_MEM_FENCE);
  }}
  {var} = sh[0];
  barrier(CLK_LOCAL_MEM_FENCE);"""


@memoized
def rowop(kind: str, in_dtype, out_dtype, params: dict, epilogue: Sequence[Stage] = (),
          extra_dtypes: Sequence = (), erank: int = 0) -> Source:
    """One work-group of ``LS`` items per row; row r = (o, i) covers x[o*R*inner + j*inner + i].
    Softmax / log-softmax / MVN outputs go through the fused ``epilogue`` stages (their extra
    inputs indexed by the output's flat position). ``params["xrs"]`` (rows of one axis,
    ``inner`` 1): the kernel takes ``xrh, xro, xri`` after ``inner``, and row r of x starts at
    x[(r / xrh) * xro + (r % xrh) * xri] (a split piece's rows, read where the projection wrote
    them: per token, or per head of each token); y stays dense."""
    it, ot = ctype(in_dtype), ctype(out_dtype)
    n_extra = len(extra_dtypes)
    extra_args = "".join(f", __global const {ctype(d)}* in{j}, int off_in{j}"
                         for j, d in enumerate(extra_dtypes))
    if n_extra:
        extra_args += "".join(f", int d{k}" for k in range(erank))
        extra_args += "".join(f", int s_in{j}_{k}" for j in range(n_extra) for k in range(erank))

    def store(value: str) -> str:
        """C statement writing ``value`` to y[j * inner], through the epilogue if any."""
        if not epilogue:
            return f"y[j * inner] = ({ot})({value});"
        code = stage_code([Stage("{0}", [("in", -1)], "float")] + list(epilogue),
                           {-1: "ev", **{j: f"in{j}[o_in{j}]" for j in range(n_extra)}})
        offs = offsets(erank, [f"in{j}" for j in range(n_extra)], "flat") if n_extra else ""
        return (f"{{ float ev = (float)({value}); int flat = (o * R + j) * inner + i;\n  {offs}\n"
                f"  {code}\n  y[j * inner] = ({ot})(x{len(epilogue)}); }}")

    strided = bool(params.get("xrs"))
    xrs_arg = ", int xrh, int xro, int xri" if strided else ""
    x_at = "(row / xrh) * xro + (row % xrh) * xri" if strided else "o * R * inner + i"
    head = f"""#define LS {LS}
__kernel __attribute__((reqd_work_group_size(LS, 1, 1)))
void rowop(__global const {it}* X, int xoff, __global {ot}* Y, int yoff, int R,
           int inner{xrs_arg}{extra_args})
{{
  const int row = get_group_id(0), lid = get_local_id(0);
  const int o = row / inner, i = row - (row / inner) * inner;
  __global const {it}* x = X + xoff + {x_at};
  __global {ot}* y = Y + yoff + o * R * inner + i;
  __local float sh[LS];
"""
    if kind in _REDUCE:
        init, acc, comb, fin = _REDUCE[kind]
        body = f"""  float a = {init};
  for (int j = lid; j < R; j += LS) {{
    float v = (float)x[j * inner]; a = {acc.format(a='a', v='v')};
  }}
{_local_reduce('a', comb)}
  if (lid == 0) Y[yoff + row] = ({ot})({fin.format(a='a')});
"""
    elif kind in ("softmax", "logsoftmax"):
        mx, sm = _REDUCE["max"], _REDUCE["sum"]
        final = "exp((float)x[j * inner] - m) / s" if kind == "softmax" else \
            "(float)x[j * inner] - m - log(s)"
        body = f"""  float m = -INFINITY;
  for (int j = lid; j < R; j += LS) {{ float v = (float)x[j * inner]; m = {nan_max("m", "v")}; }}
{_local_reduce('m', mx[2])}
  float s = 0.0f;
  for (int j = lid; j < R; j += LS) s += exp((float)x[j * inner] - m);
{_local_reduce('s', sm[2])}
  for (int j = lid; j < R; j += LS) {store(final)}
"""
    elif kind == "mvn":
        eps = flit(params["eps"])
        if params["normalize_variance"]:
            denom = f"sqrt(var + {eps})" if params["inside_sqrt"] else f"(sqrt(var) + {eps})"
            norm = f"/ {denom}"
        else:
            norm = ""
        body = f"""  float s = 0.0f;
  for (int j = lid; j < R; j += LS) s += (float)x[j * inner];
{_local_reduce('s', '{a} + {b}')}
  float mean = s / (float)R;
  float q = 0.0f;
  for (int j = lid; j < R; j += LS) {{ float d = (float)x[j * inner] - mean; q += d * d; }}
{_local_reduce('q', '{a} + {b}')}
  float var = q / (float)R;
  for (int j = lid; j < R; j += LS) {store(f"((float)x[j * inner] - mean) {norm}")}
"""
    elif kind == "rms":  # x / sqrt(mean(x^2) + eps): RMSNorm without its scale
        eps = flit(params["eps"])
        body = f"""  float q = 0.0f;
  for (int j = lid; j < R; j += LS) {{ float v = (float)x[j * inner]; q += v * v; }}
{_local_reduce('q', '{a} + {b}')}
  const float r = 1.0f / sqrt(q / (float)R + {eps});
  for (int j = lid; j < R; j += LS) {store("(float)x[j * inner] * r")}
"""
    else:
        raise KeyError(kind)
    text = header([in_dtype, out_dtype] + list(extra_dtypes)) + head + body + "}\n"
    return Source(text, "rowop")
