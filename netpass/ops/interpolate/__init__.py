"""Interpolate (OpenVINO opset11, :mod:`.op`; versions 1 and 4 in :mod:`.versions`) with the
ONNX Resize (10, 11, 13, 18, 19) and Upsample (7, 9) import rules and a Resize (opset 17)
export rule.

Resampling is separable: every interpolated axis becomes a set of taps (source indices and
weights per output position, :func:`.resampling.axis_taps`), applied with one ``take`` per
tap; nothing loops over pixels. Source coordinates are computed in float32 with onnxruntime's
(and OpenVINO's CPU plugin's) formulas so that nearest rounding ties fall the same way.

ONNX variants Interpolate-11 cannot state (cubic ``exclude_outside``, ``antialias`` when
downsampling, ``half_pixel_symmetric``, ``tf_crop_and_resize``, ``keep_aspect_ratio_policy``
whose rounded sizes differ from Interpolate's) are imported, for static spatial sizes and
constant scales/sizes, as one MatMul per axis with the taps laid out as a constant matrix;
otherwise as a ``Resize`` op kept whole (:mod:`.onnx_resize`) that computes the same taps from
the values each inference brings.
"""
from __future__ import annotations

# Classes and factories; ``__all__`` lists the factories (``netpass.opset`` takes them).
from .onnx_resize import Resize  # noqa: F401
from .op import Interpolate, interpolate  # noqa: F401
from .versions import Interpolate1, Interpolate4  # noqa: F401

__all__ = ["interpolate"]
