"""replace_node_update_name's refusal (OpenVINO's rule) and the helpers that always succeed."""
from __future__ import annotations

import numpy as np

from netpass import (
    Model,
    ops,
    opset,
    replace_node_keep_names,
    replace_node_update_name,
    replace_output_keep_names,
    replace_output_update_name,
)
from netpass.passes import Manager, MatcherPass
from netpass.pattern import Matcher, any_input, wrap_type
from netpass.testing import check_accuracy


def three_transposes():
    """x[2,3,4] -> T(1,0,2) -> T(0,2,1) -> T(2,1,0) 'last' -> Result 'out'."""
    x = opset.parameter([2, 3, 4], np.float32, name="x")
    y = x
    for i, order in enumerate(([1, 0, 2], [0, 2, 1], [2, 1, 0])):
        y = opset.transpose(y, np.array(order))
        y.friendly_name = f"t{i}"
    r = opset.result(y)
    r.friendly_name = "out"
    return Model([r], [x], "three")


class FoldTransposes(MatcherPass):
    """Transpose(Transpose(x, a), b) -> Transpose(x, a[b]) with the given replace helper;
    returns what the helper says (True for the helper that always succeeds)."""

    def __init__(self, replace):
        super().__init__()
        first = wrap_type(ops.Transpose, [any_input(), wrap_type(ops.Constant)])
        second = wrap_type(ops.Transpose, [first, wrap_type(ops.Constant)])

        def callback(m):
            root, inner = m.match_root, m.pattern_value_map[first].node
            a, b = inner.input_value(1).node.value, root.input_value(1).node.value
            folded = self.register_new_node(opset.transpose(inner.input_value(0), a[b]))
            result = replace(root, folded)
            return result is not False
        self.register_matcher(Matcher(second, "FoldTransposes"), callback)


def transposes(model):
    return [n for n in model.get_ordered_ops() if n.type_name == "Transpose"]


def run(model, pass_):
    manager = Manager()
    manager.register_pass(pass_)
    manager.run_passes(model)


def test_update_name_refuses_when_the_fold_reads_the_parameter_and_feeds_the_result():
    model = three_transposes()
    original = model.clone()
    run(model, FoldTransposes(replace_node_update_name))
    # t0 and t1 fold into one Transpose; folding that with t2 would read x and feed the
    # Result, which OpenVINO's rule refuses: two Transposes stay.
    assert len(transposes(model)) == 2
    assert check_accuracy(model, original, rtol=0, atol=0)


def test_keep_names_folds_all_and_keeps_the_output_name():
    model = three_transposes()
    original = model.clone()
    run(model, FoldTransposes(replace_node_keep_names))
    (t,) = transposes(model)
    assert t.friendly_name == "t2"  # the model output's producer keeps its name
    assert model.output_names == ["out"]
    assert check_accuracy(model, original, rtol=0, atol=0)


def test_output_keep_names_inserts_a_convert_when_the_value_is_a_parameter():
    x = opset.parameter([2, 3], np.float32, name="x")
    t1 = opset.transpose(x, np.array([1, 0]))
    t2 = opset.transpose(t1, np.array([1, 0]))
    t2.friendly_name = "back"
    t2.output(0).names.add("y")
    t2.rt_info["mark"] = "kept"
    model = Model([t2], [x])
    assert not replace_output_update_name(t2.output(0), x.output(0))  # refused: a Parameter
    now = replace_output_keep_names(t2.output(0), x.output(0))
    keeper = now.node
    assert keeper.type_name == "Convert" and keeper.friendly_name == "back"
    assert keeper.destination_type.name == "f32" and keeper.input_value(0) == x.output(0)
    assert keeper.rt_info["mark"] == "kept" and "y" in now.names
    assert model.output(0) == now and model.output_names == ["y"]
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    from netpass.reference import infer
    assert np.array_equal(infer(model, {"x": data})["y"], data)


def test_output_keep_names_renames_the_replacement_when_it_can():
    x = opset.parameter([2, 3], np.float32, name="x")
    old = opset.relu(x)
    old.friendly_name = "act"
    model = Model([old], [x])
    new = opset.tanh(x)
    assert replace_output_keep_names(old.output(0), new.output(0)) == new.output(0)
    assert new.friendly_name == "act" and model.output(0) == new.output(0)
