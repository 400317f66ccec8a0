"""Ported from OpenVINO ``src/common/transformations/tests/make_stateful_test.cpp``
(MakeStateful after InitNodeInfo), and InitNodeInfo's contract as OpenVINO's ``check_rt_info``
uses it (OpenVINO has no test file of its own for InitNodeInfo).

The model: ``x, y [32, 1, 10] -> Add -> Result res0`` and ``Add (-> Squeeze) -> Result res1``,
the pairs ``x/res0`` and ``y/res1`` named by tensor names or given as (Parameter, Result) nodes.
MakeStateful must leave no Parameter and no Result, two ReadValues (variables ``xres0`` and
``yres1``) feeding the Add, two Assigns of the values the Results returned, and every op with
``fused_names``.

Found and fixed: two Results returning one tensor (``one_out_to_several_results_by_tensor_names``:
the Add's output named both ``res0`` and ``res1``) were both found as the first Result, and
MakeStateful refused with "an output appears in two pairs"; OpenVINO takes the first Result of
that tensor not yet in a pair. And the Assign did not take the Result's rt_info (OpenVINO:
``copy_runtime_info(res, assign)``), so it had no ``fused_names`` (``check_rt_info`` failed).
"""
from __future__ import annotations

import numpy as np
import pytest

from netpass import Model, opset
from netpass.core.rt_info import FusedNames
from netpass.errors import NetpassError
from netpass.ngraph_passes.common import InitNodeInfo, MakeStateful
from netpass.passes import Manager
from netpass.testing import check_rt_info

NOT_PORTED = {
    "make_stateful_by_tensor_name / make_stateful_by_param_res (with the Squeeze)": "netpass "
    "refuses a pair whose input and output shapes differ ([32,1,10] vs the Squeeze's [32,10]) "
    "with a NetpassError (tested below): a variable read with one shape and written with "
    "another cannot run a second step. OpenVINO's old test built the variable with a dynamic "
    "shape; its current MakeStateful gives the variable the Parameter's shape",
    "make_stateful_dynamic_shapes": "the old 'doesn't support dynamic shapes' error is gone "
    "in OpenVINO's current MakeStateful, as in netpass: dynamic shapes become a variable",
}


def _model(squeeze: bool, friendly: bool) -> Model:
    x = opset.parameter([32, 1, 10], np.float32)
    y = opset.parameter([32, 1, 10], np.float32)
    if friendly:
        x.friendly_name, y.friendly_name = "x", "y"
    else:
        x.output(0).names.add("x")
        y.output(0).names.add("y")
    node = opset.add(x, y)
    res0 = opset.result(node.output(0))
    if squeeze:
        node = opset.squeeze(node)
    res1 = opset.result(node.output(0))
    if friendly:
        res0.friendly_name, res1.friendly_name = "res0", "res1"
    else:
        res0.input_value(0).names.add("res0")
        res1.input_value(0).names.add("res1")
    return Model([res0, res1], [x, y], "model")


def _pairs(model: Model, friendly: bool):
    if friendly:
        return [(model.parameters[0], model.results[0]), (model.parameters[1], model.results[1])]
    return {"x": "res0", "y": "res1"}


def _run(model: Model, pairs) -> Model:
    manager = Manager()
    manager.register_pass(InitNodeInfo())
    manager.register_pass(MakeStateful(pairs))
    manager.run_passes(model)
    return model


@pytest.mark.parametrize("friendly", [False, True], ids=["by_tensor_names", "by_param_res"])
def test_make_stateful_one_out_to_several_results(friendly):
    model = _model(squeeze=False, friendly=friendly)
    _run(model, _pairs(model, friendly))
    assert not model.parameters and not model.results
    assert not check_rt_info(model)
    assigns = sorted(model.sinks, key=lambda s: s.variable_id)
    assert [a.variable_id for a in assigns] == ["xres0", "yres1"]
    add = assigns[0].input_value(0).node
    assert add.type_name == "Add" and assigns[1].input_value(0).node is add
    reads = [add.input_value(i).node for i in range(2)]
    assert [r.type_name for r in reads] == ["ReadValue", "ReadValue"]
    assert [r.variable_id for r in reads] == ["xres0", "yres1"]
    if not friendly:  # the ReadValues carry the Parameters' tensor names
        assert [sorted(r.output(0).names) for r in reads] == [["x"], ["y"]]


@pytest.mark.parametrize("friendly", [False, True], ids=["by_tensor_names", "by_param_res"])
def test_make_stateful_shapes_differ(friendly):
    model = _model(squeeze=True, friendly=friendly)
    with pytest.raises(NetpassError, match="cannot be one variable"):
        _run(model, _pairs(model, friendly))


def test_make_stateful_several_results_all_taken():
    """A third pair on a tensor whose two Results are both taken is refused by name."""
    model = _model(squeeze=False, friendly=False)
    model.parameters[0].output(0).names.add("z_in")
    with pytest.raises(NetpassError, match="already in a pair"):
        MakeStateful({"x": "res0", "y": "res1", "z_in": "res0"}).run_on_model(model)


def test_init_node_info():
    """Every op (Parameters, Constants and Results included) records its own friendly name,
    and an op that already has fused names keeps them."""
    x = opset.parameter([2, 3], np.float32)
    relu = opset.relu(opset.add(x, opset.constant(np.ones((2, 3), np.float32))))
    relu.rt_info[FusedNames.key] = FusedNames(["a", "b"])
    model = Model([opset.result(relu.output(0))], [x], "model")
    manager = Manager()
    manager.register_pass(InitNodeInfo())
    manager.run_passes(model)
    assert not check_rt_info(model)
    for node in model.get_ordered_ops():
        names = node.rt_info[FusedNames.key].names
        assert names == ({"a", "b"} if node is relu else {node.friendly_name})
