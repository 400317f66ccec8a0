"""TSReductionForward / TSReductionBackward, keep_dims true and false; TSReductionAlign."""
from __future__ import annotations

import pytest
from tr_helpers import model_of, param, run_checked

from netpass import opset
from netpass.ngraph_passes.transpose_sinking import (
    TSReductionAlign,
    TSReductionBackward,
    TSReductionForward,
)
from netpass.passes import GraphRewrite


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


def _residual_mean(reduce_order):
    """``Transpose(x, NHWC) + Unsqueeze(ReduceMean(x', keepdims=0))``, x' = x or x through
    ``reduce_order``: the mean over the channels, laid out as the transposed branch."""
    x = param([2, 3, 4, 5])
    src = x if reduce_order is None else opset.transpose(x, reduce_order)
    axis = 1 if reduce_order is None else reduce_order.index(1)
    mean = opset.reduce_mean(src, [axis], False)
    if reduce_order == [0, 1, 3, 2]:  # ([N, W, H]: the Add's layout needs [N, H, W])
        mean = opset.transpose(mean, [0, 2, 1])
    return model_of(opset.add(opset.transpose(x, [0, 2, 3, 1]), opset.unsqueeze(mean, [3])), x)


@pytest.mark.parametrize("reduce_order", [None, [0, 2, 1, 3]])
def test_align_moves_the_reduction_onto_the_sibling_transpose(reduce_order):
    m = _residual_mean(reduce_order)
    run_checked(m, GraphRewrite(TSReductionAlign()))
    x = m.parameters[0]
    readers = [c.node for c in x.output(0).consumers()]
    assert [n.type_name for n in readers] == ["Transpose"]
    mean = next(n for n in m.get_ordered_ops() if n.type_name == "ReduceMean")
    assert mean.input_value(0).node is readers[0]
    assert list(mean.input_value(1).node.get_vector()) == [3]


def test_align_leaves_a_reduction_whose_kept_axes_differ():
    """Through [0, 1, 3, 2] the reduction keeps H and W swapped: another layout than the
    sibling's, so it stays."""
    m = _residual_mean([0, 1, 3, 2])
    run_checked(m, GraphRewrite(TSReductionAlign()))
    x = m.parameters[0]
    assert sorted(c.node.type_name for c in x.output(0).consumers()) == ["Transpose", "Transpose"]


def test_align_leaves_a_reduction_that_keeps_its_axes():
    x = param([2, 3, 4, 5])
    mean = opset.reduce_mean(x, [1], True)
    m = model_of([opset.transpose(x, [0, 2, 3, 1]), mean], x)
    run_checked(m, GraphRewrite(TSReductionAlign()))
    assert mean.input_value(0).node is m.parameters[0]
