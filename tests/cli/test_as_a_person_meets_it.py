"""The command line as a person meets it: ``--version``, Ctrl-C during a long run, and an input
too large for the machine refused before it is allocated."""
from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys

import numpy as np
import onnx
from cli_helpers import EXAMPLES, ROOT, netpass_cli
from onnx import TensorProto, helper

import netpass


def test_version():
    proc = netpass_cli("--version")
    assert proc.returncode == 0 and proc.stdout == f"netpass {netpass.__version__}\n"


def _read_until(fd: int, marker: bytes, seen: bytearray) -> None:
    """Read ``fd`` into ``seen`` until ``marker`` appears (the process is then where it says)."""
    while marker not in seen:
        ready, _, _ = select.select([fd], [], [], 60)
        assert ready, f"no {marker!r} on stderr; got {bytes(seen)!r}"
        seen += os.read(fd, 4096)


def _read_to_end(fd: int, seen: bytearray) -> None:
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the pty's other side closed
            return
        if not chunk:
            return
        seen += chunk


def test_ctrl_c_during_a_long_run_prints_one_line_and_exits_130():
    # stderr is a terminal, so the progress bar shows that the iterations have started.
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k not in ("NETPASS_DEVICE", "NETPASS_DEBUG")}
    proc = subprocess.Popen([sys.executable, "-m", "netpass.cli", "run",
                             str(EXAMPLES / "kws_cnn.onnx"), "--device", "REFERENCE",
                             "--iterations", "100000000"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    seen = bytearray()
    try:
        _read_until(master, b"run [", seen)
        proc.send_signal(signal.SIGINT)
        stdout, _ = proc.communicate(timeout=120)
        _read_to_end(master, seen)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    assert proc.returncode == 130
    # What follows the progress bar: exactly one line.
    after_bar = bytes(seen).decode().replace("\r\n", "\n").rsplit("\r", 1)[-1]
    lines = [line for line in after_bar.split("\n")[1:] if line.strip()]
    assert lines == ["interrupted"], bytes(seen)
    assert b"Traceback" not in seen and stdout == b""


def _one_error_line(proc) -> str:
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]


def test_a_shape_too_large_for_memory_is_refused_naming_input_and_size():
    line = _one_error_line(netpass_cli("run", EXAMPLES / "transformer_block.onnx",
                                       "--shape", "x=1,1000000000,64", "--device", "REFERENCE"))
    assert "input 'x': shape [1, 1000000000, 64] of float32 is 64000000000 elements " \
           "(238.4 GiB)" in line
    assert "more than this machine's" in line and "internal error" not in line


def test_a_static_input_of_10_to_the_12_elements_is_refused_before_allocating(tmp_path):
    graph = helper.make_graph([helper.make_node("Relu", ["big"], ["y"], name="relu")], "g",
                              [helper.make_tensor_value_info("big", TensorProto.FLOAT,
                                                             [1_000_000, 1_000_000])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    onnx.save_model(proto, str(tmp_path / "big.onnx"))
    line = _one_error_line(netpass_cli("run", tmp_path / "big.onnx", "--device", "REFERENCE"))
    assert "input 'big': shape [1000000, 1000000] of float32 is 1000000000000 elements " \
           "(3.6 TiB)" in line


def test_inputs_that_fit_still_run(tmp_path):
    x = np.random.default_rng(1).uniform(-1, 1, (1, 5, 64)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    proc = netpass_cli("run", EXAMPLES / "transformer_block.onnx", "--input",
                       f"x={tmp_path / 'x.npy'}", "--device", "REFERENCE")
    assert proc.returncode == 0, proc.stderr
