"""Whole models through the OpenCL runtime (PoCL, or the device ``NETPASS_TEST_DEVICE``
names): one infer request fed several input shapes in turn, outputs equal to
netpass.reference.infer within 1e-4 relative L2; and the growing-sequence behaviour of the
predictor, pool and caches."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import netpass
from netpass.runtime import compile_program
from netpass.runtime.models import gpt_decoder
from netpass.testing import RUNTIME_DEVICE

ROOT = Path(__file__).resolve().parents[2]
TOL = 1e-4


def _rel_l2(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-12))


def _check(model, feeds_list, config=None):
    """One request over the feeds, then over them again in reverse order and once more in
    order: the second round meets shapes it has seen (symbolic mode with per-binding records;
    step plans are built), the third replays the step plans."""
    req = compile_program(model, RUNTIME_DEVICE, config).create_infer_request()
    refs = [netpass.reference.infer(model, feeds) for feeds in feeds_list]
    order = list(range(len(feeds_list)))
    order = order + order[::-1] + order
    for i in order:
        feeds, ref = feeds_list[i], refs[i]
        out = req.infer(feeds)
        for name, r in ref.items():
            assert out[name].shape == r.shape, (name, out[name].shape, r.shape)
            assert _rel_l2(out[name], r) <= TOL, (name, feeds_shapes(feeds), _rel_l2(out[name], r))
    return req


def feeds_shapes(feeds):
    return {k: v.shape for k, v in feeds.items()}


def _example_feeds(model, case: int, rng):
    feeds = {}
    for p in model.parameters:
        ps = p.output(0).partial_shape
        shape = [d.min if d.is_static else (2, 3, 5)[case] + 3 * i for i, d in enumerate(ps)]
        feeds[p.friendly_name] = rng.standard_normal(shape).astype(p.output(0).element_type.dtype)
    return feeds


EXAMPLES = sorted(p.name for p in (ROOT / "examples").glob("*.onnx"))


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_models(name):
    model = netpass.read_model(ROOT / "examples" / name)
    rng = np.random.default_rng(7)
    _check(model, [_example_feeds(model, c, rng) for c in range(3)])


@pytest.fixture(scope="module")
def torch_export(tmp_path_factory):
    pytest.importorskip("torch")
    sys.path.insert(0, str(ROOT / "tests" / "models"))
    import torch_models
    out_dir = tmp_path_factory.mktemp("runtime_torch_models")
    cache: dict = {}

    def get(name: str):
        if name not in cache:
            cache[name] = torch_models.EXPORTERS[name](out_dir)
        return cache[name]
    return get


@pytest.mark.parametrize("name", ["kws_cnn", "resnet", "lstm_speech", "gpt", "gpt_past"])
def test_torch_exported_models(name, torch_export):
    exp = torch_export(name)
    model = netpass.read_model(exp.path)
    rng = np.random.default_rng(11)
    _check(model, [exp.feeds(case, rng) for case in exp.cases])


def test_gpt_decoder_full_recompute_three_lengths():
    model = gpt_decoder(vocab=256, layers=2, d=64, heads=4, max_seq=64)
    rng = np.random.default_rng(3)
    _check(model, [{"ids": rng.integers(0, 256, (1, s)).astype(np.int64)} for s in (1, 7, 19)])


def _past_feeds(s: int, past: int, layers: int, heads: int, hd: int, rng):
    feeds = {"ids": rng.integers(0, 256, (1, s)).astype(np.int64)}
    for i in range(layers):
        feeds[f"past_k{i}"] = rng.standard_normal((1, heads, past, hd)).astype(np.float32)
        feeds[f"past_v{i}"] = rng.standard_normal((1, heads, past, hd)).astype(np.float32)
    return feeds


def test_gpt_decoder_with_past_three_shapes():
    model = gpt_decoder(vocab=256, layers=2, d=64, heads=4, max_seq=64, past=True)
    rng = np.random.default_rng(4)
    _check(model, [_past_feeds(s, p, 2, 4, 16, rng) for s, p in ((1, 1), (3, 5), (1, 12))])


# -- growing sequences -------------------------------------------------------------------------
GROW = dict(vocab=256, layers=2, d=64, heads=4, max_seq=128)


def _grow(config=None, steps: int = 64):
    model = gpt_decoder(**GROW)
    req = compile_program(model, RUNTIME_DEVICE, config).create_infer_request()
    rng = np.random.default_rng(5)
    capacity_changes: dict[str, int] = {}
    last: dict[str, int] = {}
    for s in range(1, steps + 1):
        out = req.infer({"ids": rng.integers(0, GROW["vocab"], (1, s)).astype(np.int64)})
        for inst in req.network.insts:
            cap = inst.capacity[0] if inst.capacity else 0
            if s > 3 and cap != last.get(inst.node.id, cap):
                capacity_changes[inst.node.id] = capacity_changes.get(inst.node.id, 0) + 1
            last[inst.node.id] = cap
    return model, req, out, capacity_changes


@pytest.fixture(scope="module")
def grown():
    return _grow()


def test_growing_sequence_is_correct(grown):
    model, req, out, _ = grown
    ids = np.random.default_rng(5)
    feeds = None
    for s in range(1, 65):
        feeds = {"ids": ids.integers(0, GROW["vocab"], (1, s)).astype(np.int64)}
    assert _rel_l2(out["logits"], netpass.reference.infer(model, feeds)["logits"]) <= TOL


def test_growing_tensors_reallocate_about_once_every_ten_steps(grown):
    _, _, _, changes = grown
    # steps 4..64 grow every tensor linearly: at most one reallocation per ~10 steps
    assert changes and max(changes.values()) <= 7


def test_predictor_cuts_allocations_to_under_a_third(grown):
    _, req, _, _ = grown
    _, off, _, _ = _grow({"MEM_PREALLOCATION_OPTIONS": "0 0 0 1.0"})
    assert req.stats["allocations"] * 3 <= off.stats["allocations"]


def test_repeated_lengths_hit_the_impl_cache(grown):
    model, req, _, _ = grown
    misses = req.stats["impl_cache_misses"]
    hits = req.stats["impl_cache_hits"]
    rng = np.random.default_rng(6)
    for s in (62, 63, 64):  # recent lengths: still in the 300-entry LRU cache
        req.infer({"ids": rng.integers(0, GROW["vocab"], (1, s)).astype(np.int64)})
    assert req.stats["impl_cache_misses"] == misses
    assert req.stats["impl_cache_hits"] > hits


def test_shape_of_subgraphs_run_no_kernels(grown):
    _, req, _, _ = grown
    sub = [i for i in req.network.insts if i.node.in_shape_of_subgraph]
    assert sub and all(i.impl is None and not i.kernels for i in sub)


def test_decoding_with_past_one_token_at_a_time():
    cfg = dict(vocab=256, layers=2, d=64, heads=4, max_seq=128, past=True)
    model = gpt_decoder(**cfg)
    results = {}
    for opts in (None, "0 0 0 1.0"):
        req = compile_program(model, RUNTIME_DEVICE, {"MEM_PREALLOCATION_OPTIONS": opts} if opts else None) \
            .create_infer_request()
        rng = np.random.default_rng(8)
        feeds = _past_feeds(1, 1, 2, 4, 16, rng)
        for _ in range(40):
            out = req.infer(feeds)
            nxt = {"ids": rng.integers(0, 256, (1, 1)).astype(np.int64)}
            for i in range(2):
                nxt[f"past_k{i}"] = out[f"present_k{i}"]
                nxt[f"past_v{i}"] = out[f"present_v{i}"]
            last_feeds, feeds = feeds, nxt
        ref = netpass.reference.infer(model, last_feeds)
        assert _rel_l2(out["logits"], ref["logits"]) <= TOL
        assert out["present_k1"].shape == (1, 4, 41, 16)
        results[opts] = req.stats["allocations"]
    assert results[None] * 3 <= results["0 0 0 1.0"]
