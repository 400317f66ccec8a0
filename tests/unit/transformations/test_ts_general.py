"""TSGeneralForward / TSGeneralBackward / TSGeneral."""
from __future__ import annotations

import numpy as np
from tr_helpers import count, model_of, param, rand, run_checked

from netpass import opset
from netpass.ngraph_passes.transpose_sinking import NO_SINKING, TSGeneral


def test_transposes_cancel_through_a_chain():
    x = param([1, 3, 4, 5])
    t = opset.transpose(x, [0, 2, 3, 1])
    y = opset.reduce_sum(opset.add(opset.relu(t), opset.constant(rand(5, 3))), [1], True)
    m = model_of(opset.transpose(y, [0, 3, 1, 2]), x)
    run_checked(m, TSGeneral())
    assert count(m, "Transpose") == 0


def test_transpose_moves_to_the_input_backward():
    x = param([1, 3, 4, 5])
    a = opset.multiply(opset.relu(x), opset.constant(rand(1, 3, 1, 1)))
    m = model_of(opset.transpose(a, [0, 2, 3, 1]), x)
    run_checked(m, TSGeneral())
    assert [c.node.type_name for c in m.parameters[0].output(0).consumers()] == ["Transpose"]


def test_concat_and_split_round_trip_3d():
    x = param([2, 4, 6])
    t = opset.transpose(x, [0, 2, 1])
    s = opset.split(t, 1, 2)
    c = opset.concat([opset.sigmoid(s.output(1)), opset.tanh(s.output(0))], 1)
    m = model_of(opset.transpose(c, [0, 2, 1]), x)
    run_checked(m, TSGeneral())
    assert count(m, "Transpose") == 0


def test_marks_are_reset():
    x = param([1, 3, 4, 5])
    m = model_of(opset.relu(opset.transpose(x, [0, 2, 3, 1])), x)
    run_checked(m, TSGeneral())
    assert all(NO_SINKING not in n.rt_info for n in m.get_ordered_ops())


def test_dynamic_shapes_keep_values():
    x = opset.parameter([-1, 3, 4], np.float32, "x")
    m = model_of(opset.transpose(opset.relu(opset.transpose(x, [0, 2, 1])), [0, 2, 1]), x)
    run_checked(m, TSGeneral())
    assert count(m, "Transpose") == 0
