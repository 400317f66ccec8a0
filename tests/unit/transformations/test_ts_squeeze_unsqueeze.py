"""TSSqueezeForward/Backward and TSUnsqueezeForward/Backward."""
from __future__ import annotations

import pytest
from tr_helpers import model_of, param, run_checked

from netpass import opset
from netpass.ngraph_passes.transpose_sinking import (
    TSSqueezeBackward,
    TSSqueezeForward,
    TSUnsqueezeBackward,
    TSUnsqueezeForward,
)


@pytest.mark.parametrize("axes", [[1], None])
def test_squeeze_forward(axes):
    x = param([2, 1, 4, 5])
    t = opset.transpose(x, [0, 2, 1, 3])  # [2, 4, 1, 5]
    m = model_of(opset.squeeze(t, [2] if axes else None), x)
    run_checked(m, TSSqueezeForward())
    assert m.results[0].input_value(0).node.type_name == "Transpose"


def test_squeeze_backward():
    x = param([2, 1, 4, 5])
    m = model_of(opset.transpose(opset.squeeze(x, [1]), [2, 0, 1]), x)
    run_checked(m, TSSqueezeBackward())
    assert m.results[0].input_value(0).node.type_name == "Squeeze"


@pytest.mark.parametrize("axes", [[0], [1, 4], [-1]])
def test_unsqueeze_forward(axes):
    x = param([2, 3, 4])
    m = model_of(opset.unsqueeze(opset.transpose(x, [2, 0, 1]), axes), x)
    run_checked(m, TSUnsqueezeForward())
    assert m.results[0].input_value(0).node.type_name == "Transpose"


@pytest.mark.parametrize("axes,order", [([1], [0, 2, 3, 1]), ([0, 3], [3, 1, 0, 4, 2])])
def test_unsqueeze_backward(axes, order):
    x = param([2, 3, 4][: len(order) - len(axes)])
    m = model_of(opset.transpose(opset.unsqueeze(x, axes), order), x)
    run_checked(m, TSUnsqueezeBackward())
    assert m.results[0].input_value(0).node.type_name == "Unsqueeze"
