"""``netpass visualize``: the graph as read, or after the pipeline; the format by suffix."""
from __future__ import annotations

from cli_helpers import EXAMPLES, netpass_cli

KWS = EXAMPLES / "kws_cnn.onnx"


def test_svg_of_the_model_as_read(tmp_path):
    proc = netpass_cli("visualize", KWS, "-o", tmp_path / "g.svg")
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "g.svg").read_text()
    assert "<svg" in text and "Convolution" in text and "GNAConvolution" not in text


def test_svg_after_the_pipeline_shows_gna_ops(tmp_path):
    proc = netpass_cli("visualize", KWS, "-o", tmp_path / "g.svg", "--after-pipeline")
    assert proc.returncode == 0, proc.stderr
    assert "after the gna pipeline" in proc.stdout
    assert "GNAConvolution" in (tmp_path / "g.svg").read_text()


def test_common_pipeline_keeps_standard_convolutions(tmp_path):
    netpass_cli("visualize", KWS, "-o", tmp_path / "g.dot", "--after-pipeline",
                "--transformations", "common")
    text = (tmp_path / "g.dot").read_text()
    assert text.startswith("digraph") and "GNAConvolution" not in text


def test_unknown_suffix_is_one_error_line(tmp_path):
    proc = netpass_cli("visualize", KWS, "-o", tmp_path / "g.jpg")
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and "unknown graph format 'jpg'" in lines[0]
