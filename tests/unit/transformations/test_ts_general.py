"""TSGeneralForward / TSGeneralBackward / TSGeneral."""
from __future__ import annotations

import re

import numpy as np
import pytest
from tr_helpers import (
    against_inference,
    assert_same_graph,
    count,
    model_of,
    param,
    rand,
    run,
    run_checked,
)

import netpass
from netpass import opset
from netpass.core.node import _ids as node_ids
from netpass.ngraph_passes.common import InitNodeInfo
from netpass.ngraph_passes.gna import GnaTransformationsPipeline
from netpass.ngraph_passes.transpose_sinking import NO_SINKING, TSFuse, TSGeneral, TSGeneralForward
from netpass.passes import PassConfig
from netpass.synthetic import gna_blocks_onnx, random_blocks


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


def _concat_of_transposes():
    """Concat of inputs transposed the same way: a Transpose read twice by the Concat, one
    read once, one with another consumer (its pair stays), and a constant."""
    x, y, z = (param([1, 3, 4, 5], name) for name in "xyz")
    tx, ty, tz = (opset.transpose(v, [0, 2, 3, 1]) for v in (x, y, z))
    cat = opset.concat([tx, ty, tx, tz, opset.constant(rand(1, 4, 5, 2))], 3)
    m = model_of([opset.transpose(cat, [0, 3, 1, 2]), opset.relu(tz)], [x, y, z])
    run_checked(m, InitNodeInfo())
    return m


def test_forward_steps_cancel_pairs_as_tsfuse_does():
    """TSGeneralForward's steps cancel the pairs TSFuse would remove next (without building
    the Transposes): the same graph, names and rt_info as when TSFuse removes them (a
    callback on TSFuse, refusing nothing, makes the steps leave it to TSFuse)."""
    built = []
    for callback in (None, lambda node: False):
        m = _concat_of_transposes()
        config = PassConfig()
        if callback is not None:
            config.set_callback(callback, TSFuse)
        first = next(node_ids)
        run_checked(m, TSGeneralForward(), config=config)
        built.append(next(node_ids) - first)
        if callback is None:
            fast = m
    assert built[0] < built[1]  # the steps built fewer nodes
    flags = dict(tensor_names=True, consumers_count=True)
    assert_same_graph(fast, m, **flags)
    assert_same_graph(m, fast, **flags)

    def names(model):  # friendly names and rt_info (auto-generated names differ in number)
        return [re.sub(r"_\d+", "_#", f"{n.friendly_name} {sorted(map(str, n.rt_info.items()))}")
                for n in model.get_ordered_ops()]
    assert names(fast) == names(m)


@pytest.mark.parametrize("shape", [(1, 8, 8, 8), ("N", 8, 8, 8), (2, 6, 5, 7)])
def test_forward_steps_permute_shapes_as_inference_does(shape, monkeypatch):
    """Forward steps across elementwise ops, Concats, Splits and Pads permute the moved
    op's output shapes instead of inferring them: on the GNA blocks, every such shortcut
    equals the op's inference (dims with their bounds and symbols, element types)."""
    from netpass.ngraph_passes.transpose_sinking import utils

    checked: list = []
    monkeypatch.setattr(utils, "_permute_outputs", against_inference(utils._permute_outputs, checked))
    blocks = random_blocks(40, 7, channels=shape[1])
    run(netpass.read_model(gna_blocks_onnx(blocks, shape=shape)), GnaTransformationsPipeline())
    assert {"Concat", "VariadicSplit", "Add", "Sigmoid", "Pad"} <= {t for t, _ in checked}
    assert all(ok for _, ok in checked)


@pytest.mark.parametrize("shape", [(2, 6, 5, 7), ("N", 6, 5, 7)])
def test_forward_output_transposes_take_the_shapes_their_op_had(shape, monkeypatch):
    """A forward step's output Transposes restore the shapes the op had before the step
    permuted them, and take those shapes as they are: each equals what building the
    Transpose from the permuted op computes (dims with their bounds and symbols)."""
    from netpass.ops.movement import Transpose

    checked: list[bool] = []
    original = Transpose.of

    def of(value, order_value, order, shape=None):
        t = original(value, order_value, order, shape)
        if shape is not None:
            ref = original(value, order_value, order)._outs[0].ps
            checked.append(t._outs[0].ps is shape and ref == shape
                           and [d.symbol for d in ref] == [d.symbol for d in shape])
        return t
    monkeypatch.setattr(Transpose, "of", staticmethod(of))
    blocks = random_blocks(40, 7, channels=shape[1])
    run(netpass.read_model(gna_blocks_onnx(blocks, shape=shape)), GnaTransformationsPipeline())
    assert len(checked) > 100 and all(checked)
