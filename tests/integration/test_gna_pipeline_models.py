"""GnaTransformationsPipeline on whole models: the committed examples, torch-exported typical
models (KWS CNN, LSTM/GRU speech, transpose-heavy, 1-D conv) and seeded random CNNs built
here (models that are in no repository).

After the pipeline: outputs equal the original's within 1e-5 relative (to the output's largest
magnitude); every Convolution/MaxPool became its GNA op; every Transpose left is one GNA runs or
sits at a model edge (behind single-consumer Reshapes), every Gather sits at an edge (others
were folded into constants); no Divide, LSTM/GRU cell or sequence, Slice or StridedSlice
remains (a slice of data became a CropIE, a slice of shape math was folded). Dynamic inputs are
first given concrete shapes: batch 1, other dims 3 (GNA compiles static models of batch 1).
"""
from __future__ import annotations

import io
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import netpass
from netpass import Model, opset
from netpass.ngraph_passes.gna import GnaTransformationsPipeline, interior_layout_ops
from netpass.passes import Manager
from netpass.reference import infer
from netpass.testing import random_inputs

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FORBIDDEN = {"Divide", "LSTMCell", "LSTMSequence", "GRUCell", "GRUSequence", "Slice", "StridedSlice",
             "Convolution", "MaxPool"}
# The transformer's attention multiplies 4-D per-head tensors: the head Transposes between its
# batched MatMuls are real data reorders that no sinking removes, so they stay as Gathers.
EDGE_EXEMPT = {"transformer_block", "gpt", "gpt_past"}


def _static(model: Model) -> None:
    """GNA compiles static models of batch 1: a dynamic batch becomes 1, other dims 3."""
    shapes = {}
    for name, p in zip(model.input_names, model.parameters):
        ps = p.output(0).partial_shape
        shapes[name] = [d.get_length() if d.is_static else (1 if i == 0 else 3) for i, d in enumerate(ps)]
    model.reshape(shapes)


def _pipeline(model: Model) -> tuple[dict, dict]:
    _static(model)
    feeds = random_inputs(model, seed=7)
    original = model.clone()
    had = {n.type_name for n in original.get_ordered_ops()}
    manager = Manager()
    manager.register_pass(GnaTransformationsPipeline())
    manager.run_passes(model)
    return had, {"got": infer(model, feeds), "want": infer(original, feeds)}


def _check(name: str, model: Model) -> None:
    had, outs = _pipeline(model)
    for key, want in outs["want"].items():
        got = outs["got"][key]
        scale = max(float(np.abs(want).max()), 1e-6)
        assert got.shape == want.shape
        assert float(np.abs(got - want).max()) / scale <= 1e-5, f"{name}: output {key} differs"
    left = {n.type_name for n in model.get_ordered_ops()}
    assert not left & FORBIDDEN, f"{name}: {sorted(left & FORBIDDEN)} remain"
    if "Convolution" in had:
        assert "GNAConvolution" in left
    if "MaxPool" in had:
        assert "GNAMaxPool" in left
    if name not in EDGE_EXEMPT:
        assert not interior_layout_ops(model), f"{name}: {interior_layout_ops(model)} inside the graph"


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.onnx")), ids=lambda p: p.stem)
def test_example_models(path):
    _check(path.stem, netpass.read_model(path))


# -- torch-exported typical models ---------------------------------------------------------
torch = pytest.importorskip("torch")
nn = torch.nn


class KwsCnn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(1, 8, (5, 3), padding=(2, 1)), nn.BatchNorm2d(8), nn.ReLU(),
                                  nn.MaxPool2d(2), nn.Conv2d(8, 16, 3), nn.ReLU(), nn.MaxPool2d((2, 1)))
        self.fc = nn.Linear(16 * 9 * 4, 12)

    def forward(self, x):
        return torch.softmax(self.fc(torch.flatten(self.body(x), 1)), -1)


class LstmSpeech(nn.Module):
    def __init__(self, bidirectional: bool = False) -> None:
        super().__init__()
        self.lstm = nn.LSTM(20, 16, batch_first=True, bidirectional=bidirectional)
        self.fc = nn.Linear(32 if bidirectional else 16, 10)

    def forward(self, x):
        return self.fc(self.lstm(x)[0])


class GruConv1d(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(20, 16, 3)
        self.gru = nn.GRU(16, 8, batch_first=True)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        y = torch.relu(self.conv(x.transpose(1, 2))).transpose(1, 2)
        return self.fc(self.gru(y)[0])[:, 2:7] / 4.0


class TransposeHeavy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 1)
        self.fc = nn.Linear(8 * 6 * 6, 5)

    def forward(self, x):
        y = torch.sigmoid(x.permute(0, 2, 3, 1)) * 2.0
        a, b = torch.split(y, 2, dim=3)
        y = torch.cat([torch.relu(a), torch.tanh(b)], 3).permute(0, 3, 1, 2)
        y = self.conv(y).permute(0, 2, 3, 1)[:, 1:, :, :]
        return self.fc(torch.flatten(y.permute(0, 3, 1, 2)[:, :, :, :6], 1)[:, :288])


TORCH_MODELS = {
    "kws_cnn": (KwsCnn, (1, 1, 40, 12)),
    "lstm_speech": (LstmSpeech, (1, 6, 20)),
    "lstm_bidirectional": (lambda: LstmSpeech(True), (1, 5, 20)),
    "gru_conv1d": (GruConv1d, (1, 9, 20)),
    "transpose_heavy": (TransposeHeavy, (1, 4, 7, 6)),
}


def _export(module, shape) -> Model:
    torch.manual_seed(0)
    module = module().eval()
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (torch.randn(*shape),), buf, dynamo=False, opset_version=17)
    return netpass.read_model(buf.getvalue())


@pytest.mark.parametrize("name", sorted(TORCH_MODELS))
def test_torch_models(name):
    cls, shape = TORCH_MODELS[name]
    _check(name, _export(cls, shape))


def _shared_exporters() -> dict:
    """The typical models of tests/models/torch_models.py (KWS CNN, ResNet, LSTM, GPT)."""
    models_dir = Path(__file__).resolve().parents[1] / "models"
    if not (models_dir / "torch_models.py").exists():
        return {}
    sys.path.insert(0, str(models_dir))
    import torch_models
    return torch_models.EXPORTERS


@pytest.mark.parametrize("name", sorted(_shared_exporters()))
def test_shared_torch_models(name, tmp_path):
    exported = _shared_exporters()[name](tmp_path)
    _check(name, netpass.read_model(exported.path))


# -- seeded random CNNs --------------------------------------------------------------------
def _random_cnn(seed: int) -> Model:
    rng = np.random.default_rng(seed)
    c, h, w = int(rng.integers(1, 4)), int(rng.integers(8, 14)), int(rng.integers(6, 12))
    x = opset.parameter([1, c, h, w], np.float32, "x")
    y = x
    for _ in range(int(rng.integers(1, 3))):
        oc = int(rng.choice([4, 8]))
        k = int(rng.choice([1, 3]))
        wgt = (rng.standard_normal((oc, c, k, k)) * 0.3).astype(np.float32)
        y = opset.convolution(y, opset.constant(wgt), [1, 1], [k // 2] * 2, [k // 2] * 2, [1, 1])
        y = opset.add(y, opset.constant(rng.standard_normal((1, oc, 1, 1)).astype(np.float32)))
        y = opset.relu(y) if rng.integers(0, 2) else opset.sigmoid(y)
        c = oc
        if rng.integers(0, 2) and h >= 4 and w >= 4:
            y = opset.max_pool(y, [2, 2], [1, 1], [0, 0], [0, 0], [2, 2]).output(0)
            h, w = h // 2, w // 2
    if rng.integers(0, 2):
        y = opset.slice(y, [1], [h], [1], [2])
        h -= 1
    flat = opset.reshape(y, [1, -1], False)
    out = opset.matmul(flat, opset.constant(rng.standard_normal((c * h * w, 6)).astype(np.float32) * 0.1), False, False)
    return Model([opset.result(opset.divide(out, opset.constant(np.float32(3.0))), "y")], [x], f"cnn{seed}")


@pytest.mark.parametrize("seed", range(8))
def test_random_cnns(seed):
    _check(f"cnn{seed}", _random_cnn(seed))
