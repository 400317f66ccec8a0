"""Operator fuzz families over spatial ops: Conv / ConvTranspose, pooling, Resize,
DepthToSpace / SpaceToDepth (strategies returning :class:`op_fuzz_harness.Case`)."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from op_fuzz_draw import Draw, per_step

AUTO_PADS = ("NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


def _spatial(d: Draw, rank: int, lo: list[int], extra: int) -> list[tuple[int, ...]]:
    return [d.size(lo[a], lo[a] + (extra if rank < 3 else min(extra, 3))) for a in range(rank)]


@st.composite
def conv(draw):
    """Conv or ConvTranspose, 1-3 spatial dims, groups (depthwise too), strides, dilations,
    explicit or automatic pads, output_padding / output_shape, weights as initializer or
    input, with or without bias."""
    d = Draw(draw)
    transpose = d.flag()
    rank = d.pick((1, 2, 2, 3))
    if d.flag():
        groups, cin_g, cout_g = d.pick((1, 2, 3)), d.draw(st.integers(1, 3)), \
            d.draw(st.integers(1, 3))
    else:  # depthwise
        groups = d.pick((2, 3, 4))
        cin_g, cout_g = 1, d.pick((1, 1, 2))
    cin, cout = groups * cin_g, groups * cout_g
    k = [d.draw(st.integers(1, 3)) for _ in range(rank)]
    strides = [d.draw(st.integers(1, 3)) for _ in range(rank)]
    dil = [d.draw(st.integers(1, 2)) for _ in range(rank)]
    eff = [(kk - 1) * dd + 1 for kk, dd in zip(k, dil)]
    attrs: dict = {}
    if groups > 1 or d.flag():
        attrs["group"] = groups
    if d.flag():
        attrs["strides"] = strides
    else:
        strides = [1] * rank
    if d.flag():
        attrs["dilations"] = dil
    else:
        dil = [1] * rank
        eff = list(k)
    if d.flag():
        attrs["kernel_shape"] = k
    auto = d.pick(AUTO_PADS)
    if auto == "NOTSET":
        if d.flag():
            attrs["pads"] = [d.draw(st.integers(0, 2)) for _ in range(2 * rank)]
    else:
        attrs["auto_pad"] = auto
    if transpose:
        if d.flag() and auto == "NOTSET":
            attrs["output_padding"] = [d.draw(st.integers(0, max(s, dd) - 1))
                                       for s, dd in zip(strides, dil)]
        spatial = _spatial(d, rank, [1] * rank, 4)
        wshape = [cin, cout_g, *k]
    else:
        spatial = _spatial(d, rank, eff, 5)
        wshape = [cout, cin_g, *k]
    n = d.size(1, 2)
    x = d.input("x", per_step(d, [n, cin, *spatial]))
    w = d.input("w", [wshape] * d.k) if d.flag() else d.const("w", d.values(wshape, np.float32))
    ins = [x, w]
    if d.flag():
        ins.append(d.const("b", d.values([cout], np.float32)))
    d.node("ConvTranspose" if transpose else "Conv", ins, ["y"], **attrs)
    return d.case(["y"])


@st.composite
def pool(draw):
    """MaxPool (with Indices sometimes) / AveragePool over 1-3 spatial dims: kernel, strides,
    pads smaller than the kernel, auto_pad, ceil_mode, count_include_pad, dilations; or a
    GlobalAveragePool / GlobalMaxPool / LpPool."""
    d = Draw(draw)
    op = d.pick(("MaxPool", "MaxPool", "AveragePool", "AveragePool", "GlobalAveragePool",
                 "GlobalMaxPool", "LpPool"))
    rank = d.pick((1, 2, 2, 3))
    c = d.draw(st.integers(1, 3))
    n = d.size(1, 2)
    if op.startswith("Global"):
        x = d.input("x", per_step(d, [n, c, *_spatial(d, rank, [1] * rank, 6)]))
        d.node(op, [x], ["y"])
        return d.case(["y"])
    k = [d.draw(st.integers(1, 3)) for _ in range(rank)]
    attrs: dict = {"kernel_shape": k}
    dil = [1] * rank
    if (op == "MaxPool" or (op == "AveragePool" and d.opset >= 19)) and d.flag():
        dil = [d.draw(st.integers(1, 2)) for _ in range(rank)]
        attrs["dilations"] = dil
    if d.flag():
        attrs["strides"] = [d.draw(st.integers(1, 3)) for _ in range(rank)]
    # onnxruntime sizes SAME pads without the dilation (the spec includes it): not drawn
    auto = d.pick(AUTO_PADS if max(dil) == 1 else ("NOTSET", "VALID"))
    if auto == "NOTSET":
        if d.flag():
            attrs["pads"] = [d.draw(st.integers(0, kk - 1)) for kk in k + k]
    else:
        attrs["auto_pad"] = auto
    if op != "LpPool" and auto in ("NOTSET", "VALID") and d.flag():
        attrs["ceil_mode"] = 1  # (onnxruntime's ceil_mode under SAME pads is its own)
    if op == "AveragePool" and d.flag():
        attrs["count_include_pad"] = 1
    if op == "LpPool":
        attrs["p"] = d.pick((1, 2, 3))
    eff = [(kk - 1) * dd + 1 for kk, dd in zip(k, dil)]
    x = d.input("x", per_step(d, [n, c, *_spatial(d, rank, eff, 5)]))
    outs = ["y"]
    if op == "MaxPool" and d.flag():
        outs.append("i")
        if d.flag():
            attrs["storage_order"] = 1
    d.node(op, [x], outs, **attrs)
    return d.case(outs)


@st.composite
def resize(draw):
    """Resize: nearest / linear / cubic, every coordinate transformation, nearest modes,
    cubic_coeff_a, exclude_outside, scales or sizes (initializer or a per-step input), axes
    and keep_aspect_ratio_policy (opset 18+)."""
    d = Draw(draw, min_opset=13)
    rank = d.pick((3, 4, 4, 5))
    mode = d.pick(("nearest", "linear", "cubic"))
    coords = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"]
    if d.opset >= 19:
        coords.append("half_pixel_symmetric")
    attrs: dict = {"mode": mode, "coordinate_transformation_mode": d.pick(coords)}
    if mode == "nearest":
        attrs["nearest_mode"] = d.pick(("round_prefer_floor", "round_prefer_ceil", "floor",
                                        "ceil"))
    if mode == "cubic":
        attrs["cubic_coeff_a"] = d.pick((-0.75, -0.5))
        if d.flag():
            attrs["exclude_outside"] = 1
    # onnxruntime sizes align_corners, linear and cubic from the integer output length where
    # the spec (and onnx.reference, netpass) take input * scale: only whole lengths are drawn
    # there, from even sizes
    whole = mode != "nearest" or attrs["coordinate_transformation_mode"] == "align_corners"
    n = d.size(1, 2)
    c = d.size(1, 3)
    spatial = [tuple(2 * v for v in d.size(1, 3)) if whole else d.size(1, 6)
               for _ in range(rank - 2)]
    shapes = per_step(d, [n, c, *spatial])
    x = d.input("x", shapes)
    axes = list(range(rank))
    use_sizes = d.flag()
    policy = use_sizes and d.opset >= 18 and d.flag()
    if d.opset >= 18 and (policy or d.flag()):
        axes = list(range(2, rank))
        # (onnxruntime ignores a keep_aspect_ratio_policy over negative axes)
        attrs["axes"] = [a - rank for a in axes] if not policy and d.flag() else axes
    if use_sizes:
        if policy:
            attrs["keep_aspect_ratio_policy"] = d.pick(("stretch", "not_larger", "not_smaller"))
        if d.flag():  # sizes change per step, as a Shape-built export feeds them
            arrays = [np.array([s[a] if a < 2 else d.draw(st.integers(1, 9)) for a in axes],
                               np.int64) for s in shapes]
            sizes = d.input("sizes", [(len(axes),)] * d.k, np.int64, arrays=arrays)
        else:
            sizes = d.const("sizes", [1 if a < 2 else d.draw(st.integers(1, 9))
                                      for a in axes], np.int64)
        ins = [x, "", "", sizes]
    else:
        choice = (0.5, 1.0, 1.5, 2.0, 2.5, 3.0) if whole else \
            (0.5, 0.6, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 1.3333)
        scales = [1.0 if a < 2 else d.pick(choice) for a in axes]
        ins = [x, "", d.const("scales", scales, np.float32)]
    d.node("Resize", ins, ["y"], **attrs)
    return d.case(["y"])


@st.composite
def depth_space(draw):
    """DepthToSpace (DCR / CRD) and SpaceToDepth over dynamic batch and spatial sizes."""
    d = Draw(draw)
    b = d.pick((1, 2, 3))
    n = d.size(1, 2)
    h, w = d.size(1, 4), d.size(1, 4)
    if d.flag():
        c = d.draw(st.integers(1, 3)) * b * b
        x = d.input("x", per_step(d, [n, c, h, w]))
        attrs = {"blocksize": b}
        if d.flag():
            attrs["mode"] = d.pick(("DCR", "CRD"))
        d.node("DepthToSpace", [x], ["y"], **attrs)
    else:
        c = d.draw(st.integers(1, 3))
        hb, wb = tuple(v * b for v in h), tuple(v * b for v in w)
        x = d.input("x", per_step(d, [n, c, hb, wb]))
        d.node("SpaceToDepth", [x], ["y"], blocksize=b)
    return d.case(["y"])
FAMILIES = ["conv", "pool", "resize", "depth_space"]
