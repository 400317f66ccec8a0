"""ReplaceGnaNHWCLayers: Convolution / MaxPool (NCHW) -> Transpose -> GNAConvolution /
GNAMaxPool (NHWC) -> Transpose, for 3-D and 4-D data. The order constants are i32, one shared
by the data and the filters (OIHW -> OHWI) as in OpenVINO; the Transpose after the op takes its
friendly name when it feeds a Result.

An AvgPool becomes a GNAConvolution that sums each channel's window (block-diagonal ones),
times a constant map of each output position's divisor (``SubstituteGNAAvgPool``): GNA has no
average pooling layer, and a sum plus a scale computes it for any padding, ``exclude-pad`` and
rounding.

A GroupConvolution with constant filters becomes a GNAConvolution too, with dense
block-diagonal filters (zeros outside each group): GNA has no grouped convolution, and a dense
one keeps the whole layer in one channels-last op that transpose sinking can cross. Filters
whose dense form would exceed ``MAX_DENSE_FILTER_ELEMENTS`` stay grouped."""
from __future__ import annotations

import numpy as np

from ...core.graph_util import copy_runtime_info, replace_output_update_name
from ...core.node import Node, Output
from ...ops.convolution import Convolution, GroupConvolution
from ...ops.elementwise import Multiply
from ...ops.gna import GNAConvolution, GNAMaxPool
from ...ops.movement import Transpose
from ...ops.pooling import AvgPool, MaxPool
from ...passes import MatcherPass
from ...passes.base import ModelPass
from ...pattern import Matcher, wrap_type
from ..utils import const, const_value, make, nested_manager, static_rank, static_shape


def _orders(rank: int) -> tuple[list[int], list[int]]:
    """(NCHW -> NHWC, NHWC -> NCHW): channels moved last and back."""
    to_last = [0, *range(2, rank), 1]
    return to_last, [0, rank - 1, *range(1, rank - 1)]


# Largest dense filter built from grouped ones (elements); 16M f32 = 64 MiB, G times the
# grouped size (a 1024-channel 3x3 depthwise layer needs 9.4M).
MAX_DENSE_FILTER_ELEMENTS = 1 << 24


def dense_group_filters(filters: np.ndarray) -> np.ndarray:
    """Grouped filters ``[G, O/G, I/G, *k]`` as one dense ``[O, I, *k]`` block-diagonal array:
    output channel ``g*O/G + o`` reads input channels ``g*I/G ...`` only, with zeros elsewhere."""
    groups, og, ig = filters.shape[:3]
    dense = np.zeros((groups * og, groups * ig) + filters.shape[3:], filters.dtype)
    for g in range(groups):
        dense[g * og:(g + 1) * og, g * ig:(g + 1) * ig] = filters[g]
    return dense


def _in_nhwc(node: Node, rank: int, gna_type: type[Node], attrs: dict,
             filters: Output | None) -> tuple[list[Node], Node]:
    """A ``gna_type`` op of ``node``'s data (of ``rank`` 3 or 4) between Transposes to and from
    channels last: (the nodes made, the last Transpose). ``filters``: OIHW, transposed to
    OHWI too (None for pooling)."""
    to_last, to_first = _orders(rank)
    order = const(np.array(to_last, np.int32))
    ins = [make(Transpose, [node.input_value(0), order])]
    if filters is not None:
        ins.append(make(Transpose, [filters, order]))
    gna = make(gna_type, ins, **attrs)
    after = make(Transpose, [gna, const(np.array(to_first, np.int32))])
    return [*ins, gna, after], after


def _substitute(node: Node, gna_type: type[Node], attrs: dict, filters: Output | None) -> bool:
    """``filters``: the OIHW filters of a convolution (None for pooling)."""
    rank = static_rank(node.input_value(0))
    if rank not in (3, 4):
        return False
    made, after = _in_nhwc(node, rank, gna_type, attrs, filters)
    copy_runtime_info(node, made)
    if not replace_output_update_name(node.output(0), after.output(0)):
        # MaxPool-8 has a second (unused) output, which the helper refuses to rename for.
        after.friendly_name = node.friendly_name
        node.output(0).replace(after.output(0))
    return True


def _conv_attrs(conv: Node) -> dict:
    return {k: getattr(conv, k)
            for k in ("strides", "dilations", "pads_begin", "pads_end", "auto_pad")}


class SubstituteGNAConvolution(MatcherPass):
    """Convolution -> GNAConvolution (NHWC) between Transposes."""

    def __init__(self) -> None:
        super().__init__()
        pattern = wrap_type(Convolution)

        def callback(m: Matcher) -> bool:
            conv = m.match_root
            if self.transformation_callback(conv):
                return False
            return _substitute(conv, GNAConvolution, _conv_attrs(conv), conv.input_value(1))

        self.register_matcher(Matcher(pattern, "SubstituteGNAConvolution"), callback)


class SubstituteGNAGroupConvolution(MatcherPass):
    """Constant-filter GroupConvolution -> dense GNAConvolution.

    GroupConvolution with Constant filters -> GNAConvolution with the dense block-diagonal
    filters (``dense_group_filters``); filters computed at run time stay grouped."""

    def __init__(self) -> None:
        super().__init__()
        pattern = wrap_type(GroupConvolution)

        def callback(m: Matcher) -> bool:
            conv = m.match_root
            if self.transformation_callback(conv):
                return False
            filters = const_value(conv.input_value(1))
            if filters is None or filters.ndim not in (4, 5) or \
                    filters.size * filters.shape[0] > MAX_DENSE_FILTER_ELEMENTS:
                return False
            dense = const(dense_group_filters(np.asarray(filters)))
            copy_runtime_info(conv, [dense.node])
            return _substitute(conv, GNAConvolution, _conv_attrs(conv), dense)

        self.register_matcher(Matcher(pattern, "SubstituteGNAGroupConvolution"), callback)


class SubstituteGNAMaxPool(MatcherPass):
    """MaxPool -> GNAMaxPool (NHWC) between Transposes.

    MaxPool whose indices output is unused (GNAMaxPool returns values only).
    """

    def __init__(self) -> None:
        super().__init__()
        pattern = wrap_type(MaxPool, predicate=lambda o: o.node.get_output_size() == 1
                            or not o.node.output(1).consumers())

        def callback(m: Matcher) -> bool:
            pool = m.match_root
            if self.transformation_callback(pool):
                return False
            attrs = {k: getattr(pool, k) for k in ("strides", "pads_begin", "pads_end", "kernel",
                                                   "rounding_type", "auto_pad")}
            if any(d != 1 for d in getattr(pool, "dilations", []) or []):
                return False
            return _substitute(pool, GNAMaxPool, attrs, None)

        self.register_matcher(Matcher(pattern, "SubstituteGNAMaxPool"), callback)


def _window_counts(size: int, out: int, k: int, s: int, pb: int) -> np.ndarray:
    """Per output position along one axis: how many input elements its window covers."""
    start = np.arange(out) * s - pb
    return np.clip(start + k, 0, size) - np.clip(start, 0, size)


def avg_pool_as_sum(pool: Node) -> tuple[dict, np.ndarray] | None:
    """(GNAConvolution attributes, divisor-reciprocal map ``[1, 1, *out]``) that compute
    ``pool`` as a window sum times a constant; None when its shapes are not static, it is
    not 1-D/2-D, or a window covers no input element."""
    shape, out = static_shape(pool.input_value(0)), static_shape(pool.output(0))
    if shape is None or out is None or len(shape) not in (3, 4) or \
            str(pool.auto_pad).lower() not in ("explicit", "notset", "valid"):
        return None
    explicit = str(pool.auto_pad).lower() != "valid"
    spatial, out_sp = shape[2:], out[2:]
    pb = list(pool.pads_begin) if explicit else [0] * len(spatial)
    counts = np.ones([1, 1], np.float64)
    pads_end = []
    for size, o, k, s, b in zip(spatial, out_sp, pool.kernel, pool.strides, pb):
        # (the sum's end padding reaches the last window, ceil rounding's overhang included)
        pads_end.append(max(0, (o - 1) * s + k - size - b))
        if (size + b + pads_end[-1] - k) // s + 1 != o:
            return None
        counts = counts[..., None] * _window_counts(size, o, k, s, b)
    if (counts == 0).any():
        return None
    means = pool.evaluate([np.ones([1, 1, *spatial], np.float64)])[0]
    attrs = {"strides": list(pool.strides), "dilations": [1] * len(spatial), "pads_begin": pb,
             "pads_end": pads_end, "auto_pad": "explicit"}
    return attrs, (means / counts).astype(np.float32)


class SubstituteGNAAvgPool(MatcherPass):
    """AvgPool -> Transpose -> GNAConvolution (window sums) -> Transpose -> Multiply by the
    reciprocal divisors (one per output position; a scalar when they are all one)."""

    def __init__(self) -> None:
        super().__init__()
        pattern = wrap_type(AvgPool)

        def callback(m: Matcher) -> bool:
            pool = m.match_root
            if self.transformation_callback(pool):
                return False
            found = avg_pool_as_sum(pool)
            channels = static_shape(pool.input_value(0))
            if found is None or channels is None:
                return False
            attrs, scale = found
            c = channels[1]
            dtype = pool.get_output_element_type(0).dtype  # (the filters take the data's type)
            if c * c * int(np.prod(pool.kernel)) > MAX_DENSE_FILTER_ELEMENTS or dtype is None:
                return False
            ones = np.ones([1, 1, *pool.kernel], dtype)
            filters = const(dense_group_filters(np.broadcast_to(ones, [c, 1, 1, *pool.kernel])))
            made, back = _in_nhwc(pool, len(channels), GNAConvolution, attrs, filters)
            factor = scale.reshape(-1)[:1] if (scale == scale.flat[0]).all() else scale
            mul = make(Multiply, [back, const(factor.astype(dtype))])
            copy_runtime_info(pool, [*made, mul, filters.node])
            replace_output_update_name(pool.output(0), mul.output(0))
            return True

        self.register_matcher(Matcher(pattern, "SubstituteGNAAvgPool"), callback)


class ReplaceGnaNHWCLayers(ModelPass):
    """Convolutions and pooling -> NHWC GNA ops in Transposes."""

    def run_on_model(self, model) -> bool:
        manager = nested_manager(self.get_pass_config(), "ReplaceGnaNHWCLayers")
        manager.register_pass(SubstituteGNAConvolution())
        manager.register_pass(SubstituteGNAGroupConvolution())
        manager.register_pass(SubstituteGNAMaxPool())
        manager.register_pass(SubstituteGNAAvgPool())
        manager.run_passes(model)
        return False
