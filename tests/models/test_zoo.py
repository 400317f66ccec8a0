"""The whole flow on a zoo of exported models that are in no repository (``zoo.py``).

For every model, at every opset it is exported at (OpenVINO: opset 17), and at two or more
input shapes:

(a) ``reference.infer(read_model(path))`` equals onnxruntime within 1e-4 relative L2;
(b) after ``GnaTransformationsPipeline`` (on a clone given the first case's static shapes) the
    outputs equal the original's within 1e-5 relative to the output's largest magnitude; every
    (Group)Convolution/MaxPool became a GNA op; no Divide, LSTM/GRU cell or sequence, Slice or
    StridedSlice is left; Transposes left are GNA-supported or at a model edge and Gathers are
    at an edge (attention models exempt: their per-head Transposes between batched MatMuls are
    real data reorders no sinking removes, and embedding lookups are Gathers by nature);
(c) ``compile_model(path)`` on the OpenCL CPU device and on REFERENCE: one infer request fed
    every case equals onnxruntime within 1e-4 relative L2 (2e-3 for the float16 model); with
    static shapes, the legacy network of a CNN/speech model holds no Gather and only Permutes
    GNA runs;
(d) ``save_model`` to IR xml and back gives the same outputs, and OpenVINO runs that IR with
    onnxruntime's outputs; ``save_model`` to ONNX runs in onnxruntime with onnxruntime's outputs
    on the original.

Known failures are ``xfail(strict=True)`` with the finding in ``docs/dev/zoo-findings.md``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

import zoo  # noqa: E402

import netpass  # noqa: E402
from netpass.ngraph_passes.gna import (  # noqa: E402
    GnaTransformationsPipeline,
    interior_layout_ops,
    is_transpose_supported,
)
from netpass.passes import Manager  # noqa: E402
from netpass.testing import RUNTIME_DEVICE  # noqa: E402

REL_L2 = 1e-4
HALF_REL_L2 = 2e-3   # float16 models: netpass and onnxruntime round at different steps
PIPELINE_REL = 1e-5
FORBIDDEN = {"Divide", "LSTMCell", "LSTMSequence", "GRUCell", "GRUSequence", "Slice",
             "StridedSlice", "Convolution", "GroupConvolution", "MaxPool"}

# (model, check) -> reason: known failures, each a finding in docs/dev/zoo-findings.md (none
# open now; a new finding adds its entry here).
XFAIL: dict[tuple[str, str], str] = {}

SUPPORTED = [name for name, entry in zoo.ZOO.items() if not entry.unsupported]
REFUSED = [name for name, entry in zoo.ZOO.items() if entry.unsupported]
MODEL_OPSETS = [(name, opset) for name in SUPPORTED for opset in zoo.ZOO[name].opsets]
OPSET17 = [(name, 17) for name in SUPPORTED]
NON_ATTENTION = [(name, opset) for name, opset in MODEL_OPSETS if zoo.ZOO[name].kind != "transformer"]


@pytest.fixture(scope="session")
def exported(tmp_path_factory):
    """``exported(name, opset)`` -> path of the ONNX file, exported once per session."""
    out_dir = tmp_path_factory.mktemp("zoo")
    cache: dict[tuple[str, int], Path] = {}

    def get(name: str, opset: int = 17) -> Path:
        if (name, opset) not in cache:
            path = out_dir / f"{name}_op{opset}.onnx"
            path.write_bytes(zoo.export(zoo.ZOO[name], opset))
            cache[name, opset] = path
        return cache[name, opset]

    return get


def _mark(name: str, check: str):
    reason = XFAIL.get((name, check))
    return [pytest.mark.xfail(strict=True, reason=reason)] if reason else []


def _params(check: str, pairs=None):
    pairs = MODEL_OPSETS if pairs is None else pairs
    return [pytest.param(name, opset, id=f"{name}-op{opset}", marks=_mark(name, check))
            for name, opset in pairs]


def _cases(name: str) -> list[dict]:
    entry = zoo.ZOO[name]
    return [zoo.feeds(entry, case, np.random.default_rng(10 + i)) for i, case in enumerate(entry.cases)]


def _tol(name: str) -> float:
    return HALF_REL_L2 if zoo.ZOO[name].half else REL_L2


def rel_l2(got: np.ndarray, want: np.ndarray) -> float:
    want64 = np.asarray(want, dtype=np.float64)
    diff = np.linalg.norm(np.asarray(got, dtype=np.float64) - want64)
    return float(diff / max(np.linalg.norm(want64), 1e-30))


def _ort(path, feeds: dict) -> dict:
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


def _assert_close(got: dict, want: dict, tol: float = REL_L2, what: str = "") -> None:
    assert set(got) == set(want), f"{what}outputs {sorted(got)} != {sorted(want)}"
    for key, ref in want.items():
        assert got[key].shape == ref.shape, f"{what}{key}: shape {got[key].shape} != {ref.shape}"
        err = rel_l2(got[key], ref)
        assert err <= tol, f"{what}{key}: relative L2 error {err:.3g} > {tol}"


# -- (a) reference evaluator ---------------------------------------------------------------
@pytest.mark.parametrize("name,opset", _params("reference"))
def test_reference_matches_onnxruntime(name, opset, exported):
    path = exported(name, opset)
    model = netpass.read_model(path)
    for i, feeds in enumerate(_cases(name)):
        _assert_close(netpass.reference.infer(model, feeds), _ort(path, feeds), _tol(name),
                      what=f"case {i}: ")


@pytest.mark.parametrize("name", REFUSED)
def test_unsupported_op_is_refused_clearly(name, exported):
    """Models whose ONNX ops netpass has no rule for fail at import, naming op and node."""
    op = zoo.ZOO[name].unsupported
    with pytest.raises(netpass.errors.UnsupportedOpError, match=f"unsupported op '{op}' at opset 17"):
        netpass.read_model(exported(name))


# -- (b) GNA pipeline ----------------------------------------------------------------------
def _static_pipeline(name: str, path: Path):
    model = netpass.read_model(path)
    feeds = _cases(name)[0]
    model.reshape({k: list(v.shape) for k, v in feeds.items()})
    original = model.clone()
    manager = Manager()
    manager.register_pass(GnaTransformationsPipeline())
    manager.run_passes(model)
    return original, model, feeds


@pytest.mark.parametrize("name,opset", _params("pipeline"))
def test_gna_pipeline_keeps_outputs(name, opset, exported):
    original, model, feeds = _static_pipeline(name, exported(name, opset))
    want, got = netpass.reference.infer(original, feeds), netpass.reference.infer(model, feeds)
    for key, ref in want.items():
        assert got[key].shape == ref.shape, key
        scale = max(float(np.abs(ref).max()), 1e-6)
        err = float(np.abs(got[key].astype(np.float64) - ref).max()) / scale
        assert err <= PIPELINE_REL, f"{key}: relative error {err:.3g}"


@pytest.mark.parametrize("name,opset", _params("gna_ops"))
def test_gna_pipeline_leaves_only_gna_ops(name, opset, exported):
    original, model, _ = _static_pipeline(name, exported(name, opset))
    had = {n.type_name for n in original.get_ordered_ops()}
    left = {n.type_name for n in model.get_ordered_ops()}
    assert not left & FORBIDDEN, f"{sorted(left & FORBIDDEN)} remain"
    if had & {"Convolution", "GroupConvolution"}:
        assert "GNAConvolution" in left
    if "MaxPool" in had:
        assert "GNAMaxPool" in left


@pytest.mark.parametrize("name,opset", _params("layout", NON_ATTENTION))
def test_gna_pipeline_leaves_layout_ops_at_edges(name, opset, exported):
    _, model, _ = _static_pipeline(name, exported(name, opset))
    bad = [(n.type_name, n.friendly_name) for n in interior_layout_ops(model)]
    assert not bad, f"layout ops inside the graph: {bad}"


# -- (c) compile_model ---------------------------------------------------------------------
@pytest.mark.parametrize("name,opset,device", [
    pytest.param(name, opset, device, id=f"{name}-op{opset}-{device}",
                 marks=_mark(name, f"compile-{device}"))
    for name, opset in MODEL_OPSETS for device in (RUNTIME_DEVICE, "REFERENCE")])
def test_compiled_model_matches_onnxruntime(name, opset, device, exported):
    """Every case, then every case again in reverse order and once more in order, in the same
    request: the second round meets shapes it has seen (the runtime's symbolic mode and
    per-binding records; step plans are built), the third replays the step plans."""
    path = exported(name, opset)
    req = netpass.compile_model(path, device=device).create_infer_request()
    cases = _cases(name)
    refs = [_ort(path, feeds) for feeds in cases]
    order = list(range(len(cases)))
    order = order + order[::-1] + order
    for i in order:
        _assert_close(req.infer(cases[i]), refs[i], _tol(name), what=f"case {i}: ")


@pytest.mark.parametrize("name,opset", _params("legacy", NON_ATTENTION))
def test_compiled_static_network_is_gna_legal(name, opset, exported):
    """Given static shapes (as GNA compiles), the legacy network holds no Gather and only
    Permutes GNA runs; edge ones went to the host-side pre/post models."""
    model = netpass.read_model(exported(name, opset))
    feeds = _cases(name)[0]
    model.reshape({k: list(v.shape) for k, v in feeds.items()})
    cm = netpass.compile_model(model, device="REFERENCE")
    bad = []
    for layer in cm.network.layers():
        if layer.type == "Permute":
            _, src, port = layer.inputs[0]
            shape = cm.network.layer(src).out_shapes[port].to_shape()
            if not is_transpose_supported(shape):
                bad.append((layer.type, layer.name, shape))
        elif layer.type == "Gather":
            bad.append((layer.type, layer.name))
    assert not bad, f"layout layers in the legacy network: {bad}"


# -- (d) serialization round trips ---------------------------------------------------------
@pytest.mark.parametrize("name,opset", _params("ir_round_trip"))
def test_ir_round_trip(name, opset, exported, tmp_path):
    model = netpass.read_model(exported(name, opset))
    netpass.save_model(model, tmp_path / "m.xml")
    again = netpass.read_model(tmp_path / "m.xml")
    for i, feeds in enumerate(_cases(name)):
        _assert_close(netpass.reference.infer(again, feeds), netpass.reference.infer(model, feeds),
                      tol=1e-6, what=f"case {i}: ")


@pytest.mark.parametrize("name,opset", _params("openvino_ir", OPSET17))
def test_ir_runs_in_openvino(name, opset, exported, tmp_path):
    """The IR netpass writes is OpenVINO's: its CPU plugin (f32) gives onnxruntime's outputs."""
    ov = pytest.importorskip("openvino")
    path = exported(name, opset)
    netpass.save_model(netpass.read_model(path), tmp_path / "m.xml")
    core = ov.Core()
    compiled = core.compile_model(core.read_model(str(tmp_path / "m.xml")), "CPU",
                                  {"INFERENCE_PRECISION_HINT": "f32"})
    for i, feeds in enumerate(_cases(name)):
        res = compiled(feeds)
        got = {n: np.asarray(res[out]) for out in compiled.outputs for n in out.get_names()}
        want = _ort(path, feeds)
        _assert_close({k: got[k] for k in want}, want, _tol(name), what=f"case {i}: ")


@pytest.mark.parametrize("name,opset", _params("onnx_round_trip"))
def test_onnx_round_trip(name, opset, exported, tmp_path):
    path = exported(name, opset)
    netpass.save_model(netpass.read_model(path), tmp_path / "m.onnx")
    for i, feeds in enumerate(_cases(name)):
        _assert_close(_ort(tmp_path / "m.onnx", feeds), _ort(path, feeds), what=f"case {i}: ")
