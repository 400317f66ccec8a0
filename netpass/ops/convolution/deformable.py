"""DeformableConvolution (OpenVINO opset8; ONNX DeformConv, opset 19): a 2-D convolution whose
kernel taps sample the data at learned fractional offsets.

Each output position's tap ``(kh, kw)`` reads channel group ``g``'s data at ``(oh * s_h - p_h
+ kh * d_h + dy, ow * s_w - p_w + kw * d_w + dx)`` where ``(dy, dx)`` come from ``offsets``
``[N, G_off * kH * kW * 2, oH, oW]`` (per offset group, per tap, y then x), bilinearly
interpolated, times the tap's ``mask`` value ``[N, G_off * kH * kW, oH, oW]`` where one is
given. With ``bilinear_interpolation_pad`` (what ONNX means) a corner outside the data reads
zero; without it a point outside ``[0, H) x [0, W)`` reads zero and the corners of one inside
are clamped to the data (OpenVINO's reference and CPU plugin). The numpy reference
gathers the sampled columns, then one batched matmul per group, in float64.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ...core.dimension import Dimension
from ...core.node import Node
from ...core.shape import PartialShape
from ..base import merged_input_type, set_name, to_output
from ..registry import export_error, onnx_export, onnx_rule
from .common import _conv_attrs, _ConvBase, add_channel_bias
from .window import onnx_window_attrs, onnx_window_export_attrs, resolve_pads, window_output_dims

__all__ = ["deformable_convolution"]


class DeformableConvolution(_ConvBase):
    """Inputs ``(data [N, C, H, W], offsets, filters [O, C / group, kH, kW][, mask])``; output
    ``[N, O, oH, oW]`` (see the module doc)."""

    type_name = "DeformableConvolution"
    version = "opset8"
    # v1: no mask input and no bilinear_interpolation_pad (v8's default, false)
    IR_VERSIONS = ("opset1", "opset8")
    ATTRS = {**_ConvBase.ATTRS, "group": 1, "deformable_group": 1,
             "bilinear_interpolation_pad": False}

    def _spatial_rank(self) -> int | None:
        return 2

    def _kernel_dims(self, n: int) -> list[Dimension]:
        filt = self.get_input_partial_shape(2)
        return list(filt)[2:] if filt.rank_is_static else [Dimension()] * n

    def infer_types(self) -> None:
        self.check(self.get_input_size() in (3, 4), "expects inputs (data, offsets, filters"
                   "[, mask])")
        et = merged_input_type(self)
        self.check(et.is_dynamic or et.is_real, "expects float inputs, got {}", et)
        self.check(self.group >= 1 and self.deformable_group >= 1,
                   "group {} and deformable_group {} must be >= 1", self.group,
                   self.deformable_group)
        shapes = [self.get_input_partial_shape(i) for i in range(self.get_input_size())]
        for i, what in enumerate(("data", "offsets", "filters", "mask")[:len(shapes)]):
            self.check(not shapes[i].rank_is_static or len(shapes[i]) == 4,
                       "{} must be 4-D, got {}", what, shapes[i])
        self._geometry(2)
        data, offsets, filt = shapes[:3]
        out_c = filt[0] if filt.rank_is_static else Dimension()
        if filt.rank_is_static:
            self.check(not out_c.is_static or out_c.min % self.group == 0,
                       "{} filters do not split into group={}", out_c, self.group)
        if data.rank_is_static:
            c = data[1]
            for k in (self.group, self.deformable_group):
                self.check(not c.is_static or c.min % k == 0,
                           "data's {} channels do not split into {} groups", c, k)
            if filt.rank_is_static and c.is_static and filt[1].is_static:
                self.check(filt[1].min * self.group == c.min, "data has {} channels but the "
                           "filters expect {} x group {}", c, filt[1], self.group)
        taps = None
        if filt.rank_is_static and filt[2].is_static and filt[3].is_static:
            taps = filt[2].min * filt[3].min
        for i, per_tap in ((1, 2), (3, 1)):
            if i < len(shapes) and shapes[i].rank_is_static and taps is not None and \
                    shapes[i][1].is_static:
                want = self.deformable_group * taps * per_tap
                self.check(shapes[i][1].min == want, "{} has {} channels, expected "
                           "deformable_group {} x {} taps x {}", ("offsets", "mask")[i // 3],
                           shapes[i][1], self.deformable_group, taps, per_tap)
        batch, spatial = Dimension(), [Dimension(), Dimension()]
        if data.rank_is_static:
            batch = data[0]
            spatial = window_output_dims(self, list(data)[2:], self._extents(2), self.strides,
                                         self.pads_begin, self.pads_end, self.auto_pad)
        for ps in [shapes[1], *shapes[3:]]:  # offsets and mask: the batch, the output's size
            if not ps.rank_is_static:
                continue
            merged = PartialShape([batch, *spatial]).merge([ps[0], ps[2], ps[3]])
            if merged is None:
                self.fail("offsets / mask {} do not match the batch {} and output size {}", ps,
                          batch, spatial)
            batch, spatial = merged[0], list(merged)[1:]
        self.set_output_type(0, et, PartialShape([batch, out_c, *spatial]))

    def evaluate(self, inputs):
        x, off, w = (np.asarray(a) for a in inputs[:3])
        mask = inputs[3] if len(inputs) > 3 else None
        n, c, h, wd = x.shape
        o, _, kh, kw = w.shape
        gd, g = self.deformable_group, self.group
        pb, _ = resolve_pads(self.auto_pad, [h, wd], [(kh - 1) * self.dilations[0] + 1,
                                                      (kw - 1) * self.dilations[1] + 1],
                             self.strides, self.pads_begin, self.pads_end)
        oh, ow = off.shape[2], off.shape[3]
        taps = kh * kw
        self.check(off.shape == (n, gd * taps * 2, oh, ow), "offsets have shape {}, expected "
                   "[{}, {}, oH, oW]", off.shape, n, gd * taps * 2)
        off = off.astype(np.float64).reshape(n, gd, taps, 2, oh, ow)
        ty, tx = np.divmod(np.arange(taps), kw)
        ys = (np.arange(oh) * self.strides[0] - pb[0])[None, :, None] + \
            (ty * self.dilations[0])[:, None, None] + off[:, :, :, 0]  # [n, gd, taps, oh, ow]
        xs = (np.arange(ow) * self.strides[1] - pb[1])[None, None, :] + \
            (tx * self.dilations[1])[:, None, None] + off[:, :, :, 1]
        cols = _bilinear(x.astype(np.float64).reshape(n, gd, c // gd, h, wd), ys, xs,
                         self.bilinear_interpolation_pad)  # [n, gd, c / gd, taps, oh, ow]
        if mask is not None:
            cols = cols * mask.astype(np.float64).reshape(n, gd, 1, taps, oh, ow)
        cols = cols.reshape(n, g, (c // g) * taps, oh * ow)
        wg = w.astype(np.float64).reshape(g, o // g, (c // g) * taps)
        y = np.einsum("gok,ngkp->ngop", wg, cols).reshape(n, o, oh, ow)
        return [y.astype(self._outs[0].et.dtype or x.dtype)]


def _bilinear(x: np.ndarray, ys: np.ndarray, xs: np.ndarray, pad: bool) -> np.ndarray:
    """``x [n, gd, cg, h, w]`` sampled at ``(ys, xs) [n, gd, taps, oh, ow]``: ``[n, gd, cg,
    taps, oh, ow]``. ``pad``: corners outside read zero; else points outside ``[0, h) x
    [0, w)`` read zero and the corners of the others are clamped."""
    n, gd, cg, h, w = x.shape
    y0, x0 = np.floor(ys), np.floor(xs)
    fy, fx = ys - y0, xs - x0
    inside = np.ones(ys.shape, bool) if pad else (ys >= 0) & (ys < h) & (xs >= 0) & (xs < w)
    bi = np.arange(n)[:, None, None, None, None]
    gi = np.arange(gd)[None, :, None, None, None]
    out = np.zeros((n, gd, cg) + ys.shape[2:])
    for dy, wy in ((0, 1 - fy), (1, fy)):
        for dx, wx in ((0, 1 - fx), (1, fx)):
            yy, xx = (y0 + dy).astype(np.int64), (x0 + dx).astype(np.int64)
            ok = inside & (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w) if pad else inside
            v = x[bi, gi, :, np.clip(yy, 0, h - 1), np.clip(xx, 0, w - 1)]  # [..., cg]
            weight = np.where(ok, wy * wx, 0.0)
            out += np.moveaxis(v * weight[..., None], -1, 2)
    return out


def deformable_convolution(data: Any, offsets: Any, filters: Any, strides: Any, pads_begin: Any,
                           pads_end: Any, dilations: Any, mask: Any = None,
                           auto_pad: str = "explicit", group: int = 1, deformable_group: int = 1,
                           bilinear_interpolation_pad: bool = False,
                           name: str | None = None) -> Node:
    """DeformableConvolution-8: ``data [N, C, H, W]`` convolved with ``filters [O, C / group,
    kH, kW]`` at the taps moved by ``offsets`` (and scaled by ``mask``, optional)."""
    inputs = [to_output(data), to_output(offsets), to_output(filters)]
    if mask is not None:
        inputs.append(to_output(mask))
    return set_name(DeformableConvolution(
        inputs, **_conv_attrs(strides, pads_begin, pads_end, dilations, auto_pad),
        group=int(group), deformable_group=int(deformable_group),
        bilinear_interpolation_pad=bool(bilinear_interpolation_pad)), name)


@onnx_rule("DeformConv", since=19)
def _import_deform_conv(ctx):
    x, w, offset = ctx.inputs[:3]
    bias, mask = ctx.input(3), ctx.input(4)
    ks = ctx.attr("kernel_shape", [])
    for ps in (x.partial_shape, w.partial_shape):
        if (ps.rank_is_static and len(ps) != 4) or (ks and len(ks) != 2):
            ctx.error(f"only 2-D DeformConv is supported (data {x.partial_shape}, weights "
                      f"{w.partial_shape}, kernel_shape {ks})")
    if ks and w.partial_shape.rank_is_static and \
            not PartialShape(list(w.partial_shape)[2:]).compatible(ks):
        ctx.error(f"kernel_shape {ks} does not match the weights {w.partial_shape}")
    attrs = onnx_window_attrs(ctx, 2)
    inputs = [x, offset, w] + ([mask] if mask is not None else [])
    y = DeformableConvolution(inputs, **attrs, group=ctx.attr("group", 1),
                              deformable_group=ctx.attr("offset_group", 1),
                              bilinear_interpolation_pad=True).output(0)
    return add_channel_bias(ctx, y, bias, 2) if bias is not None else y


@onnx_export(DeformableConvolution, opset=19)
def _export_deform_conv(node, ectx):
    if not node.bilinear_interpolation_pad:
        export_error(node, "ONNX DeformConv interpolates as bilinear_interpolation_pad=True")
    names = ectx.inputs(node)
    filt = node.get_input_partial_shape(2)
    extents = [(k - 1) * d + 1 for k, d in zip(filt.to_shape()[2:], node.dilations)] \
        if filt.is_static else None
    attrs = onnx_window_export_attrs(node, extents)
    if "auto_pad" in attrs:  # (DeformConv has no auto_pad)
        export_error(node, f"auto_pad {node.auto_pad} needs static data and filters")
    attrs.update(dilations=list(node.dilations), group=node.group,
                 offset_group=node.deformable_group)
    inputs = [names[0], names[2], names[1]] + (["", names[3]] if len(names) > 3 else [])
    ectx.add_node("DeformConv", inputs, ectx.outputs(node), **attrs)
