"""InitNodeInfo and CommonOptimizations."""
from __future__ import annotations

import numpy as np
from tr_helpers import count, model_of, param, rand, run, run_checked

from netpass import opset
from netpass.core.rt_info import FusedNames
from netpass.ngraph_passes.common import CommonOptimizations, InitNodeInfo, SliceToStridedSlice
from netpass.passes import PassConfig


def test_init_node_info_on_every_op():
    x = param([2, 3])
    m = model_of(opset.relu(opset.add(x, opset.constant(rand(3)))), x)
    run(m, InitNodeInfo())
    for n in m.get_ordered_ops():
        assert n.rt_info[FusedNames.key].names == {n.friendly_name}


def test_common_optimizations_cleans_up():
    x = param([2, 3, 4])
    y = opset.divide(opset.reshape(x, [2, 3, 4], False), opset.add(opset.constant(rand(4)), opset.constant(rand(4, seed=1))))
    m = model_of(opset.slice(y, [1], [3], [1], [1]), x)
    run_checked(m, CommonOptimizations())
    assert count(m, "Divide", "Reshape", "Add", "Slice") == 0 and count(m, "StridedSlice") == 1


def test_disabling_a_member_through_the_shared_config():
    x = param([2, 3, 4])
    m = model_of(opset.slice(x, [1], [3], [1], [1]), x)
    config = PassConfig()
    config.disable(SliceToStridedSlice)
    run_checked(m, CommonOptimizations(), config=config)
    assert count(m, "Slice") == 1


def test_callback_reaches_members():
    x = param([2, 3])
    m = model_of(opset.divide(x, opset.constant(np.float32(2.0))), x)
    config = PassConfig()
    config.set_callback(lambda node: node.type_name == "Divide")
    run(m, CommonOptimizations(), config=config)
    assert count(m, "Divide") == 1
