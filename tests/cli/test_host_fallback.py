"""``netpass run`` names the ops that ran on the host for want of a device kernel, and
``--no-host-fallback`` (config HOST_FALLBACK: False) refuses such a model naming them."""
from __future__ import annotations

import onnx
from cli_helpers import netpass_cli
from onnx import TensorProto, helper


def _model(tmp_path, op: str = "Hardmax"):
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node(op, ["r"], ["y"], axis=1)],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return path


def test_run_lists_host_fallbacks(tmp_path):
    proc = netpass_cli("run", _model(tmp_path), "--device", "CPU", "--iterations", "2")
    assert proc.returncode == 0, proc.stderr
    assert "host fallbacks: Hardmax x3" in proc.stdout


def test_run_without_fallbacks_says_none(tmp_path):
    proc = netpass_cli("run", _model(tmp_path, "Softmax"), "--device", "CPU")
    assert proc.returncode == 0, proc.stderr
    assert "host fallbacks: none" in proc.stdout


def test_no_host_fallback_names_the_ops(tmp_path):
    proc = netpass_cli("run", _model(tmp_path), "--device", "CPU", "--no-host-fallback")
    assert proc.returncode != 0
    assert "Hardmax" in proc.stderr and "HOST_FALLBACK" in proc.stderr
    assert "Traceback" not in proc.stderr
