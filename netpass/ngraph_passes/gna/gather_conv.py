"""Gather sinking across the NHWC GNA layers: a Gather along the channel axis (last) of a
GNAConvolution with constant filters is absorbed into them, and one along the channels of a
GNAMaxPool crosses it (pooling works on each channel alone).

A conv net's channel permutation (a ``Gather`` an exporter wrote, or what is left of an NCHW
Transpose next to a Reshape) otherwise stays between two GNA layers: no other sinking rule
crosses a convolution, and GNA has no Gather layer.

- forward, ``conv(x[..., p], W) == conv(x, W[..., inverse(p)])``: each output channel sums
  over all input channels, so reordering them is reordering the filters' input axis (last in
  OHWI); zero padding pads every channel alike.
- backward, ``conv(x, W)[..., q] == conv(x, W[q])`` (and the bias ``b[..., q]``): an output
  channel is its own filter, so any selection of them (not only a permutation) is one of the
  filters (axis 0).
"""
from __future__ import annotations

from ...core.boundary import Constant
from ...core.node import Node
from ...ops.gna import GNAConvolution, GNAMaxPool
from ..utils import static_rank
from .gather_sinking import _after_forward, _Forward
from .gather_sinking_backward import _Backward, _gather_inputs
from .gather_utils import GatherInfo, aligned_axis, gathered, insert_output_gather


def _channel_axis(main: Node, info: GatherInfo) -> bool:
    rank = static_rank(main.input_value(0))
    return rank is not None and info.axis == rank - 1


def _constant_filters(conv: Node) -> bool:
    return all(isinstance(conv.input_value(i).node, Constant)
               for i in range(1, conv.get_input_size()))


class GatherSinkingConvolutionForward(_Forward):
    """A channel permutation of a GNAConvolution's data goes into its constant filters."""

    TYPES = (GNAConvolution,)

    def sink(self, main, index, info):
        if index != 0 or not _channel_axis(main, info) or not info.is_permutation() \
                or not _constant_filters(main):
            return None
        rank = static_rank(main.input_value(1))
        if rank is None:
            return None
        main.input(0).replace_source_output(info.gather.input_value(0))
        main.input(1).replace_source_output(
            gathered(main.input_value(1), info.inverse(), rank - 1, main))
        main.validate_and_infer_types()
        return []


class GatherSinkingConvolutionBackward(_Backward):
    """A Gather of a GNAConvolution's output channels selects its constant filters (and bias)."""

    TYPES = (GNAConvolution,)

    def sink(self, main, info):
        rank = static_rank(main.output(0))
        if rank is None or info.axis != rank - 1 or not _constant_filters(main):
            return None
        plan = {1: 0}
        if main.get_input_size() == 3:
            bias_axis = aligned_axis(main.input_value(2), rank - 1, rank)
            if bias_axis is not None:
                plan[2] = bias_axis
        return _gather_inputs(main, plan, info)


class GatherSinkingPoolForward(_Forward):
    """A Gather along a GNAMaxPool's channels moves below it."""

    TYPES = (GNAMaxPool,)

    def sink(self, main, index, info):
        if index != 0 or not _channel_axis(main, info):
            return None
        main.input(0).replace_source_output(info.gather.input_value(0))
        main.validate_and_infer_types()
        return [_after_forward(insert_output_gather(main, info.indices, info.axis))]


class GatherSinkingPoolBackward(_Backward):
    """A Gather along a GNAMaxPool's channels moves above it."""

    TYPES = (GNAMaxPool,)

    def sink(self, main, info):
        if not _channel_axis(main, info):
            return None
        return _gather_inputs(main, {0: info.axis}, info)
