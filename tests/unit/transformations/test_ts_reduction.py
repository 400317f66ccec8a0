"""TSReductionForward / TSReductionBackward, keep_dims true and false."""
from __future__ import annotations

import pytest
from tr_helpers import model_of, param, run_checked

from netpass import opset
from netpass.ngraph_passes.transpose_sinking import TSReductionBackward, TSReductionForward


@pytest.mark.parametrize("keep", [True, False])
@pytest.mark.parametrize("axes", [[1], [2, 3], [-1]])
def test_forward(keep, axes):
    x = param([2, 3, 4, 5])
    m = model_of(opset.reduce_sum(opset.transpose(x, [0, 2, 3, 1]), axes, keep), x)
    run_checked(m, TSReductionForward())
    assert m.results[0].input_value(0).node.type_name == "Transpose"


@pytest.mark.parametrize("keep,axes", [(True, [0]), (True, [1, 2]), (False, [0])])
def test_backward_3d(keep, axes):
    x = param([2, 3, 4])
    red = opset.reduce_mean(x, axes, keep)
    rank = 3 if keep else 3 - len(axes)
    m = model_of(opset.transpose(red, list(reversed(range(rank)))), x)
    run_checked(m, TSReductionBackward())
    assert m.results[0].input_value(0).node.type_name == "ReduceMean"
