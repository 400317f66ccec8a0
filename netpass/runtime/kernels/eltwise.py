"""Elementwise kernels: n-ary over a collapsed iteration space with per-tensor strides (numpy
broadcasting, transposes and strided writes are all strides), fused post-op stages, and a
float4 path for flat contiguous float tensors. With one input and the identity stage it is the
runtime's strided copy."""
from __future__ import annotations

from .common import Source, Stage, ctype, header, memoized, offsets, stage_code


@memoized
def eltwise(in_dtypes: list, out_dtype, stages: list[Stage], rank: int, flat: bool) -> Source:
    """Elementwise kernel. ``flat``: every tensor is contiguous with the iteration space (or a
    scalar broadcast) and no strides are needed."""
    n_in = len(in_dtypes)
    oct_ = ctype(out_dtype)
    args = [f"__global {oct_}* out", "int off_out"]
    for j, dt in enumerate(in_dtypes):
        args += [f"__global const {ctype(dt)}* in{j}", f"int off_in{j}"]
    args.append("int n")
    if flat:
        args += [f"int sc{j}" for j in range(n_in)]  # 1: scalar input
        loads = {j: f"in{j}[off_in{j} + (sc{j} ? 0 : gid)]" for j in range(n_in)}
        body = f"""  int gid = get_global_id(0);
  if (gid >= n) return;
  {stage_code(stages, loads)}
  out[off_out + gid] = ({oct_})(x{len(stages) - 1});"""
    else:
        args += [f"int d{k}" for k in range(rank)]
        tensors = ["out"] + [f"in{j}" for j in range(n_in)]
        for t in tensors:
            args += [f"int s_{t}_{k}" for k in range(rank)]
        loads = {j: f"in{j}[o_in{j}]" for j in range(n_in)}
        body = f"""  int gid = get_global_id(0);
  if (gid >= n) return;
  {offsets(rank, tensors)}
  {stage_code(stages, loads)}
  out[o_out] = ({oct_})(x{len(stages) - 1});"""
    text = header(list(in_dtypes) + [out_dtype]) + \
        f"__kernel void ew({', '.join(args)})\n{{\n{body}\n}}\n"
    return Source(text, "ew")


@memoized
def copy4(dtype, rank: int) -> Source:
    """Strided copy of 4-element rows: dims ``d*`` count them (the last one in rows of 4
    contiguous elements in both tensors), strides ``s_*`` in elements; one row per work-item,
    read and written with ``vload4`` / ``vstore4`` (element alignment is enough)."""
    t = ctype(dtype)
    args = [f"__global {t}* out", "int off_out", f"__global const {t}* in0", "int off_in0", "int n"]
    args += [f"int d{k}" for k in range(rank)]
    for name in ("out", "in0"):
        args += [f"int s_{name}_{k}" for k in range(rank)]
    body = f"""  int gid = get_global_id(0);
  if (gid >= n) return;
  {offsets(rank, ["out", "in0"])}
  vstore4(vload4(0, in0 + o_in0), 0, out + o_out);"""
    text = header([dtype]) + f"__kernel void copy4({', '.join(args)})\n{{\n{body}\n}}\n"
    return Source(text, "copy4")


@memoized
def eltwise_vec4(n_in: int, stages: list[Stage]) -> Source:
    """float32, all inputs contiguous and same size: 4 elements per work-item."""
    args = ["__global float* out", "int off_out"]
    for j in range(n_in):
        args += [f"__global const float* in{j}", f"int off_in{j}"]
    args.append("int n")
    vstages = [Stage(s.expr, s.operands, "float4") for s in stages]
    loads = {j: f"vload4(0, in{j} + off_in{j} + i)" for j in range(n_in)}
    sloads = {j: f"in{j}[off_in{j} + i]" for j in range(n_in)}
    body = f"""  int i = get_global_id(0) * 4;
  if (i + 3 < n) {{
  {stage_code(vstages, loads)}
  vstore4(x{len(stages) - 1}, 0, out + off_out + i);
  }} else {{
  for (; i < n; ++i) {{
  {stage_code(stages, sloads)}
  out[off_out + i] = x{len(stages) - 1};
  }} }}"""
    text = f"__kernel void ew4({', '.join(args)})\n{{\n{body}\n}}\n"
    return Source(text, "ew4")


@memoized
def rotary(rank: int, rank2: int | None = None, interleaved: bool = False) -> Source:
    """Rotary embeddings: y = x * c + r * s over the last axis's first 2h elements, r the
    partner of x h away (``-x[j + h]`` for j < h, else ``x[j - h]``), or next to it where
    ``interleaved`` (``-x[j + 1]`` at even j, else ``x[j - 1]``), y = x past them (a partial
    rotary's pass-through part); x, c and s read through strides over the output's dims
    ``d*`` (the last one the rotated axis), one work-item per output element.
    ``rank2``: a second tensor rotated by the same launch (a layer's queries
    and keys, :func:`netpass.runtime.rotary.merge_rotary_pairs`), its own arguments after the
    first's (suffix ``2``, dims ``e*``), its items after the first's ``n``."""
    def part(r: int, t: str, dims: str) -> tuple[list[str], str]:
        ints = [f"int n{t}", f"int h{t}"] + [f"int {dims}{k}" for k in range(r)] + \
            [f"int s_{x}{t}_{k}" for x in ("x", "c", "s") for k in range(r)]
        args = [f"__global const float* X{t}", f"int off_x{t}", f"__global const float* C{t}",
                f"int off_c{t}", f"__global const float* S{t}", f"int off_s{t}",
                f"__global float* Y{t}", f"int yoff{t}"] + ints
        if interleaved:
            partner = f"""int step = s_x{t}_{r - 1};
      float r = (j & 1) ? X{t}[o_x{t} - step] : -X{t}[o_x{t} + step];"""
        else:
            partner = f"""int step = h{t} * s_x{t}_{r - 1};
      float r = j < h{t} ? -X{t}[o_x{t} + step] : X{t}[o_x{t} - step];"""
        body = f"""{offsets(r, [f"x{t}", f"c{t}", f"s{t}"], "gid", dims)}
    int j = gid % {dims}{r - 1};
    if (j >= 2 * h{t}) {{
      Y{t}[yoff{t} + gid] = X{t}[o_x{t}];
    }} else {{
      {partner}
      Y{t}[yoff{t} + gid] = X{t}[o_x{t}] * C{t}[o_c{t}] + r * S{t}[o_s{t}];
    }}"""
        return args, body
    args, body = part(rank, "", "d")
    if rank2 is None:
        main = f"""if (gid >= n) return;
  {{
    {body}
  }}"""
    else:
        args2, body2 = part(rank2, "2", "e")
        args += args2
        main = f"""if (gid < n) {{
    {body}
  }} else if ((gid -= n) < n2) {{
    {body2}
  }}"""
    text = header([]) + f"""__kernel void rotary({', '.join(args)})
{{
  int gid = get_global_id(0);
  {main}
}}
"""
    return Source(text, "rotary")


@memoized
def unaries(exprs: tuple[str, ...]) -> Source:
    """Several one-input float32 expressions of one contiguous tensor, one output each
    (kinds.fused_elementwise.Unaries: a rotary table's cos and sin): each element read once."""
    outs = [f"__global float* Y{k}, int yoff{k}" for k in range(len(exprs))]
    stores = "\n  ".join(
        f"{{ {stage_code([Stage(e, [('in', 0)], 'float')], {0: 'v'})} Y{k}[yoff{k} + gid] = x0; }}"
        for k, e in enumerate(exprs))
    text = header([]) + f"""__kernel void unaries(__global const float* X, int off_x,
                      {', '.join(outs)}, int n)
{{
  int gid = get_global_id(0);
  if (gid >= n) return;
  const float v = X[off_x + gid];
  {stores}
}}
"""
    return Source(text, "unaries")


def gated_code(stages: list[Stage], g: str, u: str, vector: bool = False) -> tuple[str, str]:
    """(C statements, the variable they leave it in) of a gated MLP's activation of gate ``g``
    and up projection ``u``, C expressions of floats (``vector``: float4): ``stages`` over
    loads 0 and 1, the activation's ops then the product (their expressions their rows':
    kinds.fused_elementwise.GatedActivationDesc.stages). :func:`gated_activation`, the GEMV's gated
    A (``decode_gemv.gemv``), the fused MLP (``decode_mlp``)."""
    if vector:
        stages = [Stage(st.expr, st.operands, "float4") for st in stages]
    return stage_code(stages, {0: g, 1: u}), f"x{len(stages) - 1}"


@memoized
def gated_activation(stages: list[Stage]) -> Source:
    """A gated MLP's activation: y[r, j] = act(x[r, j]) * x[r, h + j] over rows of 2h (the
    gate's and the up projection's columns of one GEMM, kinds.fused_elementwise.GatedActivation),
    ``stages`` as :func:`gated_code` takes them."""
    code, y = gated_code(stages, "X[off_x + row * 2 * h + j]", "X[off_x + row * 2 * h + h + j]")
    text = header([]) + f"""__kernel void gated_activation(__global const float* X, int off_x,
                               __global float* Y, int yoff, int n, int h)
{{
  int gid = get_global_id(0);
  if (gid >= n) return;
  int row = gid / h, j = gid - row * h;
  {code}
  Y[yoff + gid] = {y};
}}
"""
    return Source(text, "gated_activation")
