"""ImageDecoder-20: each image format Pillow writes, decoded by netpass's reference evaluator and
by the runtime (host), equal to onnx's reference implementation (``ReferenceEvaluator``, which
decodes with Pillow too: exact equality, lossy formats included); pixel formats; the errors for
bytes that are no image and for a missing Pillow."""
from __future__ import annotations

import io
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import netpass
from netpass import Model, opset
from netpass.errors import NetpassError, ShapeInferenceError, UnsupportedOpError
from netpass.testing import RUNTIME_DEVICE

Image = pytest.importorskip("PIL.Image")

FORMATS = ["BMP", "JPEG", "JPEG2000", "PNG", "PPM", "TIFF", "WEBP"]
PIXEL_FORMATS = ["RGB", "BGR", "Grayscale"]


def _encode(pixels: np.ndarray, fmt: str) -> np.ndarray:
    with io.BytesIO() as f:
        Image.fromarray(pixels).save(f, format=fmt)
        return np.frombuffer(f.getvalue(), np.uint8)


def _noise(h: int, w: int, mode: str = "RGB", seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    shape = {"RGB": (h, w, 3), "RGBA": (h, w, 4), "L": (h, w)}[mode]
    return rng.integers(0, 256, shape, dtype=np.uint8)


def _onnx_model(pixel_format: str) -> onnx.ModelProto:
    node = helper.make_node("ImageDecoder", ["data"], ["image"], name="decoder",
                            pixel_format=pixel_format)
    graph = helper.make_graph([node], "g",
                              [helper.make_tensor_value_info("data", TensorProto.UINT8, ["n"])],
                              [helper.make_tensor_value_info("image", TensorProto.UINT8, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


@pytest.mark.parametrize("pixel_format", PIXEL_FORMATS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_matches_onnx_reference(fmt, pixel_format):
    data = _encode(_noise(13, 21, seed=len(fmt)), fmt)
    proto = _onnx_model(pixel_format)
    (expected,) = ReferenceEvaluator(proto).run(None, {"data": data})
    model = netpass.read_model(proto)
    got = netpass.reference.infer(model, {"data": data})["image"]
    req = netpass.compile_model(model, device=RUNTIME_DEVICE).create_infer_request()
    on_runtime = req.infer({"data": data})["image"]
    assert got.dtype == np.uint8 and got.shape == (13, 21, 1 if pixel_format == "Grayscale" else 3)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(on_runtime, expected)


def test_lossless_formats_give_the_pixels_back():
    pixels = _noise(9, 7, seed=3)
    for fmt in ("BMP", "PNG", "PPM", "TIFF"):
        x = opset.parameter([-1], np.uint8, "x")
        model = Model([opset.image_decoder(x, "BGR")], [x])
        out = netpass.reference.infer(model, {"x": _encode(pixels, fmt)})
        np.testing.assert_array_equal(next(iter(out.values())), pixels[:, :, ::-1])


def test_pixel_format_converts_other_image_modes():
    # The spec fixes the channel count by pixel_format; onnx's reference returns what the file
    # holds (2-D for a grayscale file, 4 channels for RGBA). netpass converts with Pillow.
    gray, rgba = _noise(5, 6, "L", seed=4), _noise(5, 6, "RGBA", seed=5)
    x = opset.parameter([-1], np.uint8, "x")
    rgb = Model([opset.image_decoder(x, "RGB")], [x])
    out = next(iter(netpass.reference.infer(rgb, {"x": _encode(gray, "PNG")}).values()))
    np.testing.assert_array_equal(out, np.repeat(gray[:, :, None], 3, axis=2))
    out = next(iter(netpass.reference.infer(rgb, {"x": _encode(rgba, "PNG")}).values()))
    np.testing.assert_array_equal(out, rgba[:, :, :3])
    g = Model([opset.image_decoder(x, "Grayscale")], [x])
    out = next(iter(netpass.reference.infer(g, {"x": _encode(gray, "PNG")}).values()))
    np.testing.assert_array_equal(out, gray[:, :, None])


def test_runtime_sizes_each_image_on_one_request():
    model = netpass.read_model(_onnx_model("RGB"))
    req = netpass.compile_model(model, device=RUNTIME_DEVICE).create_infer_request()
    for h, w in ((4, 6), (11, 3), (4, 6)):
        pixels = _noise(h, w, seed=h * w)
        np.testing.assert_array_equal(req.infer({"data": _encode(pixels, "PNG")})["image"],
                                      pixels)
    assert req.stats["host_fallbacks"] >= 3


def test_shape_inference():
    x = opset.parameter([-1], np.uint8, "x")
    assert str(opset.image_decoder(x, "Grayscale").output(0).partial_shape) == "[?,?,1]"
    with pytest.raises(ShapeInferenceError, match="pixel_format"):
        opset.image_decoder(x, "YUV")
    with pytest.raises(ShapeInferenceError, match="u8"):
        opset.image_decoder(opset.parameter([-1], np.float32, "f"))


@pytest.mark.parametrize("data", [b"", b"not an image at all", b"\x89PNG\r\n\x1a\n" + b"\0" * 40,
                                  b"BM" + b"\xff" * 60])
def test_undecodable_bytes_raise_netpass_error(data):
    model = netpass.read_model(_onnx_model("RGB"))
    feeds = {"data": np.frombuffer(data, np.uint8)}
    with pytest.raises(NetpassError, match="ImageDecoder 'decoder'.*not an image"):
        netpass.reference.infer(model, feeds)
    req = netpass.compile_model(model, device=RUNTIME_DEVICE).create_infer_request()
    with pytest.raises(NetpassError, match="ImageDecoder 'decoder'.*not an image"):
        req.infer(feeds)


def test_truncated_image_raises_netpass_error():
    data = _encode(_noise(16, 16, seed=6), "PNG")
    model = netpass.read_model(_onnx_model("RGB"))
    with pytest.raises(NetpassError, match="ImageDecoder 'decoder'.*not an image"):
        netpass.reference.infer(model, {"data": data[:len(data) // 2]})


def test_missing_pillow_raises_unsupported_op(monkeypatch):
    data = _encode(_noise(2, 2), "PNG")
    monkeypatch.setitem(sys.modules, "PIL", None)  # makes `from PIL import ...` fail
    model = netpass.read_model(_onnx_model("RGB"))  # reading needs no Pillow
    with pytest.raises(UnsupportedOpError, match="ImageDecoder.*'decoder'.*Pillow"):
        netpass.reference.infer(model, {"data": data})
    req = netpass.compile_model(model, device=RUNTIME_DEVICE).create_infer_request()
    with pytest.raises(UnsupportedOpError, match="ImageDecoder.*'decoder'.*Pillow"):
        req.infer({"data": data})


def test_export_round_trips(tmp_path):
    x = opset.parameter([-1], np.uint8, "data")
    model = Model([opset.image_decoder(x, "BGR", name="image")], [x])
    path = tmp_path / "decoder.onnx"
    netpass.save_model(model, path)
    data = _encode(_noise(6, 5, seed=7), "PNG")
    (got,) = ReferenceEvaluator(str(path)).run(None, {"data": data})
    np.testing.assert_array_equal(got, next(iter(netpass.reference.infer(model, {"data": data})
                                                 .values())))
