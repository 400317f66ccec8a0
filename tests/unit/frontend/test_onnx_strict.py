"""Invalid ONNX is refused as onnx.checker and onnxruntime refuse it, naming node and tensor.

Each invalid model is also given to onnx.checker and onnxruntime, so that these tests show
netpass refuses what they refuse; what they accept (a graph output listed twice, as
TorchScript's exporter writes it) netpass reads too.
"""
from __future__ import annotations

import re

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import netpass
from netpass.errors import InvalidModelError, ModelFormatError

RNG = np.random.default_rng(5)


def _vi(name: str, shape=(2, 3)):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def _model(nodes, inputs=("x",), outputs=("y",), initializers=(), opset=17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", [_vi(n) for n in inputs], [_vi(n) for n in outputs],
                              list(initializers))
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    proto.ir_version = 8
    return proto


W = numpy_helper.from_array(RNG.uniform(0.5, 1.5, (2, 3)).astype(np.float32), "w")
node = helper.make_node

# (id, model, what the message must name, whether onnx.checker and onnxruntime refuse it too)
INVALID = [
    ("two-writers", _model([node("Relu", ["x"], ["y"], name="first"),
                            node("Neg", ["x"], ["y"], name="second")]),
     [r"ONNX node 'second' \(Neg\) writes 'y', which ONNX node 'first' \(Relu\) already "
      r"defines", "single static assignment"], True),
    ("writes-graph-input", _model([node("Relu", ["x"], ["x"], name="loop")], outputs=["x"]),
     [r"ONNX node 'loop' \(Relu\) writes 'x', which a graph input already defines"], True),
    ("writes-initializer", _model([node("Relu", ["x"], ["w"], name="shadow"),
                                   node("Add", ["w", "x"], ["y"], name="add")],
                                  initializers=[W]),
     [r"ONNX node 'shadow' \(Relu\) writes 'w', which an initializer already defines"], True),
    ("same-output-twice-in-a-node",
     _model([node("Split", ["x"], ["y", "y"], name="halves", axis=1)], inputs=["x"]),
     [r"ONNX node 'halves' \(Split\) writes 'y', which ONNX node 'halves' \(Split\) already"],
     True),
    ("duplicate-graph-input", _model([node("Relu", ["x"], ["y"], name="r")], inputs=["x", "x"]),
     [r"graph input 'x' is listed twice"], True),
    ("duplicate-initializer", _model([node("Add", ["x", "w"], ["y"], name="add")],
                                     initializers=[W, W]),
     [r"initializer 'w' is defined twice"], None),  # onnx.checker only (onnxruntime warns)
    ("undefined-graph-output", _model([node("Relu", ["x"], ["y"], name="r")],
                                      outputs=["y", "z"]),
     [r"graph output 'z' is not produced by any node, initializer or graph input"], True),
    ("undefined-input", _model([node("Add", ["x", "nowhere"], ["y"], name="add")]),
     [r"ONNX node 'add' \(Add\) reads 'nowhere', which no graph input, initializer or node "
      r"defines"], True),
    ("unsorted", _model([node("Neg", ["t"], ["y"], name="late"),
                         node("Relu", ["x"], ["t"], name="early")]),
     [r"ONNX node 'late' \(Neg\) reads 't', only the later ONNX node 'early' \(Relu\) writes "
      r"it \(nodes must be topologically sorted\)"], None),  # onnx.checker only
    ("float-for-int", _model([node("Softmax", ["x"], ["y"], name="sm", axis=1.0)]),
     [r"ONNX node 'sm' \(Softmax\): attribute 'axis' has type FLOAT, but Softmax "
      r"\(opset 13\) declares INT"], True),
    ("int-for-float", _model([node("LeakyRelu", ["x"], ["y"], name="lr", alpha=1)]),
     [r"ONNX node 'lr' \(LeakyRelu\): attribute 'alpha' has type INT, but LeakyRelu "
      r"\(opset 16\) declares FLOAT"], True),
    ("ints-for-int", _model([node("Softmax", ["x"], ["y"], name="sm", axis=[1])]),
     [r"attribute 'axis' has type INTS, but Softmax \(opset 13\) declares INT"], True),
    ("unknown-attribute", _model([node("Relu", ["x"], ["y"], name="r", slope=0.1)]),
     [r"ONNX node 'r' \(Relu\): unknown attribute 'slope'"], True),
    ("missing-required-attribute", _model([node("Cast", ["x"], ["y"], name="c")]),
     [r"ONNX node 'c' \(Cast\): required attribute 'to' is missing"], True),
    ("required-input-empty", _model([node("Identity", [""], ["y"], name="i")]),
     [r"ONNX node 'i' \(Identity\): required input 0 \('input'\) is missing"], True),
    ("required-input-absent", _model([node("Add", ["x"], ["y"], name="add")]),
     [r"ONNX node 'add' \(Add\): required input 1 \('B'\) is missing"], True),
    ("too-many-inputs", _model([node("Relu", ["x", "x"], ["y"], name="r")]),
     [r"ONNX node 'r' \(Relu\): 2 inputs, but Relu \(opset 14\) takes at most 1"], True),
    ("variadic-input-empty", _model([node("Concat", [], ["y"], name="c", axis=0)]),
     [r"ONNX node 'c' \(Concat\): input 'inputs' needs at least 1 tensor\(s\), 0 given"],
     True),
]


def _onnxruntime_refuses(proto: onnx.ModelProto) -> bool:
    try:
        ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception:
        return True
    return False


def _checker_refuses(proto: onnx.ModelProto) -> bool:
    try:
        onnx.checker.check_model(proto)
    except onnx.checker.ValidationError:
        return True
    return False


@pytest.mark.parametrize("case,proto,patterns,others_refuse", INVALID,
                         ids=[c[0] for c in INVALID])
def test_invalid_onnx_is_refused_naming_node_and_tensor(case, proto, patterns, others_refuse):
    with pytest.raises(InvalidModelError) as info:
        netpass.read_model(proto)
    for pattern in patterns:
        assert re.search(pattern, str(info.value)), str(info.value)
    err = info.value
    assert err.tensor and err.tensor in str(err)
    if err.node:
        assert f"'{err.node}' ({err.op_type})" in str(err)
    assert isinstance(err, ModelFormatError)  # what readers raised for bad files before
    if others_refuse is None:  # refused by onnx.checker, not by onnxruntime
        assert _checker_refuses(proto)
    else:
        assert _checker_refuses(proto) is others_refuse
        assert _onnxruntime_refuses(proto) is others_refuse


# -- valid spellings that look close to the invalid ones ------------------------------------
def _same_as_onnxruntime(proto: onnx.ModelProto) -> None:
    x = RNG.uniform(-1, 1, (2, 3)).astype(np.float32)
    feeds = {i.name: x for i in proto.graph.input if i.name not in
             {t.name for t in proto.graph.initializer}}
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = dict(zip([o.name for o in proto.graph.output], sess.run(None, feeds)))
    got = netpass.reference.infer(netpass.read_model(proto), feeds)
    assert got.keys() == expected.keys()
    for name, value in expected.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-6, atol=1e-6)


def test_initializer_listed_as_graph_input_is_valid():
    proto = _model([node("Add", ["x", "w"], ["y"], name="add")], inputs=["x", "w"],
                   initializers=[W])
    _same_as_onnxruntime(proto)


def test_graph_input_that_is_also_a_graph_output_is_valid():
    proto = _model([node("Relu", ["x"], ["y"], name="r")], outputs=["y", "x"])
    _same_as_onnxruntime(proto)


def test_omitted_optional_outputs_are_not_names():
    w = numpy_helper.from_array(RNG.uniform(-1, 1, (1, 8, 3)).astype(np.float32), "W")
    r = numpy_helper.from_array(RNG.uniform(-1, 1, (1, 8, 2)).astype(np.float32), "R")
    graph = helper.make_graph(
        [node("LSTM", ["x", "W", "R"], ["", "h", ""], name="rnn", hidden_size=2),
         node("LSTM", ["x", "W", "R"], ["", "", "c"], name="rnn2", hidden_size=2)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 2, 3])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("h", "c")],
        [w, r])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    x = RNG.uniform(-1, 1, (4, 2, 3)).astype(np.float32)
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    got = netpass.reference.infer(netpass.read_model(proto), {"x": x})
    for name, value in zip(("h", "c"), sess.run(None, {"x": x})):
        np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-6)


def test_attribute_of_an_op_without_schema_at_this_opset_is_left_to_its_rule():
    # Gelu has a schema from opset 20 on: at opset 17 the import rule decides (no rule there).
    with pytest.raises(netpass.errors.UnsupportedOpError, match="Gelu"):
        netpass.read_model(_model([node("Gelu", ["x"], ["y"], name="g", approximate="tanh")]))


# -- what TorchScript's exporter writes for a tensor returned twice -------------------------
def test_torchscript_export_of_a_tensor_returned_twice_reads_with_the_output_once(tmp_path):
    torch = pytest.importorskip("torch")

    class Twice(torch.nn.Module):
        def forward(self, x):
            y = torch.relu(x)
            return y, y, -x

    path = tmp_path / "twice.onnx"
    x = RNG.uniform(-1, 1, (2, 3)).astype(np.float32)
    torch.onnx.export(Twice(), (torch.from_numpy(x),), str(path), dynamo=False,
                      opset_version=17)
    proto = onnx.load(str(path))
    names = [o.name for o in proto.graph.output]
    assert len(names) == 3 and names[0] == names[1] != names[2]  # what the exporter writes
    assert not _checker_refuses(proto) and not _onnxruntime_refuses(proto)
    model = netpass.read_model(path)
    assert model.output_names == [names[0], names[2]]
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    expected = dict(zip(names, sess.run(None, {proto.graph.input[0].name: x})))
    got = netpass.reference.infer(model, {proto.graph.input[0].name: x})
    for name in model.output_names:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-6, atol=1e-6)
