"""``netpass benchmark``: shape sets, a growing sequence, percentiles and allocations."""
from __future__ import annotations

import io
import re

from cli_helpers import EXAMPLES, netpass_cli

from netpass.cli import Progress

BLOCK = EXAMPLES / "transformer_block.onnx"


def test_shape_sets_report_percentiles_per_shape_and_overall():
    proc = netpass_cli("benchmark", BLOCK, "--shapes", "x=1,8,64", "x=1,9,64",
                       "--iterations", "2", "--warmup", "0")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "2 shape set(s): x=1,8,64; x=1,9,64" in out
    assert "measured 4 infers (2 pass(es) x 2)" in out
    assert re.search(r"^  x=1,9,64: p50 [\d.]+ ms, p90 [\d.]+ ms, p99 [\d.]+ ms$", out, re.M)
    assert re.search(r"^latency: p50 [\d.]+ ms, p90 [\d.]+ ms, p99 [\d.]+ ms", out, re.M)


def test_throughput_and_allocations():
    out = netpass_cli("benchmark", BLOCK, "--shapes", "x=1,4,64", "--iterations", "2").stdout
    assert re.search(r"^throughput: [\d.]+ infers/s$", out, re.M)
    assert re.search(r"^allocations: \d+ \(\d+ bytes, [\d.]+ per infer, \d+ in the first pass\), "
                     r"reuses \d+$", out, re.M)
    assert "runtime stats (2 infers):" in out


def test_sequence_grows_one_axis_in_one_request():
    proc = netpass_cli("benchmark", BLOCK, "--sequence", "x:1:1:4", "--iterations", "2",
                       "--warmup", "0")
    assert proc.returncode == 0, proc.stderr
    assert "sequence: x axis 1 grows 1..4 (4 steps in one infer request)" in proc.stdout
    assert "measured 8 infers (2 pass(es) x 4)" in proc.stdout
    assert "first step: p50" in proc.stdout and "last step: p50" in proc.stdout


def test_sequence_takes_the_other_dims_from_shapes():
    proc = netpass_cli("benchmark", BLOCK, "--shapes", "x=2,1,64", "--sequence", "x:1:3:4",
                       "--iterations", "1", "--device", "REFERENCE")
    assert proc.returncode == 0, proc.stderr
    assert "grows 3..4 (2 steps" in proc.stdout


def test_bad_sequence_is_one_error_line():
    proc = netpass_cli("benchmark", BLOCK, "--sequence", "x:1:9")
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --sequence 'x:1:9': expected")


def test_short_piped_run_shows_no_progress():
    proc = netpass_cli("benchmark", BLOCK, "--shapes", "x=1,2,64", "--iterations", "2")
    assert proc.stderr == ""


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_on_a_terminal_ends_complete():
    stream = _Terminal()
    bar = Progress(4, "benchmark", stream)
    for _ in range(4):
        bar.update()
    bar.close()
    last = stream.getvalue().split("\r")[-1]
    assert last == "benchmark [" + "#" * 30 + "] 4/4\n"


def test_progress_is_silent_when_short_and_not_a_terminal():
    stream = io.StringIO()
    bar = Progress(4, "benchmark", stream)
    for _ in range(4):
        bar.update()
    bar.close()
    assert stream.getvalue() == ""
