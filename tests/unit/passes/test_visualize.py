"""VisualizeTree writes graphviz dot text (labels, floated inputs and constants, crimson Results,
SEND/RECV for long edges) and renders svg/png through the ``dot`` binary."""
from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

from netpass import Model, opset
from netpass.core.rt_info import FusedNames
from netpass.errors import NetpassError
from netpass.passes import VisualizeTree
from netpass.passes.visualize import to_dot

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz 'dot' not installed")


def _model() -> Model:
    x = opset.parameter([1, -1, 4], np.float32, name="x")
    w = opset.constant(np.arange(1, 5, dtype=np.float32))
    a = opset.add(x, w, name="bias")
    r = opset.relu(a)
    return Model([opset.multiply(r, x, name="gate")], [x], "viz")


def test_dot_file_holds_labels_with_name_type_shape_and_type(tmp_path):
    path = tmp_path / "g.dot"
    assert VisualizeTree(path).run_on_model(_model()) is False
    text = path.read_text()
    assert text.startswith("digraph\n{") and text.rstrip().endswith("}")
    assert "rankdir=TB" in text
    assert re.search(r'label="bias\\n\[Add_\d+\]\\nopset1::Add\\n\{f32\}\[1,\?,4\]"', text)
    relu_name = re.search(r'"(Relu_\d+)"', text).group(1)
    assert f'label="{relu_name}\\nopset1::Relu' in text  # no unique-name line when equal


def test_constant_clone_shows_shape_and_first_values(monkeypatch):
    x = opset.parameter([10], np.float32, name="x")
    model = Model([opset.add(x, opset.constant(np.arange(1, 11, dtype=np.float32)))], [x])
    text = to_dot(model)
    assert "{f32}[10]\\nvalue: [ 1, 2, 3, 4, 5, 6, 7, ... ]" in text
    monkeypatch.setenv("NETPASS_VISUALIZE_TREE_CONST_MAX_ELEMENTS", "3")
    assert "value: [ 1, 2, 3, ... ]" in to_dot(model)


def test_parameters_and_constants_float_as_dashed_clones_per_use():
    text = to_dot(_model())
    clones = re.findall(r'(CLONE_\d+) \[shape="box" style="dashed" color="(\w+)"', text)
    assert [c for _, c in clones].count("blue") == 2  # x feeds Add and Multiply
    assert [c for _, c in clones].count("black") == 1
    assert len({name for name, _ in clones}) == 3
    assert not re.search(r'"Parameter_\d+" \[', text)


def test_result_is_crimson():
    text = to_dot(_model())
    line = re.search(r'"Result_\d+" \[.*\]', text).group(0)
    assert 'color="crimson"' in line and 'penwidth="1.5"' in line


def test_long_edges_go_through_send_recv(monkeypatch):
    x = opset.parameter([3], np.float32, name="x")
    first = opset.relu(x)
    y = first
    for _ in range(6):
        y = opset.sigmoid(y)
    model = Model([opset.add(y, first)], [x])
    assert "SEND_" not in to_dot(model)
    monkeypatch.setenv("NETPASS_VISUALIZE_TREE_EDGE_JUMP_DISTANCE", "3")
    text = to_dot(model)
    assert re.search(r'"Relu_\d+" -> SEND_0', text) and re.search(r'RECV_0 -> "Add_\d+"', text)


def test_edge_labels_show_ports(monkeypatch):
    monkeypatch.setenv("NETPASS_VISUALIZE_TREE_EDGE_LABELS", "1")
    x = opset.parameter([4, 2], np.float32, name="x")
    parts = opset.split(x, opset.constant(np.int64(0)), 2)
    text = to_dot(Model([opset.add(parts.output(1), parts.output(0))], [x]))
    assert re.search(r'"Split_\d+" -> "Add_\d+" \[label=" 1 -> 0 "\]', text)
    assert re.search(r'"Split_\d+" -> "Add_\d+" \[label=" 0 -> 1 "\]', text)


def test_partial_values_and_symbols(monkeypatch):
    x = opset.parameter(["batch", 3], np.float32, name="x")
    shape = opset.shape_of(x)
    model = Model([opset.reshape(x, shape, False)], [x])
    assert "value: (" not in to_dot(model)
    monkeypatch.setenv("NETPASS_VISUALIZE_PARTIAL_VALUES", "1")
    text = to_dot(model)
    assert re.search(r"value: \(\?<batch>, 3\)", text), text
    assert "[?<batch>,3]" in text


def test_label_toggles(monkeypatch):
    model = _model()
    bias = model.results[0].input_value(0).node.input_value(0).node.input_value(0).node
    bias.rt_info["fused_names_0"] = FusedNames(["bias", "b2"])
    bias.output(0).names.add("biased")
    monkeypatch.setenv("NETPASS_VISUALIZE_TREE_OUTPUT_SHAPES", "0")
    monkeypatch.setenv("NETPASS_VISUALIZE_TREE_IO", "1")
    monkeypatch.setenv("NETPASS_VISUALIZE_TREE_RUNTIME_INFO", "1")
    monkeypatch.setenv("NETPASS_VISUALIZE_TREE_TENSORS_NAME", "1")
    label = re.search(r'label="(bias\\n[^"]*)"', to_dot(model)).group(1)
    assert "in0: {f32}[1,?,4]\\nin1: {f32}[4]" in label
    assert "out0: {f32} (biased)" in label
    assert "fused_names_0: FusedNames(b2,bias)" in label


def test_node_modifiers_edit_attributes(tmp_path):
    def paint(node, attrs):
        if node.type_name == "Relu":
            attrs["style"] = "filled"
            attrs["fillcolor"] = "yellow"
    path = tmp_path / "g.dot"
    VisualizeTree(path, node_modifiers=paint).run_on_model(_model())
    assert re.search(r'"Relu_\d+" \[.*style="filled" fillcolor="yellow"', path.read_text())


@needs_dot
def test_svg_is_rendered(tmp_path):
    path = tmp_path / "g.svg"
    VisualizeTree(path).run_on_model(_model())
    svg = path.read_text()
    assert "<svg" in svg and "opset1::Multiply" in svg and "gate" in svg


@needs_dot
def test_png_by_suffix(tmp_path):
    path = tmp_path / "g.png"
    VisualizeTree(path).run_on_model(_model())
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_missing_dot_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(NetpassError, match="graphviz 'dot' program is not installed"):
        VisualizeTree(tmp_path / "g.svg").run_on_model(_model())
