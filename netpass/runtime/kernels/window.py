"""Sliding-window kernels: direct convolution and pooling over strided tensors (NCHW or NHWC),
and the depthwise convolution on tiles staged in local memory."""
from __future__ import annotations

import numpy as np

from .common import (
    Source,
    Stage,
    ctype,
    header,
    memoized,
    nan_max,
    offsets,
    side_params,
    stage_code,
)


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
    args += side_params(extra_dtypes[:n_extra], erank)
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


DW_LOCAL = 6144  # floats of input tile the depthwise kernel stages (24 KB)
DW_TAPS = 128    # filter taps it keeps in local memory
DW_THREADS = 256


def depthwise_shape(oh: int, ow: int) -> tuple[int, int, int]:
    """(work-items along x, along y, outputs per item along y) of :func:`depthwise_conv` for an
    OH x OW output: 32 wide from 24 columns on, 16 from 12, else 8 (MobileNet's 14 x 14 and 7
    x 7 planes would leave most of a 32-wide tile idle), as many rows as fill 256 items or
    the plane, and up to 4 outputs per item down the plane (fewer halo reads per output)."""
    tw = 32 if ow >= 24 else 16 if ow >= 12 else 8
    th = DW_THREADS // tw
    while th > 1 and th // 2 >= oh:
        th //= 2
    oy = 4 if oh > 2 * th else 2 if oh > th else 1
    return tw, th, oy


def depthwise_tile(shape: tuple[int, int, int], kh: int, kw: int, sh: int, sw: int, dh: int,
                   dw: int) -> tuple[int, int]:
    """(rows, columns) of the input tile a work-group of :func:`depthwise_conv` stages."""
    tw, th, oy = shape
    return (th * oy - 1) * sh + (kh - 1) * dh + 1, (tw - 1) * sw + (kw - 1) * dw + 1


@memoized
def depthwise_conv(shape: tuple[int, int, int], epilogue: list[Stage], n_extra: int,
                   extra_dtypes: list, erank: int) -> Source:
    """Depthwise 2-D convolution (groups = input channels, one input channel per group, a
    channel multiplier ``Og``), float32 NCHW through strides. A work-group of ``shape`` = (TX,
    TY, OY) items computes a TY OY x TX block of one output plane, OY outputs per item (rows
    ty, ty + TY, ...), from the input tile (halo included, zeros outside the image) and the
    channel's filter taps staged once in local memory; the direct kernel reads every tap from
    global memory per output. The host checks that the tile (:func:`depthwise_tile`) and the
    taps fit DW_LOCAL / DW_TAPS."""
    tw, th, oy = shape
    args = ["__global const float* X", "int xoff", "__global const float* W", "int woff",
            "__global float* Y", "int yoff", "int H", "int Wd", "int O", "int Og", "int OH",
            "int OW", "int KH", "int KW", "int sh", "int sw", "int dh", "int dw", "int ph",
            "int pw", "int xsn", "int xsc", "int xsh", "int xsw", "int ysn", "int ysc", "int ysh",
            "int ysw", "int wso", "int wsh", "int wsw", "int rows", "int cols"]
    args += side_params(extra_dtypes[:n_extra], erank)
    loads = {j: f"in{j}[o_in{j}]" for j in range(n_extra)}
    code = stage_code([Stage("acc[o]", [], "float")] + epilogue, loads)
    offs = offsets(erank, [f"in{j}" for j in range(n_extra)], "flat") if n_extra else ""
    text = header([np.float32] + list(extra_dtypes)) + f"""#define TW {tw}
#define TH {th}
#define OY {oy}
__kernel __attribute__((reqd_work_group_size(TW, TH, 1)))
void depthwise_conv({', '.join(args)})
{{
  __local float tile[{DW_LOCAL}];
  __local float taps[{DW_TAPS}];
  const int tx = get_local_id(0), ty = get_local_id(1), tid = ty * TW + tx;
  const int ow0 = get_group_id(0) * TW, oh0 = get_group_id(1) * (TH * OY);
  const int plane = get_group_id(2), b = plane / O, oc = plane - b * O, c = oc / Og;
  __global const float* x = X + xoff + b * xsn + c * xsc;
  const int ih0 = oh0 * sh - ph, iw0 = ow0 * sw - pw;
  for (int i = tid; i < rows * cols; i += TW * TH) {{
    const int r = i / cols, q = i - r * cols, ih = ih0 + r, iw = iw0 + q;
    tile[i] = (ih >= 0 && ih < H && iw >= 0 && iw < Wd) ? x[ih * xsh + iw * xsw] : 0.0f;
  }}
  for (int i = tid; i < KH * KW; i += TW * TH) {{
    const int kh = i / KW;
    taps[i] = W[woff + oc * wso + kh * wsh + (i - kh * KW) * wsw];
  }}
  barrier(CLK_LOCAL_MEM_FENCE);
  const int ow = ow0 + tx;
  if (ow >= OW) return;
  float acc[OY];
  for (int o = 0; o < OY; ++o) acc[o] = 0.0f;
  for (int kh = 0; kh < KH; ++kh) {{
    __local const float* tap = taps + kh * KW;
    for (int kw = 0; kw < KW; ++kw) {{
      const float w_ = tap[kw];
      __local const float* col = tile + kh * dh * cols + tx * sw + kw * dw;
      for (int o = 0; o < OY; ++o) acc[o] = mad(col[(ty + o * TH) * sh * cols], w_, acc[o]);
    }}
  }}
  for (int o = 0; o < OY; ++o) {{
    const int oh = oh0 + ty + o * TH;
    if (oh >= OH) break;
    const int flat = b * ysn + oc * ysc + oh * ysh + ow * ysw;
    {offs}
    {code}
    Y[yoff + flat] = x{len(epilogue)};
  }}
}}
"""
    return Source(text, "depthwise_conv")
