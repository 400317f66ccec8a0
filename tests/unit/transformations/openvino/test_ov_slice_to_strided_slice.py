"""Ported from OpenVINO ``src/common/transformations/tests/common_optimizations/
optimize_strided_slice_test.cpp`` (the ``SliceToStridedSlice_*`` cases), checked structurally
(attributes and constant values) and by value.

OpenVINO's cases also run StridedSliceOptimization, which netpass does not have; on the ported
cases it changes nothing.
"""
from __future__ import annotations

import numpy as np
import pytest
from ov_port import model_of
from ov_values import port

from netpass import opset
from netpass.core.shape import PartialShape
from netpass.ngraph_passes.common import SliceToStridedSlice

NOT_PORTED = {
    "SliceToStridedSlice_sss_params_* / begin_param_shape_of_* / dyn_rank_axes_const_positive":
        "start, stop or step given by a Parameter: OpenVINO builds the StridedSlice's begin/end/"
        "strides with ScatterUpdate; netpass converts only Slices whose start/stop/step/axes "
        "are constants (docs/transformations.md)",
    "OptimizeSS_* / UselessSlice / NegativeUselessSliceWithNegativeStrides / "
    "OptimizeSS_Shared / Groupped / NotShared": "StridedSliceOptimization (shared-slice "
    "merging, grouping into a VariadicSplit) is not in netpass; a useless Slice/StridedSlice "
    "(whole static shape, positive steps, or 0 to the end) is NopElimination's "
    "(test_ov_nop_elimination.py), and one with a negative step stays there as here",
}


def i64(*values):
    return opset.constant(np.array(values, np.int64))


def _data():
    return opset.parameter([2, 4, 3, 5], np.float32)


def _ss(x, begin, end, stride, mask):
    return opset.strided_slice(x, i64(*begin), i64(*end), i64(*stride), mask, mask)


@pytest.mark.parametrize("axes", [None, [0, 1, 2, 3]], ids=["default_axes", "axes_const_sorted_full"])
def test_full_axes(axes):
    x = _data()
    sl = opset.slice(x, i64(0, 0, 0, 0), i64(-1, -1, -1, -1), i64(1, 1, 1, 1),
                     None if axes is None else i64(*axes))
    model = model_of([sl], [x])
    x = _data()
    ref = model_of([_ss(x, [0] * 4, [-1] * 4, [1] * 4, [0] * 4)], [x])
    port(model, ref, SliceToStridedSlice(True))


@pytest.mark.parametrize("axes, begin, end, stride, mask", [
    ([1, 2], [0, 1, 0], [0, 3, 2], [1, 1, 1], [1, 0, 0]),
    ([3, 1], [0, 2, 0, 1], [0, 4, 0, 4], [1, 1, 1, 2], [1, 0, 1, 0]),
    ([-1, -3], [0, 2, 0, 1], [0, 4, 0, 4], [1, 1, 1, 2], [1, 0, 1, 0]),
    ([0, -3, 2, -1], [1, 2, 0, 1], [2, 4, 2, 4], [1, 1, 1, 2], [0, 0, 0, 0]),
], ids=["sorted_less", "unsorted", "negative_unsorted", "negative_sorted"])
def test_const_params(axes, begin, end, stride, mask):
    """OpenVINO's ``sss_params_axes_const_*`` cases with constant start/stop/step (netpass
    converts only those): begin/end/strides over axes 0..max(axes), the others masked."""
    x = _data()
    where = [a % 4 for a in axes]
    model = model_of([opset.slice(x, i64(*[begin[a] for a in where]),
                                  i64(*[end[a] for a in where]),
                                  i64(*[stride[a] for a in where]), i64(*axes))], [x])
    x = _data()
    port(model, model_of([_ss(x, begin, end, stride, mask)], [x]), SliceToStridedSlice(True))


@pytest.mark.parametrize("fold", [False, True], ids=["all_const", "all_const_fold"])
def test_all_const(fold):
    data = opset.constant(np.array([2, 3, 4, 5], np.float32))
    model = model_of([opset.slice(data, i64(1), i64(-1), i64(1), i64(-1))], [])
    data = opset.constant(np.array([2, 3, 4, 5], np.float32))
    ref = model_of([_ss(data, [1], [-1], [1], [0])], [])
    passes = [SliceToStridedSlice(True)] if not fold else []
    port(model, ref, *passes, numeric=False)


def test_dyn_rank_axes_const_negative():
    """No conversion: negative axes over a dynamic rank (OpenVINO: the same)."""
    x = opset.parameter(PartialShape.dynamic(), np.float32)
    model = model_of([opset.slice(x, i64(0, 0, 0, 0), i64(1, 1, 1, 1), i64(1, 1, 1, 1),
                                  i64(0, -3, 2, -1))], [x])
    port(model, None, SliceToStridedSlice(True), numeric=False)


def test_negative_axes_without_shapes():
    """``use_shapes=False``: negative axes stay unresolved, so no conversion."""
    x = _data()
    model = model_of([opset.slice(x, i64(1), i64(3), i64(1), i64(-1))], [x])
    port(model, None, SliceToStridedSlice(False), numeric=False)


def test_axes_param():
    """No conversion: the axes are a Parameter (OpenVINO: the same)."""
    x = _data()
    axes = opset.parameter([4], np.int64)
    model = model_of([opset.slice(x, i64(0, 0, 0, 0), i64(-1, -1, -1, -1), i64(1, 1, 1, 1),
                                  axes)], [x, axes])
    port(model, None, SliceToStridedSlice(True), numeric=False)


@pytest.mark.parametrize("use_shapes", [True, False])
def test_const_fold_params_slice_shape_of(use_shapes):
    """``Slice(ShapeOf(x), 1, Broadcast(3), Broadcast(1), Range(0, 1, 1))``: every input folds
    (OpenVINO's ``const_fold_params_slice_shape_of_use_shapes_*``), to ``[3, 4]``."""
    x = opset.parameter([2, 3, 4, 5], np.float32)
    begin = i64(1)
    end = opset.broadcast(opset.constant(np.int64(3)), opset.shape_of(begin))
    step = opset.broadcast(opset.constant(np.int64(1)), opset.shape_of(begin))
    axes = opset.range(opset.constant(np.int64(0)), opset.constant(np.int64(1)),
                       opset.constant(np.int64(1)), np.int64)
    model = model_of([opset.slice(opset.shape_of(x), begin, end, step, axes)], [x])
    x = opset.parameter([2, 3, 4, 5], np.float32)
    ref = model_of([opset.constant(np.array([3, 4], np.int64))], [x])
    port(model, ref, SliceToStridedSlice(use_shapes), numeric=False)
