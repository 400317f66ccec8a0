"""``netpass run`` on the example models (reference device)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

import netpass
from netpass.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def test_run_prints_outputs_latency_and_summary(capsys):
    assert main(["run", str(EXAMPLES / "kws_cnn.onnx"), "--iterations", "2"]) == 0
    out = capsys.readouterr().out
    assert "output probs: shape [1, 12] float32 [" in out
    assert "over 2 iteration(s)" in out
    assert out.strip().splitlines()[-1].startswith("ran kws_cnn.onnx on REFERENCE: 1 input(s), "
                                                   "1 output(s)")


def test_run_dynamic_dims_default_to_one(capsys):
    assert main(["run", str(EXAMPLES / "lstm_speech.onnx")]) == 0
    assert "output logits: shape [1, 1, 12]" in capsys.readouterr().out


def test_run_shape_option_sets_dynamic_dims(capsys):
    assert main(["run", str(EXAMPLES / "transformer_block.onnx"), "--shape", "x=2,5,64"]) == 0
    assert "output y: shape [2, 5, 64]" in capsys.readouterr().out


def test_run_input_from_npy_file(tmp_path, capsys):
    x = np.linspace(-1, 1, 4 * 40, dtype=np.float32).reshape(1, 4, 40)
    np.save(tmp_path / "x.npy", x)
    path = EXAMPLES / "lstm_speech.onnx"
    assert main(["run", str(path), "--input", f"features={tmp_path / 'x.npy'}"]) == 0
    expected = netpass.reference.infer(netpass.read_model(path), {"features": x})["logits"]
    first = ", ".join(f"{v:.6g}" for v in expected.reshape(-1)[:5])
    assert f"[{first}, ...]" in capsys.readouterr().out


def test_run_unknown_input_name_is_one_error_line(capsys):
    assert main(["run", str(EXAMPLES / "kws_cnn.onnx"), "--shape", "nope=1,2"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: input 'nope'") and "hint:" in err[0]


def test_run_truncated_model_exits_1(tmp_path, capsys):
    data = (EXAMPLES / "kws_cnn.onnx").read_bytes()
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(data[:1000])
    assert main(["run", str(bad)]) == 1
    assert capsys.readouterr().err.startswith("error: ")


def test_console_entry_point_exit_status():
    proc = subprocess.run([sys.executable, "-m", "netpass.cli", "run",
                           str(EXAMPLES / "transpose_heavy.onnx")],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "output y: shape [1, 64, 10] float32" in proc.stdout


def test_run_shared_dim_symbol_follows_the_given_shape(tmp_path, capsys):
    import onnx
    from onnx import TensorProto, helper
    graph = helper.make_graph(
        [helper.make_node("Concat", ["a", "b"], ["ab"], axis=1)], "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["batch", 3]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, ["batch", 2])],
        [helper.make_tensor_value_info("ab", TensorProto.FLOAT, ["batch", 5])])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    onnx.save_model(proto, str(tmp_path / "two.onnx"))
    assert main(["run", str(tmp_path / "two.onnx"), "--shape", "a=4,3"]) == 0
    out = capsys.readouterr().out
    assert "input  b: shape [4, 2]" in out and "output ab: shape [4, 5]" in out
