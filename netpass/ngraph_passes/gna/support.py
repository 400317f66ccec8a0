"""GNA support check: for every op of a model (after the GNA pipeline), whether GNA could run it
and, if not, the rule it breaks (OpenVINO's GNA ``Limitations::is_op_supported`` /
``check_all_ops_supported`` with its CNN2D validators, ``gna_limitations.cpp``, and the two
rules its graph compiler adds: transposes and slices).

The GNA plugin ran that check on the model its ngraph pipeline produced, whose ops the legacy
conversion then lowered (Add/Multiply/Subtract to eltwise layers, MatMul to FullyConnected,
Sqrt/Power to PowerIE, Negative and Divide to multiplications, i64 constants to i32, f16 to f32);
netpass checks its own ops with the same rules:

- Parameters: u8, i16 or f32 (f16 is converted); Constants: i8, u8, i16, u16, i32, f32, f64
  (i64/u64/u32 are converted to i32, f16 to f32).
- Elementwise Add, Subtract, Multiply and Divide (eltwise layers, a division as a product with
  a reciprocal), and the activations GNA's piece-wise linear unit approximates (Clamp,
  Sigmoid, Relu, Tanh, PRelu, Exp, Log, Sign, Abs, SoftSign, Sqrt, Negative, a Power with a
  constant exponent); any other activation is not supported.
- MatMul: an affine layer multiplies at most 8 input vectors at once (``kAffineMaxBatchSize``;
  the vectors are the output's elements divided by the weights' output size).
- GNAConvolution: batch 1, dilation 1; a 2-D convolution that cannot be mapped to 1-D must fit
  the target's CNN2D limits (GNA 3.0: input 16..384 x 16..240, 8..384 input channels in
  multiples of 8, 8..1024 kernels in multiples of 8, kernel and stride sizes by channel count,
  stride <= kernel, no input padding (the graph compiler's ValidateInputPadding); GNA 3.5:
  1..65535 inputs, up to 1024 input channels, 8192 kernels, 255x256 kernels, symmetric padding
  below the kernel size). A plain Convolution or MaxPool (NCHW) is not run: the pipeline makes
  them GNAConvolution/GNAMaxPool (NHWC).
- GNAMaxPool: a 2-D window must fit the pooling limits (GNA 3.0: square up to 3x3; stride <=
  window).
- Transpose: is_op_supported lets it through, the graph compiler runs only a 2-D transpose
  (1s dropped) with one side <= 8 and the other a multiple of 8 up to 65528, or one that moves
  at most one dimension larger than 1 (``Limitations::is_transpose_supported``).
- Concat: along the first dimension that is not 1 (GNA concatenates flat memory); rotated by
  one when an input comes from an affine layer (interleaved output); always when every input is
  a Parameter or Constant (through reshapes, splits and activations).
- Split/VariadicSplit: GNA cuts flat memory into consecutive pieces (the plugin computes each
  piece's offset as the sizes of the pieces before it), so only along the first dimension that
  is not 1; is_op_supported does not look, the GNA transpose-sinking callbacks
  (``is_*_transposed_split_supported``) do. A piece or a crop at an offset that is not 64-byte
  aligned (2 bytes an element) becomes an affine layer (said in the note). Reshape/Squeeze/
  Unsqueeze and CropIE are memory views or copies.
- Slice/StridedSlice: is_op_supported lets a Slice through, but GNA copies one contiguous
  window (a crop: ``ConvertStridedSliceToCrop``); a slice with steps or reversed is not one.
- Gather, Pad, reductions, Convert, Softmax and every other op: GNA has no such layer.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ...core.boundary import Constant, Parameter, Result
from ...core.node import Node
from ...ops.convolution import Convolution, GroupConvolution
from ...ops.elementwise import (
    Abs,
    Add,
    Clamp,
    Divide,
    Exp,
    Log,
    Multiply,
    Negative,
    Power,
    PRelu,
    Relu,
    Sigmoid,
    Sign,
    SoftSign,
    Sqrt,
    Subtract,
    Tanh,
)
from ...ops.gna import GNAConvolution, GNAMaxPool
from ...ops.legacy import CropIE, FullyConnected, PowerIE, ReLUIE, ScaleShiftIE
from ...ops.matmul import MatMul
from ...ops.movement import (
    Concat,
    Reshape,
    Slice,
    Split,
    Squeeze,
    StridedSlice,
    Transpose,
    Unsqueeze,
    VariadicSplit,
)
from ...ops.pooling import MaxPool
from ...ops.state import Assign, ReadValue
from ..utils import const_value, first_valuable, static_shape
from .limitations import is_transpose_supported
from .strided_slice_to_crop import crop_window

GNA_TARGETS = ("3.0", "3.5")
AFFINE_MAX_BATCH = 8
BYTES_PER_ELEMENT = 2          # split, crop and concat elements (int16)
MEMORY_ALIGNMENT = 64          # bytes, GNA 3.0 to 3.5

PARAMETER_TYPES = {"u8", "i16", "f32"}
CONSTANT_TYPES = {"i8", "u8", "i16", "u16", "i32", "f32", "f64"}
CONVERTED_TYPES = {"i64": "i32", "u64": "i32", "u32": "i32", "f16": "f32"}
ELTWISE: frozenset[type[Node]] = frozenset({Add, Subtract, Multiply, Divide})
ACTIVATIONS: frozenset[type[Node]] = frozenset({
    Clamp, Sigmoid, Relu, Tanh, PRelu, Exp, Log, Sign, Abs, SoftSign, Negative, Sqrt, ReLUIE,
    PowerIE, ScaleShiftIE})
# Op classes GNA runs as they are (looked up by exact class, as OpenVINO compares type infos).
PLAIN = ELTWISE | ACTIVATIONS | {Reshape, Squeeze, Unsqueeze, Result, ReadValue, Assign}
# Ops Concat's Parameter/Constant rule looks through (is_non_functional, is_split, is_activation).
PASS_THROUGH = frozenset({Reshape, Squeeze, Unsqueeze, Split, VariadicSplit}) | ACTIVATIONS


@dataclass(frozen=True)
class OpSupport:
    """One op: whether GNA could run it (``supported``), the rule it breaks when not
    (``rule``), and how GNA would run it when that is worth saying (``note``)."""

    name: str
    type_name: str
    supported: bool
    rule: str = ""
    note: str = ""


def check_support(model, target: str = "3.0") -> list[OpSupport]:
    """For every op of ``model`` (topological order): can GNA ``target`` ("3.0" or "3.5") run
    it, and if not, which rule of the GNA plugin's Limitations it breaks."""
    if target not in GNA_TARGETS:
        raise ValueError(f"unknown GNA target '{target}' (known: {', '.join(GNA_TARGETS)})")
    return [_check(n, target) for n in model.get_ordered_ops()]


def unsupported(report: Sequence[OpSupport]) -> list[OpSupport]:
    return [r for r in report if not r.supported]


def _ok(node: Node, note: str = "") -> OpSupport:
    return OpSupport(node.friendly_name, node.type_name, True, "", note)


def _no(node: Node, rule: str) -> OpSupport:
    return OpSupport(node.friendly_name, node.type_name, False, rule)


def _check(node: Node, target: str) -> OpSupport:
    t = type(node)
    if t is Parameter:
        et = node.output(0).element_type.name
        et = "f32" if et == "f16" else et
        return _ok(node) if et in PARAMETER_TYPES else \
            _no(node, f"input element type {et} (GNA inputs are u8, i16 or f32)")
    if t is Constant:
        et = node.output(0).element_type.name
        return _ok(node) if CONVERTED_TYPES.get(et, et) in CONSTANT_TYPES else \
            _no(node,
                f"constant element type {et} (GNA constants are i8, u8, i16, u16, i32, f32, f64)")
    if t in PLAIN:
        return _ok(node)
    rule = RULES.get(t)
    if rule is not None:
        return rule(node, target)
    return _no(node, f"GNA has no {node.type_name} layer")


# -- per-op rules ------------------------------------------------------------------------------
def _matmul(node: Node, target: str) -> OpSupport:
    shape = static_shape(node.output(0))
    if shape is None:
        return _no(node, "affine layer with a dynamic shape (GNA needs static shapes)")
    if len(shape) < 2:
        return _ok(node, "affine layer")
    # The constant side holds the weights; the other side's vectors are the batch.
    weights_first = isinstance(node.input_value(0).node, Constant) and \
        not isinstance(node.input_value(1).node, Constant)
    outputs = shape[-2] if weights_first else shape[-1]
    batch = int(np.prod(shape)) // max(outputs, 1)
    if batch > AFFINE_MAX_BATCH:
        return _no(node,
                   f"affine layer over {batch} vectors > {AFFINE_MAX_BATCH} (kAffineMaxBatchSize)")
    return _ok(node, "affine layer")


def _transpose(node: Node, target: str) -> OpSupport:
    shape = static_shape(node.input_value(0))
    if shape is None:
        return _no(node, "transpose of a dynamic shape")
    if is_transpose_supported(shape):
        return _ok(node)
    squeezed = [d for d in shape if d != 1]
    return _no(node, f"transpose of {list(shape)}: GNA transposes 2-D data with one side <= 8 "
                     f"and the other a multiple of 8 up to 65528 (here {squeezed} once 1s are "
                     "dropped)")


def _source(value):
    """The op feeding ``value`` once reshapes, splits and activations are skipped."""
    node = value.node
    while type(node) in PASS_THROUGH and node.get_input_size():
        node = node.input_value(0).node
    return node


def _concat(node: Node, target: str) -> OpSupport:
    shape = static_shape(node.output(0))
    if shape is None:
        return _no(node, "concat of a dynamic shape")
    axis = node.axis % len(shape)
    sources = [_source(v) for v in node.input_values()]
    if all(isinstance(s, (Parameter, Constant)) for s in sources):
        return _ok(node)
    interleaved = any(isinstance(s, (MatMul, FullyConnected)) and
                      len([d for d in (static_shape(s.output(0)) or ()) if d != 1]) >= 2
                      for s in sources)
    # An affine layer's output is interleaved: the graph compiler rotates the shape by one.
    layout = tuple(shape[1:]) + (shape[0],) if interleaved else tuple(shape)
    order = list(range(1, len(shape))) + [0] if interleaved else list(range(len(shape)))
    first = first_valuable(layout)
    if order.index(axis) != first:
        where = " (interleaved: an input comes from an affine layer)" if interleaved else ""
        return _no(node, f"concat along axis {axis} of {list(shape)}: GNA concatenates along the "
                         f"first dimension that is not 1{where}")
    return _ok(node)


def _power(node: Node, target: str) -> OpSupport:
    if const_value(node.input_value(1)) is None:
        return _no(node, "power with an exponent that is not a constant (GNA's PWL needs a fixed "
                         "exponent)")
    return _ok(node)


def _aligned(elements: int) -> bool:
    return (elements * BYTES_PER_ELEMENT) % MEMORY_ALIGNMENT == 0


def _split(node: Node, target: str) -> OpSupport:
    shape, axis_value = static_shape(node.input_value(0)), const_value(node.input_value(1))
    if shape is None or axis_value is None:
        return _no(node, "split of a dynamic shape or along an axis that is not a constant")
    axis = int(axis_value) % len(shape)
    first = first_valuable(shape)
    if axis != first and any(d != 1 for d in shape[:axis]):
        return _no(node, f"split along axis {axis} of {list(shape)}: GNA splits flat memory into "
                         "consecutive pieces, along the first dimension that is not 1 "
                         f"(axis {first})")
    offset, unaligned = 0, False
    for out in node.outputs():
        shape = static_shape(out)
        if shape is None:
            return _no(node, "split of a dynamic shape")
        unaligned |= not _aligned(offset)
        offset += int(np.prod(shape))
    return _ok(node,
               "an output at an unaligned offset gets an aligning affine filter" if unaligned
               else "")


def _crop(node: Node, target: str) -> OpSupport:
    offsets = list(getattr(node, "offset", []) or [])
    return _ok(node,
               "affine layer (offset not 64-byte aligned)" if offsets and not _aligned(offsets[-1])
               else "")


def _slice(node: Node, target: str) -> OpSupport:
    if static_shape(node.input_value(0)) is None:
        return _no(node, "slice of a dynamic shape")
    if any(const_value(node.input_value(i)) is None for i in range(1, node.get_input_size())):
        return _no(node, "slice bounds that are not constants")
    if crop_window(node) is None:
        return _no(node, "slice that is not one contiguous window (a step other than 1 or "
                         "reversed): GNA copies contiguous windows only")
    return _ok(node, "crop")


def _conv_limits_30(h, w, c, kh, kw, kn, sh, sw, pads) -> list[str]:
    problems = []
    if not (16 <= h <= 384) or not (16 <= w <= 240):
        problems.append(f"input {h}x{w} outside 16..384 x 16..240")
    if not (8 <= c <= 384) or c % 8:
        problems.append(f"{c} input channels (8..384, a multiple of 8)")
    if not (8 <= kn <= 1024) or kn % 8:
        problems.append(f"{kn} kernels (8..1024, a multiple of 8)")
    limits = ((48, (7, 7)), (64, (7, 5)), (80, (7, 4)), (120, (7, 3)), (384, (7, 1)))
    limit = next((lim for top, lim in limits if top >= c), (0, 0))
    if not (1 <= kh <= limit[0] and 1 <= kw <= limit[1]):
        problems.append(f"kernel {kh}x{kw} larger than {limit[0]}x{limit[1]} for {c} channels")
    if not (1 <= sh <= limit[0] and 1 <= sw <= limit[1]):
        problems.append(f"stride {sh}x{sw} larger than {limit[0]}x{limit[1]} for {c} channels")
    if any(pads):
        problems.append(f"input padding {list(pads)} (must be 0)")
    return problems


def _conv_limits_35(h, w, c, kh, kw, kn, sh, sw, pads) -> list[str]:
    problems = []
    if not (1 <= h <= 65535 and 1 <= w <= 65535):
        problems.append(f"input {h}x{w} outside 1..65535")
    if not 1 <= c <= 1024:
        problems.append(f"{c} input channels (1..1024)")
    if not 1 <= kn <= 8192:
        problems.append(f"{kn} kernels (1..8192)")
    if not (1 <= kh <= 255 and 1 <= kw <= 256):
        problems.append(f"kernel {kh}x{kw} larger than 255x256")
    if not (1 <= sh <= 255 and 1 <= sw <= 256):
        problems.append(f"stride {sh}x{sw} larger than 255x256")
    ph0, pw0, ph1, pw1 = pads
    if ph0 != ph1 or pw0 != pw1 or ph0 >= kh or pw0 >= kw:
        problems.append(f"input padding {list(pads)} (must be symmetric and below the kernel size)")
    return problems


def _gna_convolution(node: Node, target: str) -> OpSupport:
    data, filters = static_shape(node.input_value(0)), static_shape(node.input_value(1))
    if data is None or filters is None:
        return _no(node, "convolution of a dynamic shape")
    rule, note = conv_rule(data, filters, list(node.strides), list(node.pads_begin),
                           list(node.pads_end), list(node.dilations), target)
    return _no(node, rule) if rule else _ok(node, note)


def conv_rule(data: Sequence[int], filters: Sequence[int], strides: list[int],
              pads_begin: list[int], pads_end: list[int], dilations: list[int],
              target: str) -> tuple[str, str]:
    """The rule a GNAConvolution of NHWC ``data`` and OHWI ``filters`` with these attributes
    breaks on ``target`` ("" when none) and the note of a supported one (the layout stages ask
    it of a convolution they would run on its spatial axes reordered)."""
    if data[0] != 1:
        return f"convolution batch {data[0]} (GNA convolves one sample)", ""
    dilations = dilations or [1]
    if any(d != 1 for d in dilations):
        return f"dilation {dilations} (must be 1)", ""
    two_d = (len(filters) == 4 and filters[1] > 1 and filters[2] > 1) or \
        (len(data) == 4 and data[1] > 1 and data[2] > 1)
    if not two_d:
        return "", "1-D convolution"
    h, w, c = data[1], data[2], data[3]
    kn, kh, kw = filters[0], filters[1], filters[2]
    sh, sw = strides[:2]
    if h > 1 and w > 1 and ((w == kw and sw == 1) or (h == kh and c == 1 and sh == 1)):
        return "", "2-D convolution mapped to 1-D"
    pb, pe = pads_begin + [0, 0], pads_end + [0, 0]
    limits = _conv_limits_30 if target == "3.0" else _conv_limits_35
    problems = limits(h, w, c, kh, kw, kn, sh, sw, (pb[0], pb[1], pe[0], pe[1]))
    if kh < sh or kw < sw:
        problems.append(f"stride {sh}x{sw} larger than the kernel {kh}x{kw}")
    if problems:
        return f"GNA {target} CNN2D limits: " + "; ".join(problems), ""
    return "", "2-D convolution"


def _gna_max_pool(node: Node, target: str) -> OpSupport:
    rule = pool_rule(list(node.kernel), list(node.strides), target)
    return _no(node, rule) if rule else _ok(node)


def pool_rule(kernel: list[int], strides: list[int], target: str) -> str:
    """The rule a GNAMaxPool with this window breaks on ``target`` ("" when none)."""
    if len(kernel) == 2 and kernel[0] > 1 and kernel[1] > 1:
        kh, kw = kernel
        sh, sw = strides[:2]
        problems = []
        if target == "3.0" and not (kh == kw and kh <= 3):
            problems.append(f"window {kh}x{kw} (square up to 3x3)")
        if target == "3.5" and not (kh <= 255 and kw <= 255):
            problems.append(f"window {kh}x{kw} larger than 255x255")
        if not (1 <= sh <= kh and 1 <= sw <= kw):
            problems.append(f"stride {sh}x{sw} larger than the window {kh}x{kw}")
        if problems:
            return f"GNA {target} pooling limits: " + "; ".join(problems)
    return ""


def _not_gna_layout(gna_op: type[Node]) -> Callable[[Node, str], OpSupport]:
    def rule(node: Node, target: str) -> OpSupport:
        return _no(node, f"{node.type_name} runs on GNA only as {gna_op.type_name} (NHWC): run "
                         "the GNA pipeline first")
    return rule


RULES: dict[type[Node], Callable[[Node, str], OpSupport]] = {
    MatMul: _matmul, FullyConnected: _matmul, Transpose: _transpose, Concat: _concat,
    Power: _power, Split: _split, VariadicSplit: _split, CropIE: _crop, Slice: _slice,
    StridedSlice: _slice, GNAConvolution: _gna_convolution, GNAMaxPool: _gna_max_pool,
    Convolution: _not_gna_layout(GNAConvolution),
    GroupConvolution: _not_gna_layout(GNAConvolution), MaxPool: _not_gna_layout(GNAMaxPool),
}
