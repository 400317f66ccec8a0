"""Convolutions: Convolution, GroupConvolution (:mod:`.forward`), ConvolutionBackpropData and
GroupConvolutionBackpropData (:mod:`.backprop`) (OpenVINO opset1), with their ONNX Conv /
ConvTranspose rules; DeformableConvolution (:mod:`.deformable`, opset8; ONNX DeformConv).

Layouts are OpenVINO's: data ``[N, C, *spatial]`` (1-D, 2-D or 3-D spatial); filters
``[O, I, *k]`` (grouped: ``[G, O/G, I/G, *k]``); transposed filters ``[I, O, *k]`` (grouped:
``[G, I/G, O/G, *k]``).
The numpy references use im2col views (``sliding_window_view``) and one batched matmul, so whole
CNNs evaluate at image sizes in seconds. The spatial-geometry helpers (:mod:`.window`) are shared
with the pooling and GNA ops.
"""
from __future__ import annotations

# Classes and factories; ``__all__`` lists the factories (``netpass.opset`` takes them).
from .backprop import (  # noqa: F401
    ConvolutionBackpropData,
    GroupConvolutionBackpropData,
    convolution_backprop_data,
    group_convolution_backprop_data,
)
from .deformable import DeformableConvolution, deformable_convolution  # noqa: F401
from .forward import Convolution, GroupConvolution, convolution, group_convolution  # noqa: F401

__all__ = ["convolution", "group_convolution", "convolution_backprop_data",
           "group_convolution_backprop_data", "deformable_convolution"]
