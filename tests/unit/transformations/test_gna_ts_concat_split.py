"""GNA TSConcatForward and TSSplitBackward (flat Concat/Split + Gather)."""
from __future__ import annotations

from tr_helpers import count, model_of, param, run, run_checked

from netpass import opset
from netpass.ngraph_passes.gna import TSConcatForward, TSSplitBackward


def test_concat_of_unsupported_transposes_becomes_gather():
    x, y = param([1, 3, 5, 7], "x"), param([1, 2, 5, 7], "y")
    tx, ty = opset.transpose(x, [0, 2, 3, 1]), opset.transpose(y, [0, 2, 3, 1])
    m = model_of(opset.concat([opset.reshape(tx, [1, 105], False), opset.reshape(ty, [1, 70], False)], 1), [x, y])
    run(m, TSConcatForward())
    assert count(m, "Gather") == 0  # the Concat inputs are Reshapes, not Transposes
    x, y = param([1, 3, 5, 7], "x"), param([1, 3, 5, 7], "y")
    m = model_of(opset.concat([opset.transpose(x, [0, 2, 3, 1]), opset.transpose(y, [0, 2, 3, 1])], 1), [x, y])
    run_checked(m, TSConcatForward())
    assert count(m, "Transpose") == 0 and count(m, "Gather") == 1


def test_concat_mixed_inputs_3d_name_kept():
    x, y = param([1, 5, 3], "x"), param([1, 4, 5], "y")
    c = opset.concat([opset.transpose(x, [0, 2, 1]), y], 1, name="cat")
    m = model_of(c, [x, y])
    run_checked(m, TSConcatForward())
    assert m.results[0].input_value(0).node.friendly_name == "cat"


def test_concat_on_other_axis_stays():
    x, y = param([1, 3, 5, 7], "x"), param([1, 3, 5, 7], "y")
    m = model_of(opset.concat([opset.transpose(x, [0, 2, 3, 1]), opset.transpose(y, [0, 2, 3, 1])], 3), [x, y])
    run(m, TSConcatForward())
    assert count(m, "Gather") == 0


def test_split_with_unsupported_transposes():
    x = param([1, 2, 15, 7])
    s = opset.split(x, 1, 2)
    m = model_of([opset.transpose(s.output(0), [0, 2, 3, 1]), opset.relu(s.output(1))], x)
    run_checked(m, TSSplitBackward())
    assert count(m, "Transpose") == 0 and count(m, "Gather") == 1 and count(m, "VariadicSplit") == 1


def test_split_with_multiple_consumers_on_transposed_output_stays():
    x = param([1, 2, 15, 7])
    s = opset.split(x, 1, 2)
    m = model_of([opset.transpose(s.output(0), [0, 2, 3, 1]), opset.relu(s.output(0)), s.output(1)], x)
    run(m, TSSplitBackward())
    assert count(m, "Gather") == 0
