"""``netpass convert``: the transformed model as IR v11 or ONNX, and ``--dump-dir``."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from cli_helpers import EXAMPLES, netpass_cli

import netpass

KWS = EXAMPLES / "kws_cnn.onnx"


def _ort(path, x: np.ndarray) -> np.ndarray:
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})[0]


def test_ir_output_holds_the_gna_model_and_computes_the_same(tmp_path):
    proc = netpass_cli("convert", KWS, "-o", tmp_path / "kws.xml")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "kws.bin").is_file()
    model = netpass.read_model(tmp_path / "kws.xml")
    types = {op.type_name for op in model.get_ordered_ops()}
    assert "GNAConvolution" in types and "Convolution" not in types
    x = np.random.default_rng(2).uniform(-1, 1, (1, 1, 49, 10)).astype(np.float32)
    got = netpass.reference.infer(model, {"input": x})["probs"]
    np.testing.assert_allclose(got, _ort(KWS, x), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("which", ["common", "none"])
def test_onnx_output_runs_in_onnxruntime(which, tmp_path):
    src = EXAMPLES / "transpose_heavy.onnx"
    proc = netpass_cli("convert", src, "-o", tmp_path / "out.onnx", "--transformations", which)
    assert proc.returncode == 0, proc.stderr
    x = np.random.default_rng(3).uniform(-1, 1, (1, 16, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(_ort(tmp_path / "out.onnx", x), _ort(src, x), rtol=1e-4, atol=1e-5)


def test_onnx_output_of_gna_ops_is_one_error_line_with_a_hint(tmp_path):
    proc = netpass_cli("convert", KWS, "-o", tmp_path / "out.onnx")
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: unsupported op 'GNAConvolution'")
    assert "hint: ONNX holds standard ops only: write IR v11 (-o OUT.xml)" in lines[0]


def test_dump_dir_holds_every_stage(tmp_path):
    proc = netpass_cli("convert", KWS, "-o", tmp_path / "kws.xml", "--dump-dir", tmp_path / "d")
    assert proc.returncode == 0, proc.stderr
    names = {p.name for p in (tmp_path / "d").iterdir()}
    for stage in ("0_original", "1_transformed", "3_executable"):
        assert {f"{stage}.svg", f"{stage}.xml"} <= names
    assert {"2_legacy.dot", "2_legacy.xml"} <= names


def test_dump_dir_holds_the_tracing_of_every_pass(tmp_path):
    netpass_cli("convert", KWS, "-o", tmp_path / "kws.xml", "--dump-dir", tmp_path / "d")
    trace = tmp_path / "d" / "tracing"
    svgs = sorted(p.stem for p in trace.glob("*.svg"))
    xmls = sorted(p.stem for p in trace.glob("*.xml"))
    assert svgs == xmls and len(svgs) > 10
    assert svgs[0] == "kws_cnn_000_InitNodeInfo"
    assert any(s.endswith("_SubstituteGNAConvolution") for s in svgs)
