"""Image decoding: ONNX ImageDecoder (20), an encoded image (the bytes of a BMP, JPEG, JPEG 2000,
PNG, PNM, TIFF or WebP file as a 1-D uint8 tensor) to its pixels ``[height, width, channels]``.

The output's size comes from the bytes, so the op sets ``DATA_DEPENDENT_SHAPE`` and the runtime
decodes on the host. Decoding goes through Pillow, as onnx's reference does; Pillow is an
optional dependency (in the ``test`` extra), imported only when an image is decoded.
"""
from __future__ import annotations

import io
from typing import Any

import numpy as np

from ..core.dimension import Dimension
from ..core.node import Node
from ..core.shape import PartialShape
from ..core.types import u8
from ..errors import NetpassError, UnsupportedOpError, describe_node
from .base import NETPASS_OPSET, set_name, to_output
from .registry import onnx_export, onnx_rule

__all__ = ["image_decoder"]

# pixel_format -> (Pillow mode, channels)
_FORMATS = {"RGB": ("RGB", 3), "BGR": ("RGB", 3), "Grayscale": ("L", 1)}


class ImageDecoder(Node):
    """``encoded_stream`` (1-D uint8) -> uint8 ``[H, W, C]``: C is 3 for ``RGB`` and ``BGR``,
    1 for ``Grayscale``. An image stored otherwise (grayscale, palette, RGBA, CMYK) is converted
    to that format, so the channel count is always the one ``pixel_format`` names."""

    type_name = "ImageDecoder"
    version = NETPASS_OPSET
    ATTRS = {"pixel_format": "RGB"}
    DATA_DEPENDENT_SHAPE = True

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input (encoded_stream)")
        self.check(self.pixel_format in _FORMATS, "pixel_format must be one of {}, got '{}'",
                   ", ".join(_FORMATS), self.pixel_format)
        et = self.get_input_element_type(0)
        self.check(et.is_dynamic or et is u8, "encoded_stream must be u8, got {}", et)
        ps = self.get_input_partial_shape(0)
        self.check(not ps.rank_is_static or len(ps) == 1, "encoded_stream must be 1-D, got {}",
                   ps)
        channels = _FORMATS[self.pixel_format][1]
        self.set_output_type(0, u8, PartialShape([Dimension(), Dimension(), channels]))

    def evaluate(self, inputs):
        try:
            from PIL import Image
        except ImportError as e:
            raise UnsupportedOpError(self.type_name, node_name=self.friendly_name,
                                     reason="decoding images needs Pillow, which is not "
                                     "installed (pip install pillow)") from e
        mode = _FORMATS[self.pixel_format][0]
        try:
            with Image.open(io.BytesIO(np.asarray(inputs[0]).tobytes())) as img:
                pixels = np.asarray(img.convert(mode), dtype=np.uint8)
        except MemoryError:
            raise
        except Exception as e:  # Pillow's decoders fail on bad bytes with many exception kinds
            raise NetpassError(f"{describe_node(self)}: the input is not an image Pillow can "
                               f"decode ({type(e).__name__}: {e})") from e
        if self.pixel_format == "BGR":
            pixels = pixels[:, :, ::-1]
        return [np.ascontiguousarray(pixels.reshape(pixels.shape[0], pixels.shape[1], -1))]


def image_decoder(encoded_stream: Any, pixel_format: str = "RGB",
                  name: str | None = None) -> ImageDecoder:
    """ImageDecoder: the bytes of an encoded image (1-D uint8) decoded to uint8 ``[H, W, C]``
    pixels in ``pixel_format`` ("RGB", "BGR" or "Grayscale")."""
    return set_name(ImageDecoder([to_output(encoded_stream)], pixel_format=pixel_format), name)


onnx_rule("ImageDecoder", since=20)(
    lambda ctx: ImageDecoder(ctx.inputs[:1], pixel_format=ctx.attr("pixel_format", "RGB")))


@onnx_export(ImageDecoder, opset=20)
def _export_image_decoder(node, ectx):
    ectx.add_node("ImageDecoder", ectx.inputs(node), ectx.outputs(node),
                  pixel_format=node.pixel_format)
