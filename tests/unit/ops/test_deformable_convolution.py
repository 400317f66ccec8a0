"""DeformableConvolution-8 (ONNX DeformConv-19): netpass's reference against onnxruntime (or
onnx's reference evaluator where onnxruntime has no kernel) on random non-zero data and
offsets that send taps past the borders (strides, pads, dilations, groups, offset groups,
mask, bias); against OpenVINO's CPU plugin on the IR netpass writes, both
``bilinear_interpolation_pad`` modes; the ONNX export, the IR round trip, the runtime (host
fallback), partial shapes and the errors. rtol 1e-4, atol 1e-5."""
from __future__ import annotations

import numpy as np
import pytest
from opcheck import (
    check_export,
    check_import,
    check_ir_round_trip,
    check_openvino,
    check_runtime,
    one_node,
)

import netpass
from netpass import Model, opset
from netpass.core.shape import PartialShape
from netpass.errors import NetpassError

RNG = np.random.default_rng(3)


def _nz(shape, scale=1.0):
    a = RNG.uniform(0.1, 1.0, shape) * RNG.choice([-1, 1], shape) * scale
    return a.astype(np.float32)


def _out(size, k, s, p, d):
    return (size + p[0] + p[1] - (k - 1) * d - 1) // s + 1


CASES = {  # (N, C, H, W), O, (kH, kW), strides, pads, dilations, group, offset_group
    "basic": ((1, 2, 5, 6), 3, (3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1, 1),
    "padded_strided": ((2, 4, 7, 6), 2, (3, 2), (2, 1), (1, 0, 2, 1), (1, 1), 1, 2),
    "dilated": ((1, 3, 8, 8), 4, (2, 3), (1, 2), (1, 1, 1, 1), (2, 1), 1, 3),
    "grouped": ((2, 4, 6, 5), 6, (2, 2), (1, 1), (0, 1, 1, 0), (1, 1), 2, 4),
}


def _feeds(name, mask):
    (n, c, h, w), o, (kh, kw), s, p, d, g, gd = CASES[name]
    oh, ow = _out(h, kh, s[0], (p[0], p[2]), d[0]), _out(w, kw, s[1], (p[1], p[3]), d[1])
    feeds = {"x": _nz((n, c, h, w)), "w": _nz((o, c // g, kh, kw)),
             "offset": _nz((n, gd * kh * kw * 2, oh, ow), 2.5)}
    if mask:
        feeds["b"] = _nz((o,))
        feeds["mask"] = np.abs(_nz((n, gd * kh * kw, oh, ow)))
    attrs = dict(kernel_shape=[kh, kw], strides=list(s), pads=list(p), dilations=list(d),
                 group=g, offset_group=gd)
    return feeds, attrs


@pytest.mark.parametrize("mask", [False, True])
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_onnx(name, mask):
    feeds, attrs = _feeds(name, mask)
    proto = one_node("DeformConv", feeds, opset=19, **attrs)
    model = check_import(proto, feeds)
    check_export(model, feeds)


@pytest.mark.parametrize("pad", [True, False])
@pytest.mark.parametrize("name", ["padded_strided", "grouped"])
def test_matches_openvino(name, pad, tmp_path):
    feeds, attrs = _feeds(name, True)
    model = _ir_model(feeds, attrs, pad)
    check_openvino(model, {k: feeds[k] for k in ("x", "offset", "w", "mask")}, tmp_path)


def _ir_model(feeds, attrs, pad, dynamic=False):
    params = {k: opset.parameter([-1] * feeds[k].ndim if dynamic and k != "w" else
                                 list(feeds[k].shape), "f32", k)
              for k in ("x", "offset", "w", "mask")}
    p = attrs["pads"]
    y = opset.deformable_convolution(
        params["x"], params["offset"], params["w"], attrs["strides"], p[:2], p[2:],
        attrs["dilations"], mask=params["mask"], group=attrs["group"],
        deformable_group=attrs["offset_group"], bilinear_interpolation_pad=pad)
    return Model([y.output(0)], list(params.values()))


def test_ir_round_trip_and_runtime_on_dynamic_shapes(tmp_path):
    feeds, attrs = _feeds("dilated", True)
    feeds = {k: feeds[k] for k in ("x", "offset", "w", "mask")}
    check_ir_round_trip(_ir_model(feeds, attrs, True), feeds, tmp_path)
    model = _ir_model(feeds, attrs, False, dynamic=True)
    assert model.outputs[0].partial_shape.rank_is_static
    assert check_runtime(model, feeds)["host_fallbacks"] >= 1


def test_partial_shapes():
    x = opset.parameter([-1, 4, -1, 9], "f32")
    off = opset.parameter([-1, 2 * 9 * 2, 5, -1], "f32")
    w = opset.parameter([6, 2, 3, 3], "f32")
    y = opset.deformable_convolution(x, off, w, [1, 1], [0, 0], [0, 0], [1, 1], group=2,
                                     deformable_group=2)
    assert y.get_output_partial_shape(0) == PartialShape([-1, 6, 5, 7])


def test_wrong_offset_channels_name_the_node():
    feeds, attrs = _feeds("basic", False)
    feeds["offset"] = feeds["offset"][:, :-2]
    proto = one_node("DeformConv", feeds, opset=19, **attrs)
    proto.graph.node[0].name = "dc0"
    with pytest.raises(NetpassError, match="dc0.*offsets"):
        netpass.read_model(proto)


def test_three_d_is_refused_naming_the_node():
    feeds = {"x": _nz((1, 1, 3, 3, 3)), "w": _nz((1, 1, 2, 2, 2)),
             "offset": _nz((1, 24, 2, 2, 2))}
    proto = one_node("DeformConv", feeds, opset=19)
    proto.graph.node[0].name = "dc3"
    with pytest.raises(NetpassError, match="dc3.*2-D"):
        netpass.read_model(proto)
