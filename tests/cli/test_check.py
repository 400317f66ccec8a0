"""``netpass check --target gna``: every op left inside after the GNA pipeline, whether GNA could
run it and why not; exit status 1 when something cannot run."""
from __future__ import annotations

import numpy as np
import onnx
from cli_helpers import EXAMPLES, netpass_cli
from onnx import TensorProto, helper, numpy_helper


def _write(path, nodes, inits=(), shape=(1, 16)):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=list(inits))
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_a_model_gna_runs_exits_0(tmp_path):
    w = numpy_helper.from_array(np.ones((16, 8), np.float32), "w")
    path = _write(tmp_path / "ok.onnx", [helper.make_node("MatMul", ["x", "w"], ["h"]),
                                         helper.make_node("Tanh", ["h"], ["y"])], [w])
    proc = netpass_cli("check", "--target", "gna", path)
    assert proc.returncode == 0, proc.stderr
    assert "GNA 3.0 cannot run 0 (the whole graph runs on GNA)" in proc.stdout
    assert "ok  MatMul" in proc.stdout and "affine layer" in proc.stdout


def test_ops_gna_cannot_run_are_named_with_the_rule_and_exit_1(tmp_path):
    path = _write(tmp_path / "bad.onnx", [helper.make_node("Softmax", ["x"], ["s"], axis=1),
                                          helper.make_node("Erf", ["s"], ["y"])])
    proc = netpass_cli("check", "--target", "gna", path)
    assert proc.returncode == 1, proc.stderr
    assert "cannot run 2" in proc.stdout
    assert "GNA has no Softmax layer" in proc.stdout and "GNA has no Erf layer" in proc.stdout


def test_gna_version_and_shape_options():
    kws = EXAMPLES / "kws_cnn.onnx"
    on_30 = netpass_cli("check", "--target", "gna", kws)
    assert on_30.returncode == 1 and "GNA 3.0 CNN2D limits" in on_30.stdout
    on_35 = netpass_cli("check", "--target", "gna", "--gna-version", "3.5", kws)
    assert "CNN2D" not in on_35.stdout and "GNA has no Softmax layer" in on_35.stdout
    dynamic = netpass_cli("check", "--target", "gna", EXAMPLES / "transformer_block.onnx")
    assert "dynamic shape" in dynamic.stdout
    fixed = netpass_cli("check", "--target", "gna", EXAMPLES / "transformer_block.onnx",
                        "--shape", "x=1,16,64")
    assert fixed.returncode == 1 and "dynamic shape" not in fixed.stdout


def test_the_target_is_required_and_a_bad_shape_is_one_error_line():
    proc = netpass_cli("check", EXAMPLES / "kws_cnn.onnx")
    assert proc.returncode == 2 and "--target" in proc.stderr
    proc = netpass_cli("check", "--target", "gna", EXAMPLES / "kws_cnn.onnx", "--shape", "nope=1,2")
    assert proc.returncode == 1 and proc.stderr.startswith("error: ") and "inputs are" in proc.stderr
