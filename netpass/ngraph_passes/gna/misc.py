"""Small GNA clean-ups: RemoveInputConvert / RemoveOutputConvert (a float Convert right after a
Parameter or right before a Result is dropped; the model input or output then has the
Convert's far-side element type, as in the GNA plugin), ReorderActivationAndPooling and
RemoveSingleInputConcat, and MergeSharedLayoutOps (equal Transposes or Gathers of one value
become one)."""
from __future__ import annotations

import numpy as np

from ...core.boundary import Parameter, Result
from ...core.graph_util import replace_output_update_name
from ...ops.convolution import Convolution
from ...ops.convolution.window import resolve_pads
from ...ops.elementwise import MONOTONIC_ACTIVATIONS, Add, Convert
from ...ops.indexing import Gather
from ...ops.movement import Concat, Transpose
from ...ops.pooling import MaxPool
from ...passes import MatcherPass
from ...pattern import Matcher, any_input, wrap_type
from ..utils import const_value, graph_consumers


def _plain_float(et) -> bool:
    return et.is_real and not et.is_quantized  # f16, f32, f64 (not bf16, float8, float4)


_FLOAT_CONVERT = lambda o: _plain_float(o.element_type) and \
    _plain_float(o.node.get_input_element_type(0))  # noqa: E731


class RemoveInputConvert(MatcherPass):
    """Drops a float Convert right after a Parameter."""

    changes_model_io = True  # the model input takes the Convert's element type

    def __init__(self) -> None:
        super().__init__()
        param = wrap_type(Parameter)
        convert = wrap_type(Convert, [param], _FLOAT_CONVERT)

        def callback(m: Matcher) -> bool:
            conv, p = m.match_root, m.pattern_value_map[param].node
            if self.transformation_callback(conv) or len(p.output(0).consumers()) != 1:
                return False
            p.element_type = conv.output(0).element_type
            p.validate_and_infer_types()
            conv.output(0).replace(p.output(0))
            return True

        self.register_matcher(Matcher(convert, "RemoveInputConvert"), callback)


class RemoveOutputConvert(MatcherPass):
    """Drops a float Convert right before a Result."""

    changes_model_io = True  # the model output takes the Convert's element type

    def __init__(self) -> None:
        super().__init__()
        convert = wrap_type(Convert, [any_input()], _FLOAT_CONVERT)
        result = wrap_type(Result, [convert])

        def callback(m: Matcher) -> bool:
            conv = m.pattern_value_map[convert].node
            if self.transformation_callback(conv) or len(conv.output(0).consumers()) != 1:
                return False
            # The Convert's producer takes its friendly and tensor names, so the model output
            # keeps its name (OpenVINO's replace_output_update_name; False when the producer
            # cannot: a Parameter, or one with several outputs).
            if not replace_output_update_name(conv.output(0), conv.input_value(0)):
                return False
            m.match_root.validate_and_infer_types()
            return True

        self.register_matcher(Matcher(result, "RemoveOutputConvert"), callback)


def pool_windows_see_data(kernel, strides, dilations, pads_begin, pads_end, auto_pad: str,
                          sizes, counts) -> bool:
    """Whether every window of a max pooling covers at least one input element (``sizes``: the
    input's spatial dims, ``counts``: the output's). A window of padding only gives -inf, which
    an activation moved after the pooling would turn into ``act(-inf)`` (a Relu: 0): such a
    pool keeps its order. Each window's taps are looked at (a dilated window can span the data
    and step over all of it), under the pads ``auto_pad`` resolves to (same_upper/same_lower
    pads can exceed a dilated window's taps too). This pass's rule and the legacy stage's
    ReorderActivationAndPoolingPass's."""
    if _no_padding(auto_pad, pads_begin, pads_end):
        return True
    dilations = list(dilations or [1] * len(kernel))
    extents = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    begins, _ = resolve_pads(auto_pad, sizes, extents, strides, pads_begin, pads_end)
    for k, s, d, pb, size, count in zip(kernel, strides, dilations, begins, sizes, counts):
        taps = np.arange(count)[:, None] * s - pb + np.arange(k)[None, :] * d
        if not ((taps >= 0) & (taps < size)).any(axis=1).all():
            return False
    return True


def _no_padding(auto_pad: str, pads_begin, pads_end) -> bool:
    """No pads at all: every window starts inside the input (ceil rounding included, which
    drops a last window starting past it), so it sees data whatever its shapes."""
    return auto_pad == "valid" or (auto_pad == "explicit" and not any(pads_begin)
                                   and not any(pads_end))


def _windows_see_data(out) -> bool:
    """:func:`pool_windows_see_data` of the MaxPool of ``out`` (static spatial dims only)."""
    pool = out.node
    if _no_padding(pool.auto_pad, pool.pads_begin, pool.pads_end):
        return True
    ins, outs = pool.get_input_partial_shape(0), pool.get_output_partial_shape(0)
    if not (ins.is_static and outs.is_static):
        return False
    rank = len(pool.kernel)
    return pool_windows_see_data(pool.kernel, pool.strides, pool.dilations, pool.pads_begin,
                                 pool.pads_end, pool.auto_pad, ins.to_shape()[-rank:],
                                 outs.to_shape()[-rank:])


class ReorderActivationAndPooling(MatcherPass):
    """Conv -> activation -> MaxPool => MaxPool -> activation.

    ``Convolution [-> Add] -> activation -> MaxPool`` => ``... -> MaxPool -> activation``, so
    the activation runs on the smaller pooled tensor (GNA fuses it after pooling); not when a
    pool window covers only padding (see ``_windows_see_data``)."""

    def __init__(self) -> None:
        super().__init__()
        act = wrap_type(MONOTONIC_ACTIVATIONS, [wrap_type((Convolution, Add))],
                        lambda o: len(o.consumers()) == 1)
        pool = wrap_type(MaxPool, [act], lambda o: (o.node.get_output_size() == 1
                                                    or not o.node.output(1).consumers())
                         and _windows_see_data(o))

        def callback(m: Matcher) -> bool:
            p, a = m.match_root, m.pattern_value_map[act].node
            if self.transformation_callback(p):
                return False
            p.input(0).replace_source_output(a.input_value(0))
            p.validate_and_infer_types()
            out = p.output(0)
            consumers = out.consumers()
            a.input(0).replace_source_output(out)
            a.validate_and_infer_types()
            for c in consumers:
                c.replace_source_output(a.output(0))
            a.output(0).names.update(out.names)
            out.names.clear()
            a.friendly_name, p.friendly_name = p.friendly_name, a.friendly_name
            return True

        self.register_matcher(Matcher(pool, "ReorderActivationAndPooling"), callback)


class RemoveSingleInputConcat(MatcherPass):
    """Replaces a Concat of one input by that input."""

    def __init__(self) -> None:
        super().__init__()
        concat = wrap_type(Concat, predicate=lambda o: o.node.get_input_size() == 1)

        def callback(m: Matcher) -> bool:
            c = m.match_root
            return not self.transformation_callback(c) and \
                replace_output_update_name(c.output(0), c.input_value(0))

        self.register_matcher(Matcher(concat, "RemoveSingleInputConcat"), callback)


def _same_layout_op(a, b) -> bool:
    """Both are Transposes (Gathers) of one value with equal Constant orders (indices and axis)."""
    if type(a) is not type(b) or a.input_value(0) != b.input_value(0):
        return False
    for i in range(1, a.get_input_size()):
        va, vb = const_value(a.input_value(i)), const_value(b.input_value(i))
        if va is None or vb is None or va.shape != vb.shape or not np.array_equal(va, vb):
            return False
    return getattr(a, "batch_dims", 0) == getattr(b, "batch_dims", 0)


def has_twin(node) -> bool:
    """Another op reads ``node``'s input as ``node`` does (``_same_layout_op``)."""
    return any(c.node is not node and c.index == 0 and _same_layout_op(node, c.node)
               for c in graph_consumers(node.input_value(0)))


class MergeSharedLayoutOps(MatcherPass):
    """Equal Transposes or Gathers of one value become one.

    Same order (indices), same input: a model input read by two equal Transposes is one input
    pre-processing model, not two consumers that pre/post-processing cannot cut out."""

    def __init__(self) -> None:
        super().__init__()
        pattern = wrap_type((Transpose, Gather))

        def callback(m: Matcher) -> bool:
            node = m.match_root
            if self.transformation_callback(node):
                return False
            twins = [c.node for c in graph_consumers(node.input_value(0))
                     if c.node is not node and c.index == 0 and _same_layout_op(node, c.node)]
            return any(replace_output_update_name(t.output(0), node.output(0)) for t in twins)

        self.register_matcher(Matcher(pattern, "MergeSharedLayoutOps"), callback)
