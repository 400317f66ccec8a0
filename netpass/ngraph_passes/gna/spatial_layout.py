"""A layout chosen across a Reshape: a conv net's 2-D map reshaped into 1-D channels.

``[1, C, H, W] -> Reshape [1, C*H, W]`` (frequency bands into channels) or the CRNN form
``Transpose [0, 3, 1, 2] -> Reshape [1, W, C*H]`` between two GNA layers: in the NHWC / NWC
layouts GNA runs, the map ``[1, H, W, C]`` must become ``[1, W, C*H]``, a real reorder. Transpose
sinking stops at the Reshape, and forward sinking leaves a flat Gather between two Reshapes
(``Reshape [1, N] -> Gather -> Reshape [1, W, C*H]``) that no rule moves.

That reorder splits into parts each of which has somewhere to go (the GNA plugin folds layout
changes into the weights of the layer after a Reshape and moves the rest to the edges):

- a Transpose of the map's spatial axes, ``[1, H, W, C] -> [1, W, H, C]``: the 2-D layers above
  can compute the map in that layout (``TSGnaSpatialBackward``: a GNAConvolution or GNAMaxPool
  on a map whose spatial axes are reordered is the same layer with its kernel, strides, pads,
  dilations and its filters' spatial axes reordered alike), so the Transpose climbs to the
  input, which pre-processing takes;
- a plain Reshape, ``[1, W, H, C] -> [1, W, H*C]``;
- a Gather of the channels, ``(h, c) -> (c, h)``, which goes into the next layer's weights (a
  GNAConvolution's input channels, a MatMul's rows);
- a Transpose of the result, where the consumer reads the channels-first form (``[1, C*H, W]``
  for an NCW op: it meets the NWC Transpose of that op, or sinks on).

``split_reshape_gather`` finds such a split of any permutation between two shapes by trying the
few candidate orders; ``GnaReshapeLayouts`` (pipeline.py) applies it and keeps the result where
fewer layout ops stay inside.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import permutations

import numpy as np

from ...core.boundary import Constant
from ...core.graph_util import copy_runtime_info, replace_output_update_name
from ...core.node import Node, Output
from ...ops.gna import GNAConvolution, GNAMaxPool
from ...ops.movement import Reshape, Transpose
from ..transpose_sinking.base import TSBackwardBase
from ..transpose_sinking.utils import sink_backward
from ..utils import (
    UNARY_TYPES,
    const,
    graph_consumers,
    make,
    static_rank,
    static_shape,
)
from .gather_utils import gather_info, gathered
from .support import conv_rule, pool_rule

# GNA generations whose support verdicts a spatial reorder must not worsen.
_TARGETS = ("3.0", "3.5")


def _spatial(order: list[int], values: list[int]) -> list[int]:
    """Per-spatial-axis attribute ``values`` of a layer whose map is transposed by ``order``
    (batch first and channels last kept): new axis ``i`` is old axis ``order[i]``."""
    return [values[o - 1] for o in order[1:-1]]


def _conv_supported(data, filters, strides, pads_begin, pads_end, dilations) -> list[bool]:
    return [not conv_rule(data, filters, strides, pads_begin, pads_end, dilations, t)[0]
            for t in _TARGETS]


class TSGnaSpatialBackward(TSBackwardBase):
    """Moves a Transpose that reorders only the spatial axes of a GNAConvolution's or
    GNAMaxPool's output above it: the layer runs on the map with the same spatial reorder, its
    per-axis attributes and its constant filters' spatial axes (OHWI) reordered alike; a bias
    with spatial extent is transposed too. Refused where the reordered layer breaks a GNA
    limit the original met (the 2-D limits differ between height and width)."""

    TYPES = (GNAConvolution, GNAMaxPool)

    def applicable(self, main, order):
        shape = static_shape(main.input_value(0))
        if shape is None or len(shape) != len(order) or len(order) < 4 or order[0] != 0 \
                or order[-1] != len(order) - 1:
            return False
        if isinstance(main, GNAMaxPool):
            kernel, strides = list(main.kernel), list(main.strides)
            return all(not pool_rule(_spatial(order, kernel), _spatial(order, strides), t)
                       for t in _TARGETS if not pool_rule(kernel, strides, t))
        if any(not isinstance(main.input_value(i).node, Constant)
               for i in range(1, main.get_input_size())):
            return False
        if main.get_input_size() == 3 and static_rank(main.input_value(2)) not in \
                (None, 1, len(order)):
            return False
        filters = static_shape(main.input_value(1))
        attrs = [list(main.strides), list(main.pads_begin), list(main.pads_end),
                 list(main.dilations)]
        before = _conv_supported(shape, filters, *attrs)
        after = _conv_supported([shape[o] for o in order], [filters[o] for o in order],
                                *(_spatial(order, a) for a in attrs))
        return all(a or not b for a, b in zip(after, before))

    def sink(self, main, order, order_type):
        if isinstance(main, GNAMaxPool):
            main.kernel = _spatial(order, list(main.kernel))
        else:
            main.dilations = _spatial(order, list(main.dilations))
            for i in range(1, main.get_input_size()):
                value = main.input_value(i)
                v = value.node.value
                if v.ndim == len(order):
                    main.input(i).replace_source_output(
                        const(np.transpose(v, order), value.element_type))
        for attr in ("strides", "pads_begin", "pads_end"):
            setattr(main, attr, _spatial(order, list(getattr(main, attr))))
        return sink_backward(main, order, order_type, [0])


@dataclass
class ReshapeSplit:
    """``y = Transpose(Gather(Reshape(Transpose(x, source), shape), indices, axis), result)``
    (identity orders and indices stand for no op)."""

    source: list[int]
    shape: tuple[int, ...]
    axis: int
    indices: np.ndarray
    result: list[int]

    def cost(self) -> tuple[bool, bool, int]:
        """A Transpose of the result first (it stays unless the consumer undoes it), then one
        of the source (it must climb to the input), then the size of the Gather."""
        return (self.result != list(range(len(self.result))),
                self.source != list(range(len(self.source))),
                self.indices.size if self.gathers() else 0)

    def gathers(self) -> bool:
        return not np.array_equal(self.indices, np.arange(self.indices.size))


def _axis_permutation(z: np.ndarray, v: np.ndarray, axis: int) -> np.ndarray | None:
    """``q`` with ``take(z, q, axis) == v``, if one exists (``z`` holds distinct values)."""
    zm = np.moveaxis(z, axis, -1).reshape(-1, z.shape[axis])
    vm = np.moveaxis(v, axis, -1).reshape(-1, z.shape[axis])
    where = np.full(z.size, -1, np.int64)
    where[zm[0]] = np.arange(zm.shape[1])
    q = where[vm[0]]
    if (q < 0).any() or not np.array_equal(zm[:, q], vm):
        return None
    return q


def split_reshape_gather(src: tuple[int, ...], index: np.ndarray,
                         channels_last: bool) -> ReshapeSplit | None:
    """The cheapest ``ReshapeSplit`` of the layout change ``y = flat(x)[index]`` from a tensor
    of shape ``src`` to one of ``index.shape``: the orders keep the batch first, at most one
    axis is gathered; ``channels_last``: the source order keeps the last axis last (what
    ``TSGnaSpatialBackward`` moves above NHWC layers). None when there is none."""
    r, q = len(src), index.ndim
    base = np.arange(index.size).reshape(src)
    best: ReshapeSplit | None = None
    for middle in permutations(range(1, r - 1 if channels_last else r)):
        source = [0, *middle, r - 1] if channels_last else [0, *middle]
        z0 = base.transpose(source)
        for rest in permutations(range(1, q)):
            result = [0, *rest]
            back = [result.index(i) for i in range(q)]
            v = index.transpose(back)
            z = z0.reshape(v.shape)
            for axis in range(q):
                perm = _axis_permutation(z, v, axis)
                if perm is None:
                    continue
                found = ReshapeSplit(source, v.shape, axis, perm, result)
                if best is None or found.cost() < best.cost():
                    best = found
    return best


def _single_input_chain(start: Output, down: bool) -> tuple[list[Node], Output]:
    """Unary elementwise ops of one data input and one graph consumer from ``start`` on (down:
    its readers; up: its producers), and the value where the chain ends."""
    chain: list[Node] = []
    value = start
    while True:
        if down:
            cons = graph_consumers(value)
            node = cons[0].node if len(cons) == 1 else None
        else:
            node = value.node
            if len(graph_consumers(value)) != 1:
                node = None
        if node is None or not isinstance(node, UNARY_TYPES) or node.get_input_size() != 1 \
                or node.get_output_size() != 1:
            return chain, value
        chain.append(node)
        value = node.output(0) if down else node.input_value(0)


def reshape_gather_split(gather: Node, channels_last: bool
                         ) -> tuple[Output, Node, Node, list[Node], Node, ReshapeSplit] | None:
    """For a permuting Gather between Reshapes (``x -> Reshape -> [unary ops] -> Gather ->
    [unary ops] -> Reshape``): ``x``, the unary ops in order, the last Reshape and a cheaper
    split of the layout change. None when the Gather is not such or no split gathers fewer."""
    info = gather_info(gather)
    if info is None or not info.is_permutation():
        return None
    ups, top = _single_input_chain(gather.input_value(0), down=False)
    downs, bottom = _single_input_chain(gather.output(0), down=True)
    cons = graph_consumers(bottom)
    if not isinstance(top.node, Reshape) or len(cons) != 1 or \
            not isinstance(cons[0].node, Reshape):
        return None
    reshape = cons[0].node
    x = top.node.input_value(0)
    src, dst, mid = static_shape(x), static_shape(reshape.output(0)), static_shape(top)
    if src is None or dst is None or mid is None or len(src) < 3 or len(dst) < 2:
        return None
    index = np.take(np.arange(int(np.prod(mid))).reshape(mid), info.indices, info.axis)
    split = split_reshape_gather(src, index.reshape(dst), channels_last)
    if split is None or split.gathers() and split.indices.size >= info.indices.size:
        return None
    return x, top.node, gather, ups[::-1] + downs, reshape, split


def apply_reshape_split(x: Output, top: Node, gather: Node, chain: list[Node], reshape: Node,
                        split: ReshapeSplit) -> list[Node]:
    """Put ``split`` in place of the chain from ``x`` to ``reshape`` (its unary ops run on
    ``x``); the last new node takes ``reshape``'s names. Returns the new layout nodes."""
    value = x
    for node in chain:
        node.input(0).replace_source_output(value)
        node.validate_and_infer_types()
        value = node.output(0)
    new: list[Node] = []
    if split.source != list(range(len(split.source))):
        new.append(make(Transpose, [value, const(np.array(split.source, np.int64))]))
        value = new[-1].output(0)
    new.append(make(Reshape, [value, const(np.array(split.shape, np.int64))],
                    special_zero=False))
    value = new[-1].output(0)
    if split.gathers():
        value = gathered(value, split.indices, split.axis)
        new.append(value.node)
    if split.result != list(range(len(split.result))):
        new.append(make(Transpose, [value, const(np.array(split.result, np.int64))]))
        value = new[-1].output(0)
    copy_runtime_info(reshape, new)
    if not replace_output_update_name(reshape.output(0), value):
        reshape.output(0).replace(value)
    value.node.friendly_name = reshape.friendly_name
    return new


def split_reshape_gathers(gathers: list[Node], channels_last: bool) -> bool:
    """Each of ``gathers`` still in the graph that ``reshape_gather_split`` finds a cheaper
    split for gets it; whether any did."""
    done = False
    for node in gathers:
        found = reshape_gather_split(node, channels_last) if node.has_consumers() else None
        if found is not None:
            apply_reshape_split(*found)
            done = True
    return done
