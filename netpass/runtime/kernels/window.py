"""Sliding-window kernels: direct convolution and pooling over strided tensors (NCHW or NHWC)."""
from __future__ import annotations

from .common import Source, Stage, ctype, header, memoized, nan_max, offsets, stage_code


@memoized
def conv(dtype, epilogue: list[Stage], n_extra: int, extra_dtypes: list, erank: int) -> Source:
    """Direct 2-D convolution, one output element per work-item; generic tensor strides make
    NCHW and NHWC (and OIHW / OHWI filters) the same kernel."""
    t = ctype(dtype)
    args = [f"__global const {t}* X", "int xoff", f"__global const {t}* W", "int woff",
            f"__global {t}* Y", "int yoff", "int n",
            "int Cg", "int H", "int Wd", "int Og", "int OH", "int OW", "int KH", "int KW",
            "int sh", "int sw", "int dh", "int dw", "int ph", "int pw",
            "int xsn", "int xsc", "int xsh", "int xsw", "int ysn", "int ysc", "int ysh", "int ysw",
            "int O",
            "int wso", "int wsc", "int wsh", "int wsw"]
    for j in range(n_extra):
        args += [f"__global const {ctype(extra_dtypes[j])}* in{j}", f"int off_in{j}"]
    if n_extra:
        args += [f"int d{k}" for k in range(erank)]
        for j in range(n_extra):
            args += [f"int s_in{j}_{k}" for k in range(erank)]
    code = stage_code([Stage("acc", [], "float")] + epilogue,
                      {j: f"in{j}[o_in{j}]" for j in range(n_extra)})
    offs = offsets(erank, [f"in{j}" for j in range(n_extra)], "flat") if n_extra else ""
    text = header([dtype] + list(extra_dtypes)) + f"""__kernel void conv({', '.join(args)})
{{
  int gid = get_global_id(0);
  if (gid >= n) return;
  int ow = gid % OW; int q = gid / OW;
  int oh = q % OH; q /= OH;
  int oc = q % O; int b = q / O;
  int g = oc / Og;
  float acc = 0.0f;
  __global const {t}* w = W + woff + (long)oc * wso;
  __global const {t}* x = X + xoff + (long)b * xsn + (long)g * Cg * xsc;
  for (int c = 0; c < Cg; ++c) {{
    for (int kh = 0; kh < KH; ++kh) {{
      int ih = oh * sh - ph + kh * dh;
      if (ih < 0 || ih >= H) continue;
      for (int kw = 0; kw < KW; ++kw) {{
        int iw = ow * sw - pw + kw * dw;
        if (iw < 0 || iw >= Wd) continue;
        acc = mad((float)x[c * xsc + ih * xsh + iw * xsw], (float)w[c * wsc + kh * wsh + kw * wsw],
                  acc);
      }}
    }}
  }}
  int flat = b * ysn + oc * ysc + oh * ysh + ow * ysw;
  {offs}
  {code}
  Y[yoff + flat] = ({t})(x{len(epilogue)});
}}
"""
    return Source(text, "conv")


@memoized
def pool(dtype, kind: str, exclude_pad: bool) -> Source:
    """Max / average 2-D pooling over strided tensors (NCHW or NHWC)."""
    t = ctype(dtype)
    init = "-INFINITY" if kind == "max" else "0.0f"
    upd = f"acc = {nan_max('acc', 'v')};" if kind == "max" else "acc += v;"
    fin = "acc" if kind == "max" else ("acc / (float)cnt" if exclude_pad else "acc / (float)full")
    text = header([dtype]) + f"""__kernel void pool(__global const {t}* X, int xoff,
                   __global {t}* Y, int yoff, int n,
                   int C, int H, int Wd, int OH, int OW, int KH, int KW, int sh, int sw,
                   int dh, int dw, int ph, int pw, int peh, int pew,
                   int xsn, int xsc, int xsh, int xsw, int ysn, int ysc, int ysh, int ysw)
{{
  int gid = get_global_id(0);
  if (gid >= n) return;
  int ow = gid % OW; int q = gid / OW;
  int oh = q % OH; q /= OH;
  int c = q % C; int b = q / C;
  float acc = {init};
  int cnt = 0, full = 0;
  __global const {t}* x = X + xoff + (long)b * xsn + (long)c * xsc;
  for (int kh = 0; kh < KH; ++kh) {{
    int ih = oh * sh - ph + kh * dh;
    for (int kw = 0; kw < KW; ++kw) {{
      int iw = ow * sw - pw + kw * dw;
      if (ih >= -ph && ih < H + peh && iw >= -pw && iw < Wd + pew) full++;
      if (ih < 0 || ih >= H || iw < 0 || iw >= Wd) continue;
      float v = (float)x[ih * xsh + iw * xsw];
      cnt++;
      {upd}
    }}
  }}
  Y[yoff + b * ysn + c * ysc + oh * ysh + ow * ysw] = ({t})({fin});
}}
"""
    return Source(text, "pool")
