"""Ported from OpenVINO ``src/common/transformations/tests/common_optimizations/
reshape_sequence_fusion.cpp`` (ReshapeSequenceFusion), checked structurally and by value.

Found and fixed: netpass fused only Reshapes with a static result; OpenVINO also fuses a pair
whose last Reshape has a dynamic result (its pattern a ``ShapeOf`` of a dynamic input) by
reconnecting that Reshape to the first one's input (cases ``4_*`` and ``5_*``).

Marked (netpass fuses more, deliberately, see docs/transformations.md): OpenVINO keeps a pair
whose first pattern holds -1 or 0 (Neg1, Neg2, Neg4) or whose first Reshape has another
consumer (Neg3), or whose last pattern is a Parameter (Neg5), since with dynamic shapes such a
pattern may depend on its input. netpass fuses any pair with a static result (the result's
shape is then known, so ``Reshape(x, that shape)`` computes the same values whatever the first
pattern was) and a dynamic pair whose last pattern has no special zeros.
"""
from __future__ import annotations

import numpy as np
import pytest
from ov_port import model_of
from ov_values import feeds, port

from netpass import opset
from netpass.ngraph_passes.common import ReshapeSequenceFusion

NETPASS_FUSES = "netpass fuses Reshape pairs with a static result (docs/transformations.md)"


def reshape(x, values, special_zero=True):
    return opset.reshape(x, opset.constant(np.array(values, np.int64)), special_zero)


def _data():
    return opset.parameter([1, 2, 3], np.float32)


def test_fusion_1():
    x = _data()
    model = model_of([reshape(reshape(reshape(x, [3, 2]), [2, 3]), [6])], [x])
    x = _data()
    port(model, model_of([reshape(x, [6], False)], [x]), ReshapeSequenceFusion())


def test_fusion_2():
    x = _data()
    model = model_of([reshape(reshape(x, [3, 2]), [6])], [x])
    x = _data()
    port(model, model_of([reshape(x, [6], False)], [x]), ReshapeSequenceFusion())


def _shape_of_case(pattern_shape, pattern_et, special_zero):
    def build(fused):
        x = _data()
        p = opset.parameter(pattern_shape, pattern_et)
        first = x if fused else reshape(x, [3, 2], special_zero)
        return model_of([opset.reshape(first, opset.shape_of(p), special_zero)], [x, p])
    return build(False), build(True)


@pytest.mark.parametrize("special_zero", [False, True])
def test_fusion_3_shape_of_static(special_zero):
    """The pattern ``ShapeOf(p[6])`` folds to [6]: netpass's fused Reshape takes that shape
    (``special_zero`` off: the shape is the result's, a 0 in it is a real 0)."""
    model, _ = _shape_of_case([6], np.int32, special_zero)
    x = _data()
    port(model, model_of([reshape(x, [6], False)], [x, opset.parameter([6], np.int32)]),
         ReshapeSequenceFusion())


@pytest.mark.parametrize("et", [np.int32, np.int64])
@pytest.mark.parametrize("pattern_shape", [[-1, -1], [-1, 3, -1]], ids=["4", "5"])
def test_fusion_4_5_shape_of_dynamic_special_zero_false(pattern_shape, et):
    model, ref = _shape_of_case(pattern_shape, et, False)
    shape = [2, 3] if len(pattern_shape) == 2 else [1, 3, 2]
    port(model, ref, ReshapeSequenceFusion(),
         inputs=feeds(model, {1: shape}))


@pytest.mark.parametrize("et", [np.int32, np.int64])
@pytest.mark.parametrize("pattern_shape", [[-1, -1], [-1, 3, -1]], ids=["4", "5"])
def test_fusion_4_5_shape_of_dynamic_special_zero_true(pattern_shape, et):
    """Kept: a pattern ``ShapeOf(p)`` with ``special_zero`` may hold a 0 (an empty ``p``),
    which would copy a dim of the first Reshape's input instead of its output; OpenVINO
    fuses anyway (its bounds check accepts the ShapeOf), netpass keeps the pair."""
    model, _ = _shape_of_case(pattern_shape, et, True)
    port(model, None, ReshapeSequenceFusion(), numeric=False)


@pytest.mark.parametrize("first, second", [([-1, 2], [6]), ([-1, 3], [6]), ([2, 3], [0, 3])],
                         ids=["Neg1", "Neg2", "Neg4"])
def test_fusion_neg_special_values(first, second):
    """OpenVINO keeps these pairs; netpass fuses them (marked: see the module doc)."""
    x = _data()
    model = model_of([reshape(reshape(x, first), second)], [x])
    out = model.results[0].input_value(0).partial_shape.to_shape()
    x = _data()
    port(model, model_of([reshape(x, list(out), False)], [x]), ReshapeSequenceFusion())


def test_fusion_neg3_first_has_two_consumers():
    """OpenVINO keeps the pair (the first Reshape has another consumer); netpass fuses the
    second into ``Reshape(x, [6])`` and keeps the first for its other consumer."""
    x = _data()
    a = reshape(x, [2, 3])
    model = model_of([a, reshape(a, [6])], [x])
    x = _data()
    port(model, model_of([reshape(x, [2, 3]), reshape(x, [6], False)], [x]),
         ReshapeSequenceFusion())


@pytest.mark.parametrize("special_zero", [True, False])
def test_fusion_neg5_parameter_pattern(special_zero):
    """OpenVINO keeps the pair (a Parameter pattern has no known bounds). netpass keeps it with
    ``special_zero`` (a 0 in ``p`` would copy a dim of the other input) and fuses it without
    (``Reshape(x, p)`` computes the same values: marked, netpass fuses more)."""
    def build(fused):
        x = _data()
        p = opset.parameter([3], np.int32)
        return model_of([opset.reshape(x if fused else reshape(x, [3, 2]), p, special_zero)],
                        [x, p])
    model = build(False)
    values = feeds(model, {})
    values[model.input_names[1]] = np.array([3, 2, 1], np.int32)
    port(model, None if special_zero else build(True), ReshapeSequenceFusion(), inputs=values)


def test_fusion_eliminate():
    x = _data()
    model = model_of([reshape(reshape(opset.relu(x), [2, 3]), [1, 2, 3])], [x])
    x = _data()
    port(model, model_of([opset.relu(x)], [x]), ReshapeSequenceFusion())
