"""End to end: compile_model with the default GNA pipeline equals onnxruntime on the ONNX file.

Each example model runs on the OpenCL CPU device (PoCL) through one infer request fed several
input shapes; relative L2 error <= 1e-4. Layout-only models also must come out GNA-legal: the
legacy network holds no Transpose (Permute) the target cannot run and no Gather.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import netpass
from netpass.testing import RUNTIME_DEVICE

ort = pytest.importorskip("onnxruntime")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RNG = np.random.default_rng(7)

SHAPES = {
    "kws_cnn": [{"input": (1, 1, 49, 10)}],
    "lstm_speech": [{"features": (1, t, 40)} for t in (3, 11, 6)],
    "transformer_block": [{"x": (b, s, 64)} for b, s in ((1, 3), (2, 8), (1, 5))],
    "transpose_heavy": [{"x": (1, 16, 8, 8)}],
}


def rel_l2(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-12))


@pytest.fixture(scope="module", params=[RUNTIME_DEVICE, "REFERENCE"])
def device(request):
    return request.param


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_outputs_equal_onnxruntime(name, device):
    path = EXAMPLES / f"{name}.onnx"
    sess = ort.InferenceSession(str(path))
    cm = netpass.compile_model(path, device=device)
    req = cm.create_infer_request()
    # every shape, then again in reverse and once more in order: the second round meets
    # shapes it has seen (step plans are built), the third replays the plans
    for shapes in SHAPES[name] + SHAPES[name][::-1] + SHAPES[name]:
        feeds = {k: RNG.uniform(-1, 1, s).astype(np.float32) for k, s in shapes.items()}
        got = req.infer(feeds)
        ref = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
        for out_name, value in ref.items():
            assert got[out_name].shape == value.shape
            assert rel_l2(got[out_name], value) <= 1e-4, (name, shapes, out_name)


@pytest.mark.parametrize("name", ["kws_cnn", "transpose_heavy"])
def test_layout_models_become_gna_legal(name):
    from netpass.ngraph_passes.gna import is_transpose_supported
    cm = netpass.compile_model(EXAMPLES / f"{name}.onnx", device="REFERENCE")
    for layer in cm.network.layers():
        assert layer.type != "Gather", layer.name
        if layer.type == "Permute":
            src = layer.inputs[0]
            shape = cm.network.layer(src[1]).out_shapes[src[2]].to_shape()
            assert is_transpose_supported(shape), (layer.name, shape)
    for op in cm.transformed.get_ordered_ops():
        assert op.type_name not in ("Convolution", "MaxPool"), op.friendly_name


def test_common_transformations_option():
    cm = netpass.compile_model(EXAMPLES / "kws_cnn.onnx", device="REFERENCE",
                               config={"TRANSFORMATIONS": "COMMON"})
    types = {op.type_name for op in cm.transformed.get_ordered_ops()}
    assert "Convolution" in types and "GNAConvolution" not in types


def test_dump_writes_each_stage(tmp_path):
    cm = netpass.compile_model(EXAMPLES / "transpose_heavy.onnx", device="REFERENCE")
    written = cm.dump(tmp_path)
    names = {p.name for p in written}
    assert {"0_original.xml", "1_transformed.xml", "3_executable.xml", "2_legacy.dot"} <= names
    assert all(p.exists() for p in written)


def test_edge_transposes_run_on_the_host(device):
    """A layout the target cannot transpose (7*9 = 63 is no multiple of 8) is cut out into the
    pre/post models; the device graph is left with NHWC ops and reshapes only."""
    from netpass import Model, opset
    x = opset.parameter([1, 3, 7, 9], "f32", "x")
    w = RNG.uniform(-0.5, 0.5, (8, 3, 3, 3)).astype(np.float32)
    conv = opset.convolution(x, w, [1, 1], [1, 1], [1, 1], [1, 1])
    model = Model([opset.result(opset.relu(conv), name="y")], [x])
    cm = netpass.compile_model(model, device=device)
    assert [n.type_name for n in cm.prepost.inputs["x"].get_ordered_ops()].count("Transpose") == 1
    assert [n.type_name for n in cm.prepost.outputs["y"].get_ordered_ops()].count("Transpose") == 1
    assert "Permute" not in cm.network.types() and "Gather" not in cm.network.types()
    feeds = {"x": RNG.uniform(-1, 1, (1, 3, 7, 9)).astype(np.float32)}
    ref = netpass.reference.infer(model, feeds)["y"]
    assert rel_l2(cm.create_infer_request().infer(feeds)["y"], ref) <= 1e-5
