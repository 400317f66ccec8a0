"""Errors: one ``error: ...`` line with a hint on stderr, exit code 1, no traceback."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from cli_helpers import EXAMPLES, netpass_cli
from onnx import TensorProto, helper

KWS = EXAMPLES / "kws_cnn.onnx"


def _one_error_line(proc) -> str:
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    # (a compile that outlasts LONG_RUN_S on a loaded machine reports its stages first)
    lines = [line for line in proc.stderr.splitlines()
             if not line.startswith(("compiling: ", "compiled in "))]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]


def _unknown_op_model(path) -> None:
    graph = helper.make_graph(
        [helper.make_node("FrobnicateX", ["x"], ["y"], name="frob")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    onnx.save_model(proto, str(path))


def test_missing_model_file():
    line = _one_error_line(netpass_cli("run", "no/such/model.onnx"))
    assert "model file not found: no/such/model.onnx" in line and "(hint: " in line


def test_missing_model_file_in_every_model_command(tmp_path):
    for args in (["convert", "nope.onnx", "-o", tmp_path / "o.xml"],
                 ["visualize", "nope.onnx", "-o", tmp_path / "g.svg"],
                 ["benchmark", "nope.onnx"]):
        assert "model file not found" in _one_error_line(netpass_cli(*args))


def test_unsupported_op(tmp_path):
    _unknown_op_model(tmp_path / "frob.onnx")
    line = _one_error_line(netpass_cli("run", tmp_path / "frob.onnx"))
    assert "unsupported op 'FrobnicateX'" in line and "(hint: " in line


def test_unsupported_onnxruntime_contrib_op(tmp_path):
    """A com.microsoft op netpass has no rule for (it reads ~20 of them) is named, with its
    domain and node, on one error line."""
    graph = helper.make_graph(
        [helper.make_node("SparseAttention", ["q"], ["y"], name="sparse",
                          domain="com.microsoft", num_heads=2, kv_num_heads=1)], "g",
        [helper.make_tensor_value_info("q", TensorProto.FLOAT, [1, 3, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 8])])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    proto.ir_version = 8
    onnx.save_model(proto, str(tmp_path / "sparse.onnx"))
    line = _one_error_line(netpass_cli("run", tmp_path / "sparse.onnx"))
    assert "unsupported op 'SparseAttention' in domain 'com.microsoft'" in line
    assert "'sparse'" in line and "(hint: " in line


def test_shape_of_the_wrong_rank():
    line = _one_error_line(netpass_cli("run", KWS, "--shape", "input=1,49,10"))
    assert line.startswith("error: input 'input': rank 3")
    assert "hint: the model's inputs are input[1,1,49,10]" in line


def test_npy_of_the_wrong_shape(tmp_path):
    np.save(tmp_path / "x.npy", np.ones((1, 1, 48, 10), np.float32))
    line = _one_error_line(netpass_cli("run", KWS, "--input", f"input={tmp_path / 'x.npy'}"))
    assert line.startswith("error: input 'input': dim 2 is 48, expected 49")


def test_npz_archive_as_an_input(tmp_path):
    """(np.load gives an NpzFile for it: an internal error, 'NpzFile' has no 'shape'.)"""
    np.savez(tmp_path / "x.npz", input=np.ones((1, 1, 49, 10), np.float32))
    line = _one_error_line(netpass_cli("run", KWS, "--input", f"input={tmp_path / 'x.npz'}"))
    assert line.startswith("error: input 'input': ") and "is an .npz archive" in line


def test_unknown_input_name():
    line = _one_error_line(netpass_cli("run", KWS, "--shape", "nope=1,2"))
    assert line.startswith("error: input 'nope'")


def test_unwritable_output_is_one_line(tmp_path):
    (tmp_path / "file").write_text("")
    line = _one_error_line(netpass_cli("convert", KWS, "-o", tmp_path / "file" / "out.xml"))
    assert str(tmp_path / "file") in line


def test_no_traceback_unless_netpass_debug():
    quiet = netpass_cli("run", "nope.onnx")
    loud = netpass_cli("run", "nope.onnx", env={"NETPASS_DEBUG": "1"})
    assert "Traceback" not in quiet.stderr
    assert loud.returncode != 0 and "Traceback" in loud.stderr and "ModelFileError" in loud.stderr


def test_argument_errors_exit_2():
    proc = netpass_cli("convert", KWS)
    assert proc.returncode == 2 and "-o/--output" in proc.stderr


def test_gpu_without_a_gpu_is_one_line():
    from netpass.runtime import devices
    if any("GPU" in d["type"] for d in devices()):
        pytest.skip("this machine has an OpenCL GPU")
    line = _one_error_line(netpass_cli("run", KWS, "--device", "GPU"))
    assert "no OpenCL GPU was found" in line and "hint: run `netpass devices`" in line
