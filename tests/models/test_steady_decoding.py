"""Steady decode steps (runtime.length_steady): a decoding loop's steps where nothing but the
length moved replay the tape's launches without its bookkeeping. Every step must give the
logits the same request gives with steady steps off, bit for bit, with the same counters:
across the variables' regrowth, reset_state and a new prompt, a state set from the host, two
requests taking turns, requests in threads, and persistent steps."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import netpass
from netpass.generation import stateful_decoder
from netpass.runtime.length_steady import Steady
from netpass.testing import RUNTIME_DEVICE

# the tapes and steady steps under test (debug mode runs every step on the checked path instead)
FAST_PATHS = {"TRANSFORMATIONS": "NONE", "DEBUG_CHECKS": False}
COUNTERS = ("kernels_enqueued", "primitives", "skipped", "fused", "state_appends", "reuses",
            "set_arguments", "allocations", "host_waits", "infers", "length_replays",
            "persistent_launches", "persistent_phases")


@pytest.fixture(scope="module")
def decoders(hf_decoder):
    out = {}
    for name in ("gpt2", "llama"):
        dec = hf_decoder(name)
        # (GPT-2 with the last position's logits only, LLaMA with all of them)
        out[name] = (dec, stateful_decoder(netpass.read_model(dec.onnx),
                                           last_logits=name == "gpt2"))
    return out


def _feeds(ids: np.ndarray, past: int) -> dict:
    n = ids.shape[1]
    return {"input_ids": ids, "attention_mask": np.ones((1, past + n), np.int64),
            "position_ids": np.arange(past, past + n)[None]}


class _Sequence:
    """A greedy decoding loop on one request, one step at a time."""

    def __init__(self, req, prompt: np.ndarray) -> None:
        self.req, self.ids, self.past = req, prompt, 0
        self.logits: list = []

    def step(self) -> None:
        out = self.req.infer(_feeds(self.ids, self.past))
        logits = np.array(out["logits"])
        self.logits.append(logits)
        self.past += self.ids.shape[1]
        self.ids = logits[:, -1].argmax(-1)[:, None]


def _no_steady(monkeypatch) -> None:
    monkeypatch.setattr(Steady, "build", staticmethod(lambda *args: None))


def _script(cm, prompt: np.ndarray, dec) -> tuple:
    """A long sequence (the variables grow past their first buffers), reset_state and a
    prompt of another length, then a state set from the host mid-sequence."""
    req = cm.create_infer_request()
    first = _Sequence(req, prompt)
    for _ in range(150):
        first.step()
    req.reset_state()
    second = _Sequence(req, prompt[:, :3])
    for _ in range(20):
        second.step()
    states = req.query_state()
    saved = [s.state for s in states]
    for _ in range(5):
        second.step()
    for s, value in zip(states, saved):  # (back five steps)
        s.state = value
    second.past -= 5
    second.ids = second.logits[-6][:, -1].argmax(-1)[:, None]
    for _ in range(12):
        second.step()
    return first.logits + second.logits, dict(req.stats)


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_steady_steps_give_the_tapes_logits_and_counters(decoders, name, monkeypatch):
    dec, model = decoders[name]
    prompt = np.random.default_rng(4).integers(1, dec.vocab, (1, 6))
    cm = netpass.compile_model(model, RUNTIME_DEVICE, FAST_PATHS)
    got, stats = _script(cm, prompt, dec)
    assert stats["steady_steps"] > 100, stats["steady_steps"]
    _no_steady(monkeypatch)
    cm = netpass.compile_model(model, RUNTIME_DEVICE, FAST_PATHS)
    want, plain = _script(cm, prompt, dec)
    assert plain["steady_steps"] == 0
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    for key in COUNTERS:
        assert stats[key] == plain[key], key


def _turns(cm, prompts: list, steps: int) -> list:
    """Requests of one compiled model taking decode steps in turns."""
    seqs = [_Sequence(cm.create_infer_request(), p) for p in prompts]
    for _ in range(steps):
        for s in seqs:
            s.step()
    return [s.logits for s in seqs]


def test_two_requests_in_turns_and_in_threads(decoders, monkeypatch):
    dec, model = decoders["gpt2"]
    prompts = [np.random.default_rng(seed).integers(1, dec.vocab, (1, 4 + seed))
               for seed in range(2)]
    cm = netpass.compile_model(model, RUNTIME_DEVICE, {"TRANSFORMATIONS": "NONE"})
    turns = _turns(cm, prompts, 40)
    threaded: list = [None, None]
    errors: list = []

    def work(i: int) -> None:
        try:
            threaded[i] = _turns(cm, [prompts[i]], 40)[0]
        except Exception as e:  # (reported below, in the test's thread)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not errors and all(not t.is_alive() for t in threads)
    _no_steady(monkeypatch)
    plain = _turns(netpass.compile_model(model, RUNTIME_DEVICE, {"TRANSFORMATIONS": "NONE"}),
                   prompts, 40)
    for got in (turns, threaded):
        for a, b in zip(got, plain):
            for x, y in zip(a, b):
                np.testing.assert_array_equal(x, y)


def test_steady_steps_gather_into_persistent_kernels(decoders, monkeypatch):
    dec, model = decoders["gpt2"]
    prompt = np.random.default_rng(6).integers(1, dec.vocab, (1, 5))
    config = FAST_PATHS | {"PERSISTENT_STEPS": True}

    def run() -> tuple:
        req = netpass.compile_model(model, RUNTIME_DEVICE, config).create_infer_request()
        seq = _Sequence(req, prompt)
        for _ in range(30):
            seq.step()
        return seq.logits, dict(req.stats)

    got, stats = run()
    assert stats["steady_steps"] > 12 and stats["persistent_launches"] > 0
    _no_steady(monkeypatch)
    want, plain = run()
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    for key in COUNTERS:
        assert stats[key] == plain[key], key


def test_a_dynamo_export_takes_steady_steps(hf_arch_decoder, monkeypatch):
    """The dynamo exporter's GPT-2: its padding mask a GatherND over a grid of aranges, which
    runs as views of the mask (runtime.gather_grid) whose grid, read for its shape alone, a
    step plan replays as shapes; steady steps then give the tape's logits bit for bit. (Its
    logits come from a MatMul, which PoCL would write in place into the output's host array:
    steady steps read outputs from device buffers, so the test gives the device its own
    memory, as a GPU's.)"""
    from netpass.runtime.device import Engine, select_device
    if RUNTIME_DEVICE == "CPU":
        monkeypatch.setattr(Engine.get(select_device("CPU")), "host_memory", False)
    dec = hf_arch_decoder("gpt2", "dynamo")
    model = stateful_decoder(netpass.read_model(dec.onnx), last_logits=True)
    prompt = np.random.default_rng(5).integers(1, dec.vocab, (1, 6))
    cm = netpass.compile_model(model, RUNTIME_DEVICE, FAST_PATHS)
    assert not any(n.kind == "GatherND" for n in cm.runtime.program.nodes)
    got, stats = _script(cm, prompt, dec)
    assert stats["steady_steps"] > 100, stats["steady_steps"]
    _no_steady(monkeypatch)
    want, plain = _script(netpass.compile_model(model, RUNTIME_DEVICE, FAST_PATHS), prompt, dec)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    for key in COUNTERS:
        assert stats[key] == plain[key], key
