"""Interpolate-1 and Interpolate-4: the older versions IR still holds, read with their own
inputs and attributes and computed by Interpolate-11's resampling (:mod:`.op`).

- Interpolate-4: inputs (data, sizes, scales[, axes]); ``shape_calculation_mode`` says which
  of sizes and scales decides the output (the other is ignored); v11's attributes without the
  pillow modes.
- Interpolate-1: inputs (data, target spatial shape), attributes ``axes``, ``mode`` (nearest,
  linear, cubic, linear_onnx; area is refused, as OpenVINO's CPU plugin refuses it),
  ``align_corners``, ``antialias``, ``pads_begin``/``pads_end``. Its meaning is OpenVINO's own
  lowering to v4 (``ConvertInterpolate1ToInterpolate4``): sizes mode, ``simple`` nearest
  rounding, ``asymmetric`` coordinates, or ``align_corners`` where set, or ``half_pixel`` for a
  linear mode without pads unless it resizes axes 2 and 3 of a 4-D input; linear is
  ``linear_onnx`` below rank 5.
"""
from __future__ import annotations

from typing import Any

from ...core.node import OP_TYPES
from .op import Interpolate
from .resampling import MODES


class Interpolate4(Interpolate):
    """Interpolate-4: (data, sizes, scales[, axes]) as v11 with the input that
    ``shape_calculation_mode`` names."""

    type_name = "Interpolate"
    version = "opset4"
    INPUTS_TEXT = "(data, sizes, scales[, axes])"

    def _value_input(self) -> int:
        return 1 if self.shape_calculation_mode == "sizes" else 2

    def _axes_input(self) -> int | None:
        return 3 if self.get_input_size() > 3 else None

    def _input_count_ok(self) -> bool:
        return self.get_input_size() in (3, 4)

    def _check_attrs(self) -> None:
        super()._check_attrs()
        self.check(self.mode in MODES[:4], "mode must be one of {} in Interpolate-4, got {!r}",
                   MODES[:4], self.mode)


class Interpolate1(Interpolate):
    """Interpolate-1: (data, target spatial shape) resized along the ``axes`` attribute, with
    OpenVINO's v4 equivalent of its attributes (module docstring)."""

    type_name = "Interpolate"
    version = "opset1"
    ATTRS = {"axes": [], "mode": "nearest", "align_corners": True, "antialias": False,
             "pads_begin": [], "pads_end": []}
    INPUTS_TEXT = "(data, target_spatial_shape)"
    axes: Any
    mode: Any
    align_corners: Any

    def _axes_input(self) -> int | None:
        return None

    def _has_axes(self) -> bool:
        return True

    def _const_axes(self) -> Any:
        return list(self.axes)

    def _input_count_ok(self) -> bool:
        return self.get_input_size() == 2

    def _shape_mode(self) -> str:
        return "sizes"

    def _check_attrs(self) -> None:
        self.mode = str(self.mode).lower()
        self.check(self.mode in ("nearest", "linear", "cubic", "linear_onnx"),
                   "mode must be nearest, linear, cubic or linear_onnx, got {!r}", self.mode)
        self.antialias = bool(self.antialias)
        self.align_corners = bool(self.align_corners)

    def _resampling(self) -> tuple[str, str, str, float, bool]:
        rank = len(self.get_input_partial_shape(0))
        mode = self.mode
        if mode == "linear":
            self.check(rank <= 5, "linear mode of rank {} (OpenVINO lowers it up to rank 5)", rank)
            mode = "linear_onnx" if rank < 5 else "linear"
        transform = "asymmetric"
        if self.align_corners:
            transform = "align_corners"
        elif mode in ("linear", "linear_onnx") and not any(self.pads_begin) \
                and not any(self.pads_end) \
                and not (rank == 4 and sorted(int(a) for a in self.axes) == [2, 3]):
            transform = "half_pixel"
        return mode, transform, "simple", -0.75, self.antialias


# The newest version stays the class ``netpass.ops.Interpolate`` names; IR reading picks the
# exact version by (type, opset).
OP_TYPES["Interpolate"] = Interpolate
