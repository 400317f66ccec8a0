"""Signal processing with OpenVINO's ops: DFT, IDFT (opset7), RDFT, IRDFT (opset9) and STFT
(opset15), onto which ONNX DFT (17, 20) and STFT (17) map; the ONNX window generators
HannWindow, HammingWindow, BlackmanWindow and MelWeightMatrix (17) are netpass ops.

Complex tensors are real tensors with a trailing axis of 2 (real, imaginary), as in both
OpenVINO and ONNX. OpenVINO's ``axes`` count the signal axes only (``-1``: the last axis before
the complex pair); ONNX's DFT ``axis`` counts them all (``-2``: the same axis).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.dimension import Dimension
from ..core.node import Node, Output
from ..core.shape import PartialShape
from ..core.types import Type, f32
from .base import NETPASS_OPSET, set_name, to_output
from .elementwise import Add, Convert, Greater, Less, Select
from .movement import Broadcast, Concat, Reshape, Squeeze, Unsqueeze
from .onnx_types import onnx_element_type, onnx_type_code
from .registry import export_error, onnx_export, onnx_rule
from .shape_inputs import i64_operand

__all__ = ["dft", "idft", "rdft", "irdft", "stft", "hann_window", "hamming_window",
           "blackman_window", "mel_weight_matrix"]


def _ints(v: Any) -> list[int]:
    return [int(a) for a in np.asarray(v).reshape(-1)]


class _FFT(Node):
    """Inputs ``(data, axes[, signal_size])``; ``signal_size[i]`` (-1: the axis length) trims or
    zero-pads axis ``axes[i]`` before the transform."""

    version = "opset7"
    SHAPE_INFER_INPUTS = (1, 2)
    COMPLEX_IN = True   # data has the trailing (real, imaginary) axis
    COMPLEX_OUT = True

    def _signal_rank(self) -> int | None:
        ps = self.get_input_partial_shape(0)
        if not ps.rank_is_static:
            return None
        return len(ps) - (1 if self.COMPLEX_IN else 0)

    def _axes(self, rank: int) -> list[int] | None:
        axes = self.input_constant(1)
        if axes is None:
            return None
        out = []
        for a in _ints(axes):
            self.check(-rank <= a < rank, "axis {} out of range for {} signal axes", a, rank)
            out.append(a % rank)
        self.check(len(set(out)) == len(out), "axes {} repeat an axis", out)
        return out

    def _sizes(self, n: int) -> list[int] | None:
        if self.get_input_size() < 3:
            return [-1] * n
        sizes = self.input_constant(2)
        if sizes is None:
            return None
        sizes = _ints(sizes)
        self.check(len(sizes) == n, "signal_size has {} values for {} axes", len(sizes), n)
        return sizes

    def infer_types(self) -> None:
        self.check(self.get_input_size() in (2, 3), "expects inputs (data, axes[, signal_size])")
        et = self.get_input_element_type(0)
        self.check(et.is_dynamic or et.is_real, "data must be a float tensor, got {}", et)
        ps = self.get_input_partial_shape(0)
        rank = self._signal_rank()
        if rank is None:
            self.set_output_type(0, et, PartialShape(None))
            return
        if self.COMPLEX_IN:
            self.check(ps[-1].compatible(2), "complex data needs a last axis of 2, got {}", ps)
        dims = list(ps)[:rank]
        axes = self._axes(rank)
        sizes = self._sizes(len(axes)) if axes is not None else None
        if axes is None or sizes is None:
            dims = [Dimension() for _ in dims]
        else:
            for i, (a, s) in enumerate(zip(axes, sizes)):
                dims[a] = self._out_dim(dims[a], s, i == len(axes) - 1)
        self.set_output_type(0, et, PartialShape(dims + ([2] if self.COMPLEX_OUT else [])))

    def _out_dim(self, d: Dimension, size: int, last: bool) -> Dimension:
        return d if size == -1 else Dimension(size)

    def _plan(self, inputs) -> tuple[np.ndarray, list[int], list[int]]:
        """(data as complex or real numpy, axes, transform lengths)."""
        x = inputs[0]
        rank = x.ndim - (1 if self.COMPLEX_IN else 0)
        axes = [a % rank for a in _ints(inputs[1])]
        sizes = _ints(inputs[2]) if len(inputs) > 2 else [-1] * len(axes)
        # in the data's own precision (float32 data: complex64), as a float32 kernel would
        wide = np.float64 if x.dtype == np.float64 else np.float32
        data = x.astype(wide)
        if self.COMPLEX_IN:
            data = data[..., 0] + 1j * data[..., 1]
        return data, axes, sizes

    def _pack(self, y: np.ndarray, dtype: np.dtype) -> np.ndarray:
        if self.COMPLEX_OUT:
            return np.stack([y.real, y.imag], axis=-1).astype(dtype)
        return y.real.astype(dtype)


class DFT(_FFT):
    """Forward complex transform, not normalized."""

    type_name = "DFT"

    def evaluate(self, inputs):
        data, axes, sizes = self._plan(inputs)
        lengths = [data.shape[a] if s == -1 else s for a, s in zip(axes, sizes)]
        return [self._pack(np.fft.fftn(data, s=lengths, axes=axes), inputs[0].dtype)]


class IDFT(_FFT):
    """Inverse complex transform, divided by the product of the lengths."""

    type_name = "IDFT"

    def evaluate(self, inputs):
        data, axes, sizes = self._plan(inputs)
        lengths = [data.shape[a] if s == -1 else s for a, s in zip(axes, sizes)]
        return [self._pack(np.fft.ifftn(data, s=lengths, axes=axes), inputs[0].dtype)]


class RDFT(_FFT):
    """Transform of real data; the last transformed axis keeps ``n // 2 + 1`` values."""

    type_name = "RDFT"
    version = "opset9"
    COMPLEX_IN = False

    def _out_dim(self, d: Dimension, size: int, last: bool) -> Dimension:
        n = d if size == -1 else Dimension(size)
        return (n // 2) + 1 if last else n

    def evaluate(self, inputs):
        data, axes, sizes = self._plan(inputs)
        lengths = [data.shape[a] if s == -1 else s for a, s in zip(axes, sizes)]
        return [self._pack(np.fft.rfftn(data, s=lengths, axes=axes), inputs[0].dtype)]


class IRDFT(_FFT):
    """Inverse of RDFT: a one-sided spectrum to real data; the last axis becomes
    ``signal_size`` (default ``2 * (n - 1)``)."""

    type_name = "IRDFT"
    version = "opset9"
    COMPLEX_OUT = False

    def _out_dim(self, d: Dimension, size: int, last: bool) -> Dimension:
        if size != -1:
            return Dimension(size)
        return (d - 1) * 2 if last else d

    def evaluate(self, inputs):
        data, axes, sizes = self._plan(inputs)
        lengths = [data.shape[a] if s == -1 else s for a, s in zip(axes, sizes)]
        if sizes[-1] == -1:
            lengths[-1] = 2 * (data.shape[axes[-1]] - 1)
        return [self._pack(np.fft.irfftn(data, s=lengths, axes=axes), inputs[0].dtype)]


class STFT(Node):
    """Inputs ``(signal [batch,] length, window, frame_size, frame_step)``: the one-sided
    transform of each windowed frame; output ``[batch,] frames, frame_size // 2 + 1, 2``
    (``transpose_frames``: frequencies before frames). A window shorter than the frame is
    centered in it."""

    type_name = "STFT"
    version = "opset15"
    ATTRS = {"transpose_frames": False}
    SHAPE_INFER_INPUTS = (2, 3)

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 4, "expects inputs (signal, window, frame_size, "
                   "frame_step)")
        et = self.get_input_element_type(0)
        ps = self.get_input_partial_shape(0)
        if ps.rank_is_static:
            self.check(len(ps) in (1, 2), "signal must be [length] or [batch, length], got {}",
                       ps)
        size, step = self.input_constant(2), self.input_constant(3)
        if not ps.rank_is_static:
            self.set_output_type(0, et, PartialShape(None))
            return
        length = ps[-1]
        if size is not None and step is not None:
            size, step = int(np.asarray(size).reshape(())), int(np.asarray(step).reshape(()))
            self.check(size > 0 and step > 0, "frame_size and frame_step must be > 0")
            frames = Dimension() if not length.is_static else \
                Dimension(max((length.min - size) // step + 1, 0))
            bins = Dimension(size // 2 + 1)
        else:
            frames, bins = Dimension(), Dimension()
        pair = [bins, frames] if self.transpose_frames else [frames, bins]
        self.set_output_type(0, et, PartialShape(list(ps)[:-1] + pair + [2]))

    def evaluate(self, inputs):
        x, window = inputs[0], inputs[1]
        size, step = int(np.asarray(inputs[2]).reshape(())), int(np.asarray(inputs[3]).reshape(()))
        self.check(len(window) <= size, "window of {} is longer than the frame of {}",
                   len(window), size)
        w = np.zeros(size)
        start = (size - len(window)) // 2
        w[start:start + len(window)] = window
        n = (x.shape[-1] - size) // step + 1
        idx = np.arange(size)[None, :] + step * np.arange(max(n, 0))[:, None]
        frames = x[..., idx] * w  # [..., frames, size]
        spec = np.fft.rfft(frames, axis=-1)
        out = np.stack([spec.real, spec.imag], axis=-1)
        if self.transpose_frames:
            out = np.swapaxes(out, -3, -2)
        return [out.astype(x.dtype)]


class _Window(Node):
    """Input ``size`` (a scalar); ``periodic``: a window of ``size + 1`` points cut to
    ``size`` (for spectral analysis), else symmetric. Output in ``output_type``."""

    version = NETPASS_OPSET
    ATTRS = {"periodic": True, "output_type": f32}
    output_type: Any
    SHAPE_INFER_INPUTS = (0,)
    COEFFICIENTS: tuple[float, ...] = ()  # a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N)

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input (size)")
        self.output_type = Type.of(self.output_type)
        size = self.input_constant(0)
        n = Dimension(int(np.asarray(size).reshape(()))) if size is not None else Dimension()
        self.set_output_type(0, self.output_type, PartialShape([n]))

    def evaluate(self, inputs):
        size = int(np.asarray(inputs[0]).reshape(()))
        denom = size if self.periodic else size - 1
        n = np.arange(size, dtype=np.float64)
        a = self.COEFFICIENTS
        with np.errstate(all="ignore"):
            y = a[0] - a[1] * np.cos(2 * np.pi * n / denom)
            if len(a) > 2:
                y = y + a[2] * np.cos(4 * np.pi * n / denom)
        return [y.astype(self.output_type.dtype)]


class HannWindow(_Window):
    type_name = "HannWindow"
    COEFFICIENTS = (0.5, 0.5)


class HammingWindow(_Window):
    type_name = "HammingWindow"
    COEFFICIENTS = (25 / 46, 21 / 46)


class BlackmanWindow(_Window):
    type_name = "BlackmanWindow"
    COEFFICIENTS = (0.42, 0.5, 0.08)


class MelWeightMatrix(Node):
    """Inputs ``(num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz)``:
    ``[dft_length // 2 + 1, num_mel_bins]`` triangular filters of peak 1 on the mel scale
    ``2595 * log10(1 + f / 700)``, their edges at whole spectrogram bins."""

    type_name = "MelWeightMatrix"
    version = NETPASS_OPSET
    ATTRS = {"output_type": f32}
    output_type: Any
    SHAPE_INFER_INPUTS = (0, 1)

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 5, "expects inputs (num_mel_bins, dft_length, "
                   "sample_rate, lower_edge_hertz, upper_edge_hertz)")
        self.output_type = Type.of(self.output_type)
        bins, length = self.input_constant(0), self.input_constant(1)
        dims = [Dimension(int(np.asarray(length).reshape(())) // 2 + 1) if length is not None
                else Dimension(),
                Dimension(int(np.asarray(bins).reshape(()))) if bins is not None
                else Dimension()]
        self.set_output_type(0, self.output_type, PartialShape(dims))

    def evaluate(self, inputs):
        bins, length, rate = (int(np.asarray(v).reshape(())) for v in inputs[:3])
        low, high = (float(np.asarray(v).reshape(())) for v in inputs[3:])
        to_mel = lambda f: 2595 * np.log1p(f / 700) / np.log(10)  # noqa: E731
        lo, hi = to_mel(low), to_mel(high)
        step = (hi - lo) / (bins + 2)
        mels = np.arange(bins + 2) * step + lo
        hertz = 700 * np.expm1(mels / 2595 * np.log(10))
        edges = (((length + 1) * hertz) // rate).astype(int)
        out = np.zeros((length // 2 + 1, bins))
        for i in range(bins):
            left, center, right = edges[i], edges[i + 1], edges[i + 2]
            if center == left:
                out[center, i] = 1
            else:
                j = np.arange(left, center + 1)
                out[j, i] = (j - left) / (center - left)
            if right > center:
                j = np.arange(center, right)
                out[j, i] = (right - j) / (right - center)
        return [out.astype(self.output_type.dtype)]


# -- factories ---------------------------------------------------------------------------------

def _fft_factory(cls: type[Node]):
    def factory(data: Any, axes: Any, signal_size: Any = None, name: str | None = None) -> Node:
        ins = [to_output(data), i64_operand(axes)]
        if signal_size is not None:
            ins.append(i64_operand(signal_size))
        return set_name(cls(ins), name)
    factory.__name__ = cls.type_name.lower()
    factory.__doc__ = (f"{cls.type_name}(data, axes, signal_size=None): {cls.__doc__.strip()} "
                       "``axes`` count the signal axes (complex data ends in a (real, "
                       "imaginary) axis of 2); ``signal_size`` trims or zero-pads them.")
    return factory


dft, idft, rdft, irdft = (_fft_factory(c) for c in (DFT, IDFT, RDFT, IRDFT))


def stft(data: Any, window: Any, frame_size: Any, frame_step: Any, transpose_frames: bool,
         name: str | None = None) -> Node:
    """STFT: the one-sided DFT of each windowed frame of a real signal ``[batch,] length``;
    output ``[batch,] frames, frame_size // 2 + 1, 2`` (frequencies first when
    ``transpose_frames``)."""
    return set_name(STFT([to_output(data), to_output(window), i64_operand(frame_size),
                          i64_operand(frame_step)], transpose_frames=transpose_frames), name)


def _window_factory(cls: type[Node]):
    def factory(size: Any, periodic: bool = True, output_type: Any = "f32",
                name: str | None = None) -> Node:
        return set_name(cls([i64_operand(size)], periodic=periodic,
                            output_type=Type.of(output_type)), name)
    factory.__doc__ = (f"{cls.type_name}(size, periodic=True, output_type='f32'): a window of "
                       "``size`` points; periodic cuts a window of size + 1 (for spectral "
                       "analysis), else symmetric.")
    return factory


hann_window = _window_factory(HannWindow)
hamming_window = _window_factory(HammingWindow)
blackman_window = _window_factory(BlackmanWindow)


def mel_weight_matrix(num_mel_bins: Any, dft_length: Any, sample_rate: Any,
                      lower_edge_hertz: Any, upper_edge_hertz: Any, output_type: Any = "f32",
                      name: str | None = None) -> Node:
    """MelWeightMatrix: ``[dft_length // 2 + 1, num_mel_bins]`` triangular mel filters over the
    one-sided spectrum of a ``dft_length`` DFT at ``sample_rate``, from ``lower_edge_hertz`` to
    ``upper_edge_hertz``."""
    ins = [i64_operand(num_mel_bins), i64_operand(dft_length), i64_operand(sample_rate),
           to_output(np.float32(lower_edge_hertz)) if not isinstance(lower_edge_hertz,
                                                                      (Node, Output))
           else lower_edge_hertz,
           to_output(np.float32(upper_edge_hertz)) if not isinstance(upper_edge_hertz,
                                                                      (Node, Output))
           else upper_edge_hertz]
    return set_name(MelWeightMatrix(ins, output_type=Type.of(output_type)), name)


# -- ONNX import -------------------------------------------------------------------------------

def _ov_axis(ctx: Any, axis: Any) -> Output:
    """An ONNX DFT axis (over all axes, the complex pair included) as OpenVINO's ``axes``
    (over the signal axes): negative values move up by one."""
    if not isinstance(axis, Output):
        axis = int(axis)
        return i64_operand([axis + 1 if axis < 0 else axis])
    if axis.value is not None:
        return _ov_axis(ctx, int(np.asarray(axis.value).reshape(())))
    a = Convert([Reshape([axis, i64_operand([1])], special_zero=False).output(0)],
                destination_type="i64").output(0)
    return Select([Less([a, i64_operand(0)]).output(0), Add([a, i64_operand(1)]).output(0),
                   a]).output(0)


def _import_dft(ctx: Any, axis: Any) -> Output:
    x, length = ctx.inputs[0], ctx.input(1)
    inverse, onesided = bool(ctx.attr("inverse", 0)), bool(ctx.attr("onesided", 0))
    axes = _ov_axis(ctx, axis)
    extra = [Reshape([length, i64_operand([1])], special_zero=False).output(0)] \
        if length is not None else []
    ps = x.partial_shape
    if not ps.rank_is_static or not ps[-1].is_static:
        ctx.error("the last axis (1: real, 2: complex) must be known")
    real = ps[-1].get_length() == 1
    if inverse and onesided:  # a one-sided spectrum back to real samples
        y = IRDFT([x, axes, *extra]).output(0)
        return Unsqueeze([y, i64_operand([-1])]).output(0)
    if onesided:
        if not real:
            ctx.error("onesided needs real input")
        flat = Squeeze([x, i64_operand([-1])]).output(0)
        return RDFT([flat, axes, *extra]).output(0)
    if real:  # the imaginary part is zero (x > x is false everywhere, NaN included)
        zero = Convert([Greater([x, x]).output(0)], destination_type=x.element_type).output(0)
        x = Concat([x, zero], axis=-1).output(0)
    return (IDFT if inverse else DFT)([x, axes, *extra]).output(0)


onnx_rule("DFT", since=17)(lambda ctx: _import_dft(ctx, ctx.attr("axis", 1)))
onnx_rule("DFT", since=20)(lambda ctx: _import_dft(
    ctx, ctx.input(2) if ctx.input(2) is not None else -2))


@onnx_rule("STFT", since=17)
def _import_stft(ctx):
    signal, step, window, length = (ctx.input(i) for i in range(4))
    ps = signal.partial_shape
    if not (ps.rank_is_static and ps[-1].compatible(1)):
        ctx.error("complex signals are not supported (OpenVINO's STFT is real to complex)")
    if not ctx.attr("onesided", 1):
        ctx.error("onesided=0 is not supported (OpenVINO's STFT is one-sided)")
    flat = Squeeze([signal, i64_operand([-1])]).output(0)
    if length is None:
        if window is None:
            ctx.error("STFT without window and frame_length (frame = whole signal) is not "
                      "supported")
        length = Reshape([_shape_dim(window, 0), i64_operand([])], special_zero=False).output(0)
    if window is None:  # a rectangular window of frame_length ones
        one = to_output(np.ones((), signal.element_type.dtype), signal.element_type)
        shape = Convert([Reshape([length, i64_operand([1])], special_zero=False).output(0)],
                        destination_type="i64").output(0)
        window = Broadcast([one, shape]).output(0)
    size = Reshape([length, i64_operand([])], special_zero=False).output(0)
    frame_step = Reshape([step, i64_operand([])], special_zero=False).output(0)
    return STFT([flat, window, size, frame_step], transpose_frames=False)


def _shape_dim(x: Output, axis: int) -> Output:
    from .indexing import Gather
    from .shape_ops import ShapeOf
    return Gather([ShapeOf([x]).output(0), i64_operand([axis]), i64_operand(0)]).output(0)


def _import_window(cls: type[Node]):
    def rule(ctx):
        dtype = ctx.attr("output_datatype", 1)
        return cls(ctx.inputs[:1], periodic=bool(ctx.attr("periodic", 1)),
                   output_type=onnx_element_type(dtype, ctx.name))
    return rule


for _cls in (HannWindow, HammingWindow, BlackmanWindow):
    onnx_rule(_cls.type_name, since=17)(_import_window(_cls))


@onnx_rule("MelWeightMatrix", since=17)
def _import_mel(ctx):
    return MelWeightMatrix(ctx.inputs[:5], output_type=onnx_element_type(
        ctx.attr("output_datatype", 1), ctx.name))


# -- ONNX export -------------------------------------------------------------------------------

def _export_fft(inverse: bool, onesided: bool):
    def rule(node, ectx):
        axes = node.input_constant(1)
        if axes is None or len(_ints(axes)) != 1:
            export_error(node, "ONNX DFT transforms one constant axis")
        names = ectx.inputs(node)
        (axis,) = _ints(axes)
        onnx_axis = axis - 1 if axis < 0 else axis
        ins = [names[0], ""]
        if len(names) > 2:
            length = ectx.fresh("dft_length")
            ectx.add_node("Reshape", [names[2], ectx.constant(np.array([], np.int64))], [length])
            ins[1] = length
        ins.append(ectx.constant(np.array(onnx_axis, np.int64)))
        attrs = {"inverse": int(inverse), "onesided": int(onesided)}
        out = ectx.outputs(node)[0]
        if isinstance(node, RDFT):
            real = ectx.fresh("real")
            ectx.add_node("Unsqueeze", [names[0], ectx.constant(np.array([-1], np.int64))],
                          [real])
            ins[0] = real
        if isinstance(node, IRDFT):
            full = ectx.fresh("irdft")
            ectx.add_node("DFT", list(ins), [full], **attrs)
            ectx.add_node("Squeeze", [full, ectx.constant(np.array([-1], np.int64))], [out])
            return
        ectx.add_node("DFT", ins, [out], **attrs)
    return rule


onnx_export(DFT, opset=20)(_export_fft(False, False))
onnx_export(IDFT, opset=20)(_export_fft(True, False))
onnx_export(RDFT, opset=20)(_export_fft(False, True))
onnx_export(IRDFT, opset=20)(_export_fft(True, True))


@onnx_export(STFT)
def _export_stft(node, ectx):
    if node.transpose_frames:
        export_error(node, "ONNX STFT has no transposed layout")
    sig, window, size, step = ectx.inputs(node)
    ps = node.get_input_partial_shape(0)
    if not (ps.rank_is_static and len(ps) == 2):
        export_error(node, "ONNX STFT takes a batch of signals")
    window_ps = node.get_input_partial_shape(1)
    size_value = node.input_constant(2)
    if size_value is None or not window_ps.is_static or \
            window_ps.to_shape()[0] != int(np.asarray(size_value).reshape(())):
        export_error(node, "ONNX STFT needs a window as long as the frame")
    signal = ectx.fresh("signal")
    ectx.add_node("Unsqueeze", [sig, ectx.constant(np.array([-1], np.int64))], [signal])
    ectx.add_node("STFT", [signal, step, window, size], ectx.outputs(node), onesided=1)


def _export_window(node, ectx):
    ectx.add_node(node.type_name, ectx.inputs(node), ectx.outputs(node),
                  periodic=int(node.periodic),
                  output_datatype=onnx_type_code(node.output_type, node.friendly_name))


for _cls in (HannWindow, HammingWindow, BlackmanWindow):
    onnx_export(_cls)(_export_window)


@onnx_export(MelWeightMatrix)
def _export_mel(node, ectx):
    ectx.add_node("MelWeightMatrix", ectx.inputs(node), ectx.outputs(node),
                  output_datatype=onnx_type_code(node.output_type, node.friendly_name))
