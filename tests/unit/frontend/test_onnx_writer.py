"""ONNX writer: names, symbols, opset and IR version, and refusal of ops without a rule."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import netpass
from netpass import Model, opset
from netpass.core.node import Node
from netpass.errors import UnsupportedOpError
from netpass.frontend.onnx_writer import to_onnx


def _identity_model() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Identity", ["audio"], ["feat"])], "g",
        [helper.make_tensor_value_info("audio", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("feat", TensorProto.FLOAT, ["batch", 3])])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    return proto


def _ort(path, feeds):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)


def test_opset_and_ir_version():
    proto = to_onnx(netpass.read_model(_identity_model()))
    assert proto.ir_version == 8
    assert [(o.domain, o.version) for o in proto.opset_import] == [("", 17)]
    onnx.checker.check_model(proto)


def test_input_output_names_and_dim_params_survive(tmp_path):
    path = tmp_path / "out.onnx"
    netpass.save_model(netpass.read_model(_identity_model()), path)
    proto = onnx.load(str(path))
    (inp,), (out,) = proto.graph.input, proto.graph.output
    assert inp.name == "audio" and out.name == "feat"
    assert [d.dim_param or d.dim_value for d in inp.type.tensor_type.shape.dim] == ["batch", 3]
    x = np.arange(1, 13, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(_ort(path, {"audio": x})[0], x)


def test_round_trip_reads_back_equal_names_and_symbols(tmp_path):
    path = tmp_path / "out.onnx"
    netpass.save_model(netpass.read_model(_identity_model()), path)
    model = netpass.read_model(path)
    assert model.input_names == ["audio"] and model.output_names == ["feat"]
    assert model.parameters[0].output(0).partial_shape[0].symbol.name == "batch"


def test_one_value_feeding_two_outputs(tmp_path):
    x = opset.parameter([2, 3], np.float32, name="x")
    r1, r2 = opset.result(x, name="first"), opset.result(x, name="second")
    path = tmp_path / "two.onnx"
    netpass.save_model(Model([r1, r2], [x]), path)
    data = np.linspace(1, 2, 6, dtype=np.float32).reshape(2, 3)
    a, b = _ort(path, {"x": data})
    np.testing.assert_array_equal(a, data)
    np.testing.assert_array_equal(b, data)
    assert [o.name for o in onnx.load(str(path)).graph.output] == ["first", "second"]


def test_constant_output_and_unused_weights_are_not_written(tmp_path):
    x = opset.parameter([1, 2, 3], np.float32, name="x")
    h = opset.parameter([1, 1, 4], np.float32, name="h")
    rng = np.random.default_rng(0)
    seq = opset.rnn_sequence(x, h, np.array([2], np.int32),
                             rng.standard_normal((1, 4, 3)).astype(np.float32),
                             rng.standard_normal((1, 4, 4)).astype(np.float32),
                             rng.standard_normal((1, 4)).astype(np.float32), 4, "forward")
    proto = to_onnx(Model([opset.result(seq.output(1), name="h_last")], [x, h]))
    produced = {o for n in proto.graph.node for o in n.output}
    consumed = {i for n in proto.graph.node for i in n.input}
    assert all(t.name in consumed for t in proto.graph.initializer)
    assert "h_last" in produced


class _NoExportRule(Node):
    """A test op with shape inference but no ONNX export rule."""

    def infer_types(self) -> None:
        self.set_output_type(0, self.get_input_element_type(0), self.get_input_partial_shape(0))


def test_op_without_export_rule_names_op_and_node():
    x = opset.parameter([2], np.float32, name="x")
    node = _NoExportRule([x])
    node.friendly_name = "mystery_node"
    with pytest.raises(UnsupportedOpError, match="mystery_node") as info:
        to_onnx(Model([node], [x]))
    assert info.value.op_type == node.type_name and info.value.node_name == "mystery_node"


def test_large_weights_go_to_external_data_that_reads_back(tmp_path, monkeypatch):
    import netpass.frontend.onnx_writer as writer
    monkeypatch.setattr(writer, "EXTERNAL_DATA_THRESHOLD", 1000)
    xs = opset.parameter([2, 4, 3], np.float32, name="xs")
    h = opset.parameter([2, 1, 64], np.float32, name="h")
    rng = np.random.default_rng(1)
    seq = opset.gru_sequence(xs, h, np.array([4, 2], np.int32),
                             rng.standard_normal((1, 192, 3)).astype(np.float32),
                             rng.standard_normal((1, 192, 64)).astype(np.float32),
                             rng.standard_normal((1, 192)).astype(np.float32), 64, "forward")
    model = Model([opset.result(seq.output(1), name="h_last")], [xs, h])
    path = tmp_path / "big.onnx"
    netpass.save_model(model, path)
    assert (tmp_path / "big.onnx.data").stat().st_size > 192 * 64 * 4
    assert path.stat().st_size < 192 * 64 * 4
    feeds = {"xs": rng.standard_normal((2, 4, 3)).astype(np.float32),
             "h": rng.standard_normal((2, 1, 64)).astype(np.float32)}
    expected = netpass.reference.infer(model, feeds)["h_last"]
    np.testing.assert_allclose(netpass.reference.infer(netpass.read_model(path), feeds)["h_last"],
                               expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_ort(path, feeds)[0], expected, rtol=1e-4, atol=1e-5)


def test_constants_become_initializers_and_may_be_outputs(tmp_path):
    c = opset.constant(np.array([1.5, -2.0], np.float32))
    x = opset.parameter([2], np.float32, name="x")
    model = Model([opset.result(c, name="c"), opset.result(opset.add(x, c), name="y")], [x])
    path = tmp_path / "c.onnx"
    netpass.save_model(model, path)
    proto = onnx.load(str(path))
    assert not [n for n in proto.graph.node if n.op_type == "Constant"]
    assert "c" in {t.name for t in proto.graph.initializer}
    got_c, got_y = _ort(path, {"x": np.array([1.0, 3.0], np.float32)})
    np.testing.assert_array_equal(got_c, [1.5, -2.0])
    np.testing.assert_array_equal(got_y, [2.5, 1.0])


def test_same_tensor_listed_twice_as_output_is_defined_once(tmp_path):
    x = opset.parameter([2, 3], "f32", "x")
    y = opset.relu(x)
    model = Model([opset.result(y, name="y"), opset.result(y, name="y")], [x])
    netpass.save_model(model, tmp_path / "m.onnx")
    sess = ort.InferenceSession(str(tmp_path / "m.onnx"))
    data = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    a, b = sess.run(None, {"x": data})
    np.testing.assert_array_equal(a, np.maximum(data, 0))
    np.testing.assert_array_equal(b, a)
