"""ConstantFolding."""
from __future__ import annotations

import numpy as np
from tr_helpers import count, model_of, param, rand, run, run_checked

from netpass import opset
from netpass.ngraph_passes.common import ConstantFolding, disable_constant_folding
from netpass.testing import TransformationTest


class TestFolding(TransformationTest):
    def test_constant_subgraph_collapses(self):
        x = param([2, 3])
        a, b = rand(2, 3), rand(2, 3, seed=1)
        self.model = model_of(opset.add(x, opset.multiply(opset.constant(a), opset.exp(opset.constant(b)))), x)
        x2 = param([2, 3])
        self.model_ref = model_of(opset.add(x2, opset.constant(a * np.exp(b))), x2)
        self.manager.register_pass(ConstantFolding())
        self.enable_accuracy_check(1e-5, 1e-6)


def test_shape_of_static_shape_folds():
    x = param([2, 3, 4])
    shape = opset.shape_of(x)
    m = model_of(opset.reshape(x, opset.concat([opset.gather(shape, [0], 0), opset.constant(np.array([-1]))], 0), False), x)
    run_checked(m, ConstantFolding())
    assert count(m, "ShapeOf", "Gather", "Concat") == 0


def test_folding_picks_while_sorting_and_still_folds_what_earlier_folds_expose():
    # tanh's 10^4 values are not propagated by inference, so relu is no fold candidate when
    # the model is sorted: it becomes one only once tanh is folded, as the walk goes
    x = param([100, 100])
    relu = opset.relu(opset.tanh(opset.constant(rand(100, 100))))
    m = model_of(opset.add(x, relu), x)
    assert m._ordered is None and m.results[0].input_value(0).node.input_value(1).value is None
    run_checked(m, ConstantFolding())
    assert count(m, "Tanh", "Relu") == 0


def test_nothing_to_fold_leaves_the_model_and_its_order_for_the_next_pass():
    x = param([2, 3])
    m = model_of(opset.relu(opset.add(x, x)), x)
    before = m.get_ordered_ops()
    assert m._ordered is not None
    m.drop_cached_order()
    assert not ConstantFolding().run_on_model(m)
    assert m._ordered == before  # sorted once, and kept


def test_result_producer_keeps_names():
    x = param([2])
    c = opset.relu(opset.constant(rand(2, 3)), name="folded")
    c.output(0).names.add("folded_t")
    m = model_of([opset.add(x, opset.constant(rand(2))), c], x)
    run(m, ConstantFolding())
    src = m.results[1].input_value(0)
    assert src.node.type_name == "Constant"
    assert src.node.friendly_name == "folded" and "folded_t" in src.names


def test_disabled_mark_is_respected():
    x = param([2, 3])
    c = opset.exp(opset.constant(rand(2, 3)))
    disable_constant_folding(c)
    m = model_of(opset.add(x, c), x)
    run(m, ConstantFolding())
    assert count(m, "Exp") == 1


def test_large_constant_folds_and_multi_consumer():
    x = param([100, 100])
    c = opset.tanh(opset.constant(rand(100, 100)))
    m = model_of([opset.add(x, c), opset.multiply(x, c)], x)
    run_checked(m, ConstantFolding())
    assert count(m, "Tanh") == 0


def test_dynamic_parameter_branch_untouched():
    x = opset.parameter([-1, 3], np.float32, "x")
    m = model_of(opset.relu(x), x)
    run(m, ConstantFolding())
    assert count(m, "Relu") == 1


# -- results that would create large data stay ops (FOLD_MAX_BYTES) ---------------------------
def _const_of_shape_model(shape: list[int]):
    """y = ReduceSum(ConstantOfShape(shape, 1.5)) + x, read from ONNX as users write it."""
    from onnx import TensorProto, helper, numpy_helper

    import netpass
    s = numpy_helper.from_array(np.array(shape, np.int64), "s")
    graph = helper.make_graph(
        [helper.make_node("ConstantOfShape", ["s"], ["big"], name="fill",
                          value=numpy_helper.from_array(np.array([1.5], np.float32))),
         helper.make_node("ReduceSum", ["big"], ["total"], name="sum", keepdims=0),
         helper.make_node("Add", ["x", "total"], ["y"], name="add")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])], [s])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    return proto, netpass.read_model(proto)


def test_a_constant_of_shape_of_10_to_the_12_elements_stays_an_op():
    _, m = _const_of_shape_model([1_000_000, 1_000_000])
    run(m, ConstantFolding())  # raised numpy's MemoryError (3.64 TiB) before
    assert count(m, "Broadcast") == 1 and count(m, "ReduceSum") == 1


def test_a_result_over_the_limit_stays_an_op_and_runs_at_run_time():
    import onnxruntime as ort

    import netpass
    from netpass.ngraph_passes.common.constant_folding import FOLD_MAX_BYTES
    rows = FOLD_MAX_BYTES // (4 * 256) + 1  # just over the limit in f32
    proto, m = _const_of_shape_model([rows, 256])
    run(m, ConstantFolding())
    assert count(m, "Broadcast") == 1
    x = rand(3)
    expected = ort.InferenceSession(proto.SerializeToString(),
                                    providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(netpass.reference.infer(m, {"x": x})["y"], expected, rtol=1e-5)


def test_a_result_under_the_limit_folds():
    from netpass.ngraph_passes.common.constant_folding import FOLD_MAX_BYTES
    rows = FOLD_MAX_BYTES // (4 * 256)  # exactly the limit in f32
    _, m = _const_of_shape_model([rows, 256])
    run_checked(m, ConstantFolding())
    assert count(m, "Broadcast", "ReduceSum") == 0


def test_weights_over_the_limit_still_fold_when_no_larger_than_their_inputs():
    # A Transpose, a Convert (f16 -> f32 doubles the bytes, not the elements) and a scaling of
    # an 8 MiB weight: what models do to weights, folded whatever the size.
    from netpass.ngraph_passes.common.constant_folding import FOLD_MAX_BYTES
    n = 1 << 11
    w = rand(n, n // 2)
    assert w.nbytes > FOLD_MAX_BYTES
    x = param([4, n])
    weight = opset.multiply(opset.transpose(opset.convert(opset.constant(w.astype(np.float16)),
                                                          np.float32), [1, 0]),
                            opset.constant(np.float32(0.5)))
    m = model_of(opset.matmul(x, weight, False, True), x)
    run_checked(m, ConstantFolding(), rtol=1e-3, atol=1e-3)
    assert count(m, "Transpose", "Convert", "Multiply") == 0
