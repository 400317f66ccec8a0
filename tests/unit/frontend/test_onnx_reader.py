"""ONNX reader: sources, names, symbols, constants, and malformed or hostile input.

Models are built inline with onnx.helper (IR version 8, opset 17) from ops whose import rules
live next to the reader (Identity, Constant) or in the recurrent family, so that these tests
check the reader itself.
"""
from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.external_data_helper import convert_model_to_external_data

import netpass
from netpass.errors import ModelFormatError, NetpassError, UnsupportedOpError
from netpass.ops import Constant


def _model(nodes, inputs, outputs, initializers=(), opset=17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    proto.ir_version = 8
    return proto


def _vi(name, shape, et=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, et, shape)


def _identity_model() -> onnx.ModelProto:
    return _model([helper.make_node("Identity", ["audio"], ["feat"], name="copy")],
                  [_vi("audio", ["batch", 3])], [_vi("feat", ["batch", 3])])


def _lstm_model(**attrs) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((1, 8, 3)).astype(np.float32), "W")
    r = numpy_helper.from_array(rng.standard_normal((1, 8, 2)).astype(np.float32), "R")
    node = helper.make_node("LSTM", ["x", "W", "R"], ["y"], name="rnn0", **attrs)
    return _model([node], [_vi("x", [4, 1, 3])], [_vi("y", None)], [w, r])


# -- sources --------------------------------------------------------------------------------
def test_reads_path_bytes_and_modelproto_alike(tmp_path):
    proto = _identity_model()
    path = tmp_path / "m.onnx"
    onnx.save_model(proto, str(path))
    x = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    for source in (path, str(path), proto.SerializeToString(), proto):
        model = netpass.read_model(source)
        assert model.input_names == ["audio"] and model.output_names == ["feat"]
        np.testing.assert_array_equal(netpass.reference.infer(model, {"audio": x})["feat"], x)


def test_graph_input_and_output_names_are_kept():
    model = netpass.read_model(_identity_model())
    assert [p.friendly_name for p in model.parameters] == ["audio"]
    assert "audio" in model.parameters[0].output(0).names
    assert model.output_names == ["feat"]


def test_an_input_keeps_its_own_name_through_an_op_handed_through():
    """A Cast of an input to its own type is the input: its output's name stays off the
    input's tensor (Bloom's attention mask kept the Cast's, which sorts first: its any_name),
    as in OpenVINO's reader; a graph output it is stays among its names."""
    nodes = [helper.make_node("Cast", ["mask"], ["/m/Cast_output_0"], to=TensorProto.INT64),
             helper.make_node("Add", ["/m/Cast_output_0", "/m/Cast_output_0"], ["y"]),
             helper.make_node("Identity", ["mask"], ["same"])]
    model = netpass.read_model(_model(nodes, [_vi("mask", ["b", 4], TensorProto.INT64)],
                                      [_vi("y", ["b", 4], TensorProto.INT64),
                                       _vi("same", ["b", 4], TensorProto.INT64)]))
    mask = model.inputs[0]
    assert mask.any_name == "mask" and mask.get_names() == {"mask", "same"}
    assert model.output_names == ["y", "same"]
    x = np.arange(8, dtype=np.int64).reshape(2, 4)
    got = netpass.reference.infer(model, {"mask": x})
    np.testing.assert_array_equal(got["y"], 2 * x)
    np.testing.assert_array_equal(got["same"], x)


def test_dim_param_becomes_a_symbol_shared_by_inputs():
    proto = _model([helper.make_node("Identity", ["a"], ["ya"]),
                    helper.make_node("Identity", ["b"], ["yb"])],
                   [_vi("a", ["batch", "time"]), _vi("b", ["batch", 5])],
                   [_vi("ya", None), _vi("yb", None)])
    model = netpass.read_model(proto)
    a, b = (p.output(0).partial_shape for p in model.parameters)
    assert a[0].is_dynamic and a[0].symbol is not None
    assert a[0].symbol is b[0].symbol
    assert a[1].symbol is not a[0].symbol
    assert b[1].get_length() == 5


def test_constant_node_becomes_a_constant():
    value = np.array([[1.5, -2.0, 3.25]], dtype=np.float32)
    proto = _model([helper.make_node("Constant", [], ["c"], name="k",
                                     value=numpy_helper.from_array(value))],
                   [], [_vi("c", [1, 3])])
    model = netpass.read_model(proto)
    node = model.results[0].input_value(0).node
    assert isinstance(node, Constant)
    np.testing.assert_array_equal(node.value, value)
    np.testing.assert_array_equal(netpass.reference.infer(model, {})["c"], value)


def test_constant_node_int_list_value():
    proto = _model([helper.make_node("Constant", [], ["c"], value_ints=[3, 1, 4])],
                   [], [_vi("c", [3], TensorProto.INT64)])
    out = netpass.reference.infer(netpass.read_model(proto), {})["c"]
    assert out.dtype == np.int64 and out.tolist() == [3, 1, 4]


def test_initializer_becomes_a_named_constant():
    w = np.array([2.0, 4.0], dtype=np.float32)
    proto = _model([helper.make_node("Identity", ["w"], ["y"])], [], [_vi("y", [2])],
                   [numpy_helper.from_array(w, "w")])
    model = netpass.read_model(proto)
    const = model.results[0].input_value(0).node
    assert isinstance(const, Constant) and "w" in const.output(0).names
    np.testing.assert_array_equal(const.value, w)


# -- malformed input ------------------------------------------------------------------------
def test_truncated_file_raises_model_format_error(tmp_path):
    data = _lstm_model(hidden_size=2).SerializeToString()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelFormatError, match="cut.onnx"):
        netpass.read_model(path)


def test_truncated_bytes_raise_model_format_error():
    data = _lstm_model(hidden_size=2).SerializeToString()
    with pytest.raises(ModelFormatError):
        netpass.read_model(data[: len(data) - 7])


def test_missing_file_raises_model_format_error(tmp_path):
    with pytest.raises(ModelFormatError, match="not found"):
        netpass.read_model(tmp_path / "absent.onnx")


def test_unknown_op_names_op_and_node():
    proto = _model([helper.make_node("FrobnicateV9", ["x"], ["y"], name="frob_1")],
                   [_vi("x", [2])], [_vi("y", [2])])
    with pytest.raises(UnsupportedOpError) as info:
        netpass.read_model(proto)
    assert info.value.op_type == "FrobnicateV9" and info.value.node_name == "frob_1"
    assert "FrobnicateV9" in str(info.value) and "frob_1" in str(info.value)


def test_unnamed_node_is_named_by_its_first_named_output():
    proto = _model([helper.make_node("FrobnicateV9", ["x"], ["", "second"])],
                   [_vi("x", [2])], [_vi("second", [2])])
    with pytest.raises(UnsupportedOpError) as info:
        netpass.read_model(proto)
    assert info.value.node_name == "second"


def test_non_default_domain_names_the_domain():
    node = helper.make_node("Gelu", ["x"], ["y"], name="g0", domain="com.example.custom")
    proto = _model([node], [_vi("x", [2])], [_vi("y", [2])])
    proto.opset_import.append(helper.make_opsetid("com.example.custom", 1))
    with pytest.raises(UnsupportedOpError) as info:
        netpass.read_model(proto)
    assert info.value.domain == "com.example.custom"
    assert "com.example.custom" in str(info.value) and "g0" in str(info.value)


def test_wrong_attribute_type_raises_model_format_error():
    proto = _lstm_model(hidden_size=2.5)
    with pytest.raises(ModelFormatError, match="rnn0.*hidden_size"):
        netpass.read_model(proto)


def test_string_attribute_given_as_int_raises_model_format_error():
    proto = _lstm_model(hidden_size=2, direction=1)
    with pytest.raises(ModelFormatError, match="direction"):
        netpass.read_model(proto)


def test_input_of_unknown_tensor_raises_model_format_error():
    proto = _model([helper.make_node("Identity", ["ghost"], ["y"], name="reader")],
                   [_vi("x", [2])], [_vi("y", [2])])
    with pytest.raises(ModelFormatError, match="reader.*ghost"):
        netpass.read_model(proto)


def test_model_without_default_opset_raises_model_format_error():
    proto = _identity_model()
    del proto.opset_import[:]
    proto.opset_import.append(helper.make_opsetid("com.other", 1))
    with pytest.raises(ModelFormatError, match="opset"):
        netpass.read_model(proto)


# -- external data --------------------------------------------------------------------------
def _external_model(location: str = "weights.bin") -> tuple[onnx.ModelProto, np.ndarray]:
    """A model whose only weight is external data at ``location`` (any string: the reader,
    not onnx, must refuse a path that leaves the model directory)."""
    w = np.linspace(-1, 1, 4096, dtype=np.float32)
    proto = _model([helper.make_node("Identity", ["w"], ["y"])], [], [_vi("y", [4096])],
                   [numpy_helper.from_array(w, "w")])
    convert_model_to_external_data(proto, all_tensors_to_one_file=True, location="weights.bin",
                                   size_threshold=0)
    for entry in proto.graph.initializer[0].external_data:
        if entry.key == "location":
            entry.value = location
    return proto, w


def test_external_data_inside_the_model_directory_loads(tmp_path):
    proto, w = _external_model()
    path = tmp_path / "m.onnx"
    onnx.save_model(proto, str(path))  # writes weights.bin next to m.onnx
    assert (tmp_path / "weights.bin").is_file()
    out = netpass.reference.infer(netpass.read_model(path), {})["y"]
    np.testing.assert_array_equal(out, w)


def test_external_data_leaving_the_model_directory_is_refused(tmp_path):
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    secret = tmp_path / "secret.bin"
    secret.write_bytes(np.ones(4096, np.float32).tobytes())
    proto, _ = _external_model("../secret.bin")
    path = model_dir / "m.onnx"
    path.write_bytes(proto.SerializeToString())
    with pytest.raises(ModelFormatError, match="leaves the model directory"):
        netpass.read_model(path)


def test_external_data_absolute_path_is_refused(tmp_path):
    secret = tmp_path / "abs.bin"
    secret.write_bytes(np.ones(4096, np.float32).tobytes())
    proto, _ = _external_model(str(secret))
    path = tmp_path / "sub"
    path.mkdir()
    (path / "m.onnx").write_bytes(proto.SerializeToString())
    with pytest.raises(ModelFormatError, match="leaves the model directory"):
        netpass.read_model(path / "m.onnx")


def test_external_data_from_bytes_is_refused(tmp_path):
    proto, _ = _external_model()
    with pytest.raises(ModelFormatError, match="external data"):
        netpass.read_model(proto.SerializeToString())


def test_external_constant_attribute_from_bytes_is_refused_without_reading(tmp_path,
                                                                          monkeypatch):
    """A Constant node's tensor with external data, in a model given as bytes: refused where
    the tensor is converted, naming it, and the file its location names in the working
    directory is not read."""
    w = np.linspace(-1, 1, 64, dtype=np.float32)
    tensor = numpy_helper.from_array(w, "w")
    tensor.data_location = onnx.TensorProto.EXTERNAL
    tensor.ClearField("raw_data")
    for key, value in (("location", "weights.bin"), ("offset", "0"), ("length", "256")):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    proto = _model([helper.make_node("Constant", [], ["y"], value=tensor)], [], [_vi("y", [64])])
    monkeypatch.chdir(tmp_path)
    (tmp_path / "weights.bin").write_bytes(w.tobytes())
    with pytest.raises(ModelFormatError, match="tensor 'w' uses external data"):
        netpass.read_model(proto.SerializeToString())


def test_external_data_shorter_than_declared_is_refused(tmp_path):
    proto, _ = _external_model()
    path = tmp_path / "m.onnx"
    onnx.save_model(proto, str(path))  # records offset and length of the data
    (tmp_path / "weights.bin").write_bytes(b"\0" * 100)
    with pytest.raises(ModelFormatError, match="truncated"):
        netpass.read_model(path)


def test_external_data_symlink_out_of_the_directory_is_refused(tmp_path):
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    outside = tmp_path / "outside.bin"
    outside.write_bytes(np.ones(4096, np.float32).tobytes())
    (model_dir / "weights.bin").symlink_to(outside)
    proto, _ = _external_model()
    (model_dir / "m.onnx").write_bytes(proto.SerializeToString())
    with pytest.raises(ModelFormatError, match="leaves the model directory"):
        netpass.read_model(model_dir / "m.onnx")


@pytest.mark.parametrize("key,value", [("offset", "12abc"), ("offset", "-4"),
                                       ("length", "99999999999999")])
def test_external_data_bad_offset_or_length_is_refused(tmp_path, key, value):
    proto, _ = _external_model()
    path = tmp_path / "m.onnx"
    onnx.save_model(proto, str(path))
    proto = onnx.load(str(path), load_external_data=False)
    entries = proto.graph.initializer[0].external_data
    for entry in entries:
        if entry.key == key:
            entry.value = value
    path.write_bytes(proto.SerializeToString())
    with pytest.raises(ModelFormatError, match="external data"):
        netpass.read_model(path)


EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "lstm_speech.onnx"


def test_every_truncation_raises_model_format_error():
    data = EXAMPLE.read_bytes()
    for cut in np.linspace(0, len(data) - 1, 60).astype(int):
        with pytest.raises(ModelFormatError):
            netpass.read_model(data[:cut])


def test_corrupted_bytes_raise_only_netpass_errors():
    data = EXAMPLE.read_bytes()
    rng = np.random.default_rng(7)
    for _ in range(150):
        corrupt = bytearray(data)
        for pos in rng.integers(0, 2000, size=3):  # the graph structure, before the weights
            corrupt[pos] = rng.integers(0, 256)
        with contextlib.suppress(NetpassError):
            netpass.read_model(bytes(corrupt))
