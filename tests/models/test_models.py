"""Whole models: netpass's reference evaluator against onnxruntime, and ONNX round trips.

Models: the committed examples (``examples/*.onnx``) and typical architectures exported by
``torch.onnx.export`` (``torch_models.py``; skipped without torch). Each runs at three input
shapes (three seeds where the model's shape is static); outputs must agree within 1e-4
relative L2 error. A round trip (ONNX -> netpass -> ``save_model`` -> onnxruntime) must give
onnxruntime's outputs on the original model, to the same tolerance.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

import netpass

REL_L2 = 1e-4
EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"


def _rand(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


# name -> (cases, feeds(case, rng))
EXAMPLES = {
    "kws_cnn": ([{}, {}, {}], lambda c, rng: {"input": _rand(rng, 1, 1, 49, 10)}),
    "lstm_speech": ([{"t": 1}, {"t": 8}, {"t": 50}],
                    lambda c, rng: {"features": _rand(rng, 1, c["t"], 40)}),
    "transformer_block": ([{"b": 1, "s": 1}, {"b": 2, "s": 7}, {"b": 3, "s": 16}],
                          lambda c, rng: {"x": _rand(rng, c["b"], c["s"], 64)}),
    "transpose_heavy": ([{}, {}, {}], lambda c, rng: {"x": _rand(rng, 1, 16, 8, 8)}),
}
TORCH_MODELS = ["kws_cnn", "resnet", "lstm_speech", "gpt", "gpt_past"]


def rel_l2(got: np.ndarray, expected: np.ndarray) -> float:
    expected = np.asarray(expected, dtype=np.float64)
    diff = np.linalg.norm(np.asarray(got, dtype=np.float64) - expected)
    return float(diff / max(np.linalg.norm(expected), 1e-30))


def _ort(model_path_or_bytes, feeds: dict) -> dict:
    src = str(model_path_or_bytes) if isinstance(model_path_or_bytes, Path) else model_path_or_bytes
    sess = ort.InferenceSession(src, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, feeds)))


def _assert_close(got: dict, expected: dict) -> None:
    assert set(got) == set(expected), f"outputs {sorted(got)} != {sorted(expected)}"
    for name, ref in expected.items():
        assert got[name].shape == ref.shape, f"{name}: shape {got[name].shape} != {ref.shape}"
        err = rel_l2(got[name], ref)
        assert err <= REL_L2, f"{name}: relative L2 error {err:.3g} > {REL_L2}"


def _check_reference(path: Path, feeds_of, cases) -> None:
    model = netpass.read_model(path)
    for i, case in enumerate(cases):
        feeds = feeds_of(case, np.random.default_rng(100 + i))
        _assert_close(netpass.reference.infer(model, feeds), _ort(path, feeds))


def _check_round_trip(path: Path, feeds_of, cases, tmp_path: Path) -> None:
    out = tmp_path / f"{path.stem}.roundtrip.onnx"
    netpass.save_model(netpass.read_model(path), out)
    for i, case in enumerate(cases):
        feeds = feeds_of(case, np.random.default_rng(200 + i))
        _assert_close(_ort(out, feeds), _ort(path, feeds))


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_example_matches_onnxruntime(name):
    cases, feeds = EXAMPLES[name]
    _check_reference(EXAMPLES_DIR / f"{name}.onnx", feeds, cases)


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_example_round_trip(name, tmp_path):
    cases, feeds = EXAMPLES[name]
    _check_round_trip(EXAMPLES_DIR / f"{name}.onnx", feeds, cases, tmp_path)


@pytest.mark.parametrize("name", TORCH_MODELS)
def test_torch_model_matches_onnxruntime(name, torch_export):
    exp = torch_export(name)
    _check_reference(exp.path, exp.feeds, exp.cases)


@pytest.mark.parametrize("name", TORCH_MODELS)
def test_torch_model_round_trip(name, torch_export, tmp_path):
    exp = torch_export(name)
    _check_round_trip(exp.path, exp.feeds, exp.cases, tmp_path)


def test_examples_keep_their_dynamic_axes():
    model = netpass.read_model(EXAMPLES_DIR / "transformer_block.onnx")
    x = model.parameters[0].output(0).partial_shape
    y = model.output("y").partial_shape
    assert [d.symbol.name for d in x[:2]] == ["batch", "seq"]
    assert y[0].symbol is x[0].symbol and y[1].symbol is x[1].symbol and y[2] == 64


def test_transformer_shape_subgraph_keeps_symbols_then_folds_when_static():
    model = netpass.read_model(EXAMPLES_DIR / "transformer_block.onnx")
    reshapes = [n for n in model.get_ordered_ops() if n.type_name == "Reshape"]
    x = model.parameters[0].output(0).partial_shape
    for r in reshapes:
        out = r.output(0).partial_shape
        assert out[0].symbol is x[0].symbol and out[1].symbol is x[1].symbol
    model.reshape({"x": [2, 5, 64]})
    reshapes = [n for n in model.get_ordered_ops() if n.type_name == "Reshape"]
    assert sorted(r.input_value(1).value.tolist() for r in reshapes) == \
        [[2, 5, 4, 16]] * 3 + [[2, 5, 64]]
    assert model.output("y").partial_shape.to_shape() == (2, 5, 64)
