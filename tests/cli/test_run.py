"""``netpass run``: compile through compile_model, run, print outputs, latency and stats."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from cli_helpers import EXAMPLES, netpass_cli, printed_values

KWS = EXAMPLES / "kws_cnn.onnx"


def _ort(path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.fixture
def kws_input(tmp_path):
    x = np.random.default_rng(1).uniform(-1, 1, (1, 1, 49, 10)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    return x, tmp_path / "x.npy"


def test_default_device_is_auto_which_picks_pocl_here():
    proc = netpass_cli("run", KWS)
    assert proc.returncode == 0, proc.stderr
    assert "device pthread" in proc.stdout and "Portable Computing Language" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1].startswith("ran kws_cnn.onnx on CPU: ")


@pytest.mark.parametrize("device", ["CPU", "REFERENCE"])
def test_outputs_equal_onnxruntime(device, kws_input):
    x, path = kws_input
    proc = netpass_cli("run", KWS, "--device", device, "--input", f"input={path}")
    assert proc.returncode == 0, proc.stderr
    expected = _ort(KWS, {"input": x})[0].reshape(-1)[:5]
    # printed with 6 significant digits
    np.testing.assert_allclose(printed_values(proc.stdout, "probs"), expected, rtol=1e-4, atol=1e-5)


def test_prints_output_name_shape_and_dtype():
    proc = netpass_cli("run", KWS, "--device", "REFERENCE")
    assert "output probs: shape [1, 12] float32 [" in proc.stdout


def test_latency_first_run_then_median_and_mean():
    proc = netpass_cli("run", KWS, "--device", "CPU", "--iterations", "3")
    line = next(s for s in proc.stdout.splitlines() if s.startswith("latency:"))
    assert "first run" in line and "median" in line and "mean" in line
    assert line.endswith("over 3 iteration(s)")


def test_runtime_stats_table_counts_every_infer():
    proc = netpass_cli("run", KWS, "--device", "CPU", "--iterations", "2")
    assert "runtime stats (3 infers):" in proc.stdout
    table = proc.stdout.split("runtime stats (3 infers):")[1]
    for key in ("allocations", "kernel_builds", "shape_updates", "host_waits"):
        assert key in table
    assert " infers " in table and table.split(" infers ")[1].split()[0] == "3"


def test_shape_sets_dynamic_dims():
    proc = netpass_cli("run", EXAMPLES / "transformer_block.onnx", "--shape", "x=2,5,64")
    assert proc.returncode == 0, proc.stderr
    assert "input  x: shape [2, 5, 64] float32" in proc.stdout
    assert "output y: shape [2, 5, 64] float32" in proc.stdout


def test_dynamic_dims_default_to_one():
    proc = netpass_cli("run", EXAMPLES / "lstm_speech.onnx", "--device", "REFERENCE")
    assert "output logits: shape [1, 1, 12]" in proc.stdout


def test_dynamic_dim_shared_by_two_inputs_follows_the_given_shape(tmp_path):
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
    proc = netpass_cli("run", tmp_path / "two.onnx", "--shape", "a=4,3", "--device", "REFERENCE")
    assert proc.returncode == 0, proc.stderr
    assert "input  b: shape [4, 2]" in proc.stdout and "output ab: shape [4, 5]" in proc.stdout


@pytest.mark.parametrize("which", ["common", "none"])
def test_other_pipelines_give_onnxruntime_outputs(which, kws_input):
    x, path = kws_input
    proc = netpass_cli("run", KWS, "--device", "REFERENCE", "--transformations", which,
                       "--input", f"input={path}")
    assert proc.returncode == 0, proc.stderr
    assert f"{which} pipeline" in proc.stdout
    expected = _ort(KWS, {"input": x})[0].reshape(-1)[:5]
    np.testing.assert_allclose(printed_values(proc.stdout, "probs"), expected, rtol=1e-4, atol=1e-5)


def test_netpass_device_environment_sets_the_default():
    proc = netpass_cli("run", KWS, env={"NETPASS_DEVICE": "REFERENCE"})
    assert "device REFERENCE (numpy)" in proc.stdout


def test_random_inputs_are_seeded():
    first = netpass_cli("run", KWS, "--device", "REFERENCE").stdout
    second = netpass_cli("run", KWS, "--device", "REFERENCE").stdout
    np.testing.assert_array_equal(printed_values(first, "probs"), printed_values(second, "probs"))
