"""ShuffleChannels (OpenVINO opset1, ShuffleNet's channel shuffle, ``nn.ChannelShuffle``):
the ``axis`` dim split into ``group`` rows and read back by column. ONNX has no such op."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...core.node import Node
from ..base import normalize_axis, set_name, to_output

__all__ = ["shuffle_channels"]


class ShuffleChannels(Node):
    """ShuffleChannels-1: ``data`` with its ``axis`` dim ``C`` viewed as ``[group, C /
    group]``, transposed to ``[C / group, group]`` and flattened back; same shape out."""

    type_name = "ShuffleChannels"
    version = "opset1"
    ATTRS = {"axis": 1, "group": 1}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        self.check(int(self.group) >= 1, "group must be >= 1, got {}", self.group)
        data = self.get_input_partial_shape(0)
        if data.rank_is_static:
            self.check(len(data) >= 1, "data must have rank 1 or more, got {}", data)
            c = data[normalize_axis(self, int(self.axis), len(data))]
            self.check(not c.is_static or c.min % int(self.group) == 0,
                       "dim {} along axis {} is not a multiple of group {}", c, self.axis,
                       self.group)
        self.set_output_type(0, self.get_input_element_type(0), data)

    def evaluate(self, inputs):
        x = inputs[0]
        axis = normalize_axis(self, int(self.axis), x.ndim)
        g = int(self.group)
        c = x.shape[axis]
        self.check(c % g == 0, "dim {} along axis {} is not a multiple of group {}", c, axis, g)
        split = x.reshape(x.shape[:axis] + (g, c // g) + x.shape[axis + 1:])
        return [np.swapaxes(split, axis, axis + 1).reshape(x.shape)]


def shuffle_channels(data: Any, axis: int, group: int, name: str | None = None) -> Node:
    """ShuffleChannels-1: the ``axis`` dim of ``data`` regrouped from ``[group, C / group]``
    to ``[C / group, group]``."""
    return set_name(ShuffleChannels([to_output(data)], axis=int(axis), group=int(group)), name)
