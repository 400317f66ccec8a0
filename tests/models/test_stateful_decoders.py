"""Stateful decoding of transformers decoders (GPT-2, LLaMA-style) exported with their cache.

Each model (random weights, small configs, ``hf_decoders``) is made stateful with
``MakeStateful`` on the pairs ``find_kv_cache_pairs`` finds, compiled under every
``TRANSFORMATIONS`` setting for the reference evaluator and the OpenCL runtime
(``RUNTIME_DEVICE``: PoCL in CI), and generates 32 tokens greedily; the same tokens must come
from the plain export run step by step (its cache fed back as inputs) through netpass and
through onnxruntime, with the logits of every step within rel. L2 1e-4. On the runtime the
cache grows in place in the request's device memory: at most 2 allocations per variable over
128 decode steps, one host wait per token.
"""
from __future__ import annotations

import numpy as np
import pytest

import netpass
from netpass.generation import GreedyDecoder, stateful_decoder
from netpass.ngraph_passes.common import find_kv_cache_pairs
from netpass.testing import RUNTIME_DEVICE

NEW_TOKENS = 32
RTOL_L2 = 1e-4


def _rel_l2(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def _prompt(dec, batch: int = 1, length: int = 6) -> np.ndarray:
    return np.random.default_rng(7).integers(1, dec.vocab, (batch, length))


class _OrtCompiled:
    """onnxruntime behind the face GreedyDecoder needs (ports, requests with ``infer``)."""

    def __init__(self, onnx: bytes, like) -> None:
        import onnxruntime as ort
        self.session = ort.InferenceSession(onnx, providers=["CPUExecutionProvider"])
        self.inputs, self.outputs = like.inputs, like.outputs
        self.names = [o.name for o in self.session.get_outputs()]

    def create_infer_request(self) -> _OrtCompiled:
        return self

    def infer(self, feeds: dict) -> dict:
        return dict(zip(self.names, self.session.run(None, feeds)))


def _check_same_generation(got, want, what: str) -> None:
    np.testing.assert_array_equal(got.tokens, want.tokens, err_msg=what)
    worst = max(_rel_l2(a, b) for a, b in zip(got.logits, want.logits))
    assert worst <= RTOL_L2, f"{what}: logits rel. L2 {worst:.2e}"


def _chunks_equal_onnxruntime(dec, plain, cm, req, ids, chunks, reset=False) -> None:
    """Feed ``ids`` to stateful request ``req`` (of ``cm``) from position 0 in ``chunks``: each
    chunk's logits within rel. L2 ``RTOL_L2`` of onnxruntime's on the plain export fed its
    cache (empty at first); with ``reset``, ``reset_state`` after the last chunk."""
    import onnxruntime as ort
    sess = ort.InferenceSession(dec.onnx, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    pairs = find_kv_cache_pairs(plain)
    cache = {i.name: np.zeros([d if isinstance(d, int) else (1 if k == 0 else 0)
                               for k, d in enumerate(i.shape)], np.float32)
             for i in sess.get_inputs() if i.name in pairs}
    feeder = GreedyDecoder(cm)
    past = 0
    for n in chunks:
        feeds = feeder._feeds(ids[:, past:past + n], past, {})
        got = req.infer(feeds)["logits"]
        want = dict(zip(names, sess.run(None, {**feeds, **cache})))
        assert _rel_l2(got, want["logits"]) <= RTOL_L2, f"chunk of {n} after {past}"
        cache = {p: want[r] for p, r in pairs.items()}
        past += n
    if reset:
        req.reset_state()


@pytest.fixture(scope="module")
def plain_models(hf_decoder):
    """name -> (decoder, plain Model, stateful Model), read and made stateful once."""
    out = {}
    for name in ("gpt2", "llama"):
        dec = hf_decoder(name)
        model = netpass.read_model(dec.onnx)
        out[name] = (dec, model, stateful_decoder(model))
    return out


@pytest.mark.parametrize("device", ["REFERENCE", RUNTIME_DEVICE])
@pytest.mark.parametrize("transformations", ["NONE", "COMMON", "GNA"])
@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_stateful_generation_equals_plain_and_onnxruntime(plain_models, name, transformations,
                                                          device):
    dec, model, stateful = plain_models[name]
    pairs = find_kv_cache_pairs(model)
    assert sorted(pairs) == sorted(dec.past_names)
    assert stateful.input_names == ["input_ids", "attention_mask", "position_ids"]
    assert stateful.output_names == ["logits"]
    config = {"TRANSFORMATIONS": transformations}
    cm_state = netpass.compile_model(stateful, device, config)
    cm_plain = netpass.compile_model(model, device, config)
    prompt = _prompt(dec)
    got = GreedyDecoder(cm_state).generate(prompt, NEW_TOKENS)
    plain = GreedyDecoder(cm_plain, pairs).generate(prompt, NEW_TOKENS)
    ort = GreedyDecoder(_OrtCompiled(dec.onnx, cm_plain), pairs).generate(prompt, NEW_TOKENS)
    assert got.tokens.shape == (1, NEW_TOKENS)
    assert len(set(ort.tokens[0].tolist())) > 3, "degenerate test: the model repeats itself"
    _check_same_generation(plain, ort, "plain export step by step vs onnxruntime")
    _check_same_generation(got, ort, "stateful vs onnxruntime")


@pytest.mark.parametrize("device", ["REFERENCE", RUNTIME_DEVICE])
def test_reset_state_restarts_the_sequence(plain_models, device):
    dec, model, stateful = plain_models["gpt2"]
    cm = netpass.compile_model(stateful, device, {"TRANSFORMATIONS": "COMMON"})
    req = cm.create_infer_request()
    decoder = GreedyDecoder(cm)
    prompt = _prompt(dec)
    first = decoder.generate(prompt, 8, req)
    states = req.query_state()
    assert sorted(s.name for s in states) == sorted(
        p + r for p, r in find_kv_cache_pairs(model).items())
    # the prompt and the 7 tokens fed back are in the cache; the 8th was never fed
    assert {s.state.shape for s in states} == {(1, dec.kv_heads, 6 + 7, dec.head_dim)}
    ids = np.asarray(prompt)
    n = ids.shape[1]
    # without a reset the prompt continues the cached sequence: other logits
    cont = req.infer({"input_ids": ids, "attention_mask": np.ones((1, 13 + n), np.int64),
                      "position_ids": np.arange(13, 13 + n)[None]})["logits"]
    assert _rel_l2(cont[:, -1], first.logits[0]) > 1e-2
    req.reset_state()
    # never set: zeros whose dynamic dims (batch and past here) are 0; the init sub-graph of
    # BuildStateInitializer gives the batch only when an inference reads it
    assert {s.state.shape for s in req.query_state()} == {(0, dec.kv_heads, 0, dec.head_dim)}
    fresh = req.infer({"input_ids": ids, "attention_mask": np.ones_like(ids),
                       "position_ids": np.arange(n)[None]})["logits"]
    assert _rel_l2(fresh[:, -1], first.logits[0]) <= RTOL_L2
    req.reset_state()
    again = decoder.generate(prompt, 8, req)
    np.testing.assert_array_equal(again.tokens, first.tokens)


@pytest.mark.parametrize("device", ["REFERENCE", RUNTIME_DEVICE])
def test_setting_state_continues_from_it(plain_models, device):
    """The cache of the plain model's prefill, set into a fresh request's variables, gives
    the same next-token logits as the plain model fed that cache."""
    dec, model, stateful = plain_models["llama"]
    pairs = find_kv_cache_pairs(model)
    plain = netpass.compile_model(model, "REFERENCE", {"TRANSFORMATIONS": "NONE"})
    cm = netpass.compile_model(stateful, device, {"TRANSFORMATIONS": "NONE"})
    ids = _prompt(dec)
    empty = {n: np.zeros((1, dec.kv_heads, 0, dec.head_dim), np.float32) for n in pairs}
    pos = np.arange(ids.shape[1])[None]
    pre = plain.create_infer_request().infer({"input_ids": ids, "attention_mask":
                                              np.ones_like(ids), "position_ids": pos, **empty})
    nxt = np.array([[5]])
    step = {"input_ids": nxt, "attention_mask": np.ones((1, ids.shape[1] + 1), np.int64),
            "position_ids": np.array([[ids.shape[1]]])}
    want = plain.create_infer_request().infer({**step, **{n: pre[r] for n, r in pairs.items()}})
    req = cm.create_infer_request()
    for state in req.query_state():
        past = next(p for p in pairs if state.name == p + pairs[p])
        state.state = pre[pairs[past]]
    got = req.infer(step)
    assert _rel_l2(got["logits"], want["logits"]) <= RTOL_L2


@pytest.mark.parametrize("device", ["REFERENCE", RUNTIME_DEVICE])
def test_two_requests_hold_separate_states(plain_models, device):
    dec, _, stateful = plain_models["llama"]
    cm = netpass.compile_model(stateful, device, {"TRANSFORMATIONS": "GNA"})
    decoder = GreedyDecoder(cm)
    prompts = [_prompt(dec, length=6), _prompt(dec, length=4) + 1]
    alone = [decoder.generate(p, 10).tokens for p in prompts]
    assert not np.array_equal(alone[0], alone[1])
    requests = [cm.create_infer_request() for _ in prompts]
    ids = [np.asarray(p) for p in prompts]
    past = [0, 0]
    tokens: list[list[int]] = [[], []]
    for _ in range(10):  # the two sequences interleaved, one token each in turn
        for k, req in enumerate(requests):
            n = ids[k].shape[1]
            out = req.infer({"input_ids": ids[k],
                             "attention_mask": np.ones((1, past[k] + n), np.int64),
                             "position_ids": np.arange(past[k], past[k] + n)[None]})
            tokens[k].append(int(out["logits"][0, -1].argmax()))
            past[k] += n
            ids[k] = np.array([[tokens[k][-1]]])
    for k in range(2):
        np.testing.assert_array_equal(np.array([tokens[k]]), alone[k])


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_a_new_request_after_a_grown_one_fills_its_own_caches(plain_models, name):
    """A prompt over empty caches fills them in its attention, through the strides of the
    buffers it gets on the way. Request A grew its caches over a long generation, was reset
    and ran prompt P; a fresh request B then ran P with smaller buffers and took A's
    per-binding records, writing through A's strides past its own buffers (found by a random
    schedule of two requests; valgrind: invalid writes in the attention kernel). B's tokens
    after P must be the ones a request alone gives."""
    dec, model, stateful = plain_models[name]
    config = {"TRANSFORMATIONS": "NONE"}
    cm = netpass.compile_model(stateful, RUNTIME_DEVICE, config)
    decoder = GreedyDecoder(cm)
    prompt = _prompt(dec, length=19)
    grown = cm.create_infer_request()
    decoder.generate(_prompt(dec, length=17), 120, grown)
    for _ in range(3):  # (the prompt's binding checked, then symbolic with its records)
        decoder.generate(prompt, 1, grown)
    fresh = decoder.generate(prompt, 12, cm.create_infer_request())
    like = netpass.compile_model(model, "REFERENCE", config)
    want = GreedyDecoder(_OrtCompiled(dec.onnx, like), find_kv_cache_pairs(model)).generate(
        prompt, 12)
    _check_same_generation(fresh, want, f"{name}: a new request after a grown one")


def _replays_again_as_alone(plain_models, prompt_len: int, warm_requests: int,
                            new_tokens: int) -> None:
    """``warm_requests`` generations of a prompt, each on a new request of a GPT-2's compiled
    model; then one request generates ``new_tokens`` after the same prompt, is reset, and its
    next prompt must replay a step plan (at most 2 shape updates) and decode as alone."""
    dec, model, stateful = plain_models["gpt2"]
    cm = netpass.compile_model(stateful, RUNTIME_DEVICE, {"TRANSFORMATIONS": "NONE"})
    decoder = GreedyDecoder(cm)
    prompt = _prompt(dec, length=prompt_len)
    for _ in range(warm_requests):
        decoder.generate(prompt, 1)
    req = cm.create_infer_request()
    decoder.generate(prompt, new_tokens, req)
    before = req.stats["shape_updates"]
    again = decoder.generate(prompt, 1, req)
    assert req.stats["shape_updates"] - before <= 2  # (the prompt replayed a plan)
    like = netpass.compile_model(model, "REFERENCE", {"TRANSFORMATIONS": "NONE"})
    want = GreedyDecoder(_OrtCompiled(dec.onnx, like), find_kv_cache_pairs(model)).generate(
        prompt, 1)
    _check_same_generation(again, want, "a prompt after reset, replayed")


def test_a_prompt_after_reset_replays_the_plan_new_requests_built(plain_models):
    """Step plans are kept per layout of the variables' buffers. A request reset after a
    short generation has the buffers a new request's prompt gets: it replays the plan that
    new requests built for that prompt (checked, met, then built: each on a new request; its
    strides are the same), and decodes as alone."""
    _replays_again_as_alone(plain_models, 9, 3, 4)


def test_a_request_second_prompt_replays_the_plan_its_first_built(plain_models):
    """A new request's first prompt gives the variables their buffers; its next prompt, after
    reset_state, meets those buffers (a layout key never seen) and replays the plan the
    first one built instead of running the per-primitive path (the binding checked before on
    a request of its own), and decodes as alone."""
    _replays_again_as_alone(plain_models, 11, 1, 5)


@pytest.mark.parametrize("device", ["REFERENCE", RUNTIME_DEVICE])
def test_dynamic_batch_state_takes_the_batch_of_the_input(plain_models, device):
    dec, model, stateful = plain_models["gpt2"]
    cm = netpass.compile_model(stateful, device, {"TRANSFORMATIONS": "NONE"})
    plain = netpass.compile_model(model, "REFERENCE", {"TRANSFORMATIONS": "NONE"})
    prompt = _prompt(dec, batch=3)
    got = GreedyDecoder(cm).generate(prompt, 6)
    ort = GreedyDecoder(_OrtCompiled(dec.onnx, plain), find_kv_cache_pairs(model)).generate(
        prompt, 6)
    _check_same_generation(got, ort, "batch 3, stateful vs onnxruntime")


class _OvRequest:
    """An OpenVINO CPU request behind GreedyDecoder's face (outputs named like ``like``'s)."""

    def __init__(self, xml, like) -> None:
        import openvino as ov
        core = ov.Core()
        compiled = core.compile_model(core.read_model(str(xml)), "CPU",
                                      {"INFERENCE_PRECISION_HINT": "f32"})
        self.request = compiled.create_infer_request()
        self.inputs, self.outputs = like.inputs, like.outputs

    def create_infer_request(self) -> _OvRequest:
        return self

    def reset_state(self) -> None:
        self.request.reset_state()

    def infer(self, feeds: dict) -> dict:
        res = self.request.infer(feeds)
        return {port.name: np.asarray(res[i]) for i, port in enumerate(self.outputs)}


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_stateful_decoder_ir_runs_in_openvino(plain_models, name, tmp_path):
    """netpass's stateful model, saved as IR, generates the same tokens in OpenVINO."""
    pytest.importorskip("openvino")
    dec, _, stateful = plain_models[name]
    netpass.save_model(stateful, tmp_path / "stateful.xml")
    cm = netpass.compile_model(stateful, "REFERENCE", {"TRANSFORMATIONS": "NONE"})
    prompt = _prompt(dec)
    want = GreedyDecoder(cm).generate(prompt, 12)
    got = GreedyDecoder(_OvRequest(tmp_path / "stateful.xml", cm)).generate(prompt, 12)
    _check_same_generation(got, want, "OpenVINO on netpass's stateful IR vs netpass")


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_the_cache_grows_in_place_on_the_device(plain_models, name):
    """An 8-token prompt, then 128 decode steps: every variable appended in place, at most 2
    device allocations per variable over the decode steps (OpenVINO's 128 iterations ahead:
    none here after the prefill's), one host wait per token (the logits: no round trip of the
    cache); the tokens equal the reference evaluator's."""
    dec, _, stateful = plain_models[name]
    cm = netpass.compile_model(stateful, RUNTIME_DEVICE, {"TRANSFORMATIONS": "NONE"})
    variables = 2 * dec.layers
    assert sum(n.state_role == "append" for n in cm.runtime.program.nodes) == variables
    req = cm.create_infer_request()
    ids = _prompt(dec, length=8)
    past, tokens = 0, []
    for step in range(129):
        n = ids.shape[1]
        out = req.infer({"input_ids": ids, "attention_mask": np.ones((1, past + n), np.int64),
                         "position_ids": np.arange(past, past + n)[None]})
        tokens.append(int(out["logits"][0, -1].argmax()))
        past += n
        ids = np.array([[tokens[-1]]])
        if step == 0:
            after_prefill = dict(req.stats)
    decode = {k: req.stats[k] - after_prefill[k]
              for k in ("state_allocations", "state_appends", "host_waits")}
    assert after_prefill["state_allocations"] == variables
    assert decode["state_allocations"] <= 2 * variables
    assert decode == {"state_allocations": decode["state_allocations"],
                      "state_appends": 128 * variables, "host_waits": 128}
    assert {s.state.shape[2] for s in req.query_state()} == {8 + 128}
    want = GreedyDecoder(netpass.compile_model(stateful, "REFERENCE",
                                               {"TRANSFORMATIONS": "NONE"})).generate(
        _prompt(dec, length=8), 129)
    np.testing.assert_array_equal(np.array([tokens]), want.tokens)


def test_llama_rotates_queries_and_keys_in_one_launch_each(plain_models):
    """The rotary embeddings of each layer's queries and keys are one Rotary node each
    (``netpass.runtime.rotary``), the stateful model's generation checked above."""
    from netpass.runtime import Program
    _, _, stateful = plain_models["llama"]
    kinds = [n.kind for n in Program.from_model(stateful).nodes]
    assert kinds.count("Rotary") == 2 * 2 and "Negative" not in kinds


def test_llama_caches_grow_in_place_and_the_attention_appends(plain_models):
    """The export writes ``cat((past_key,), -2)`` in front of the keys' append (a Concat of
    one input, bypassed): both caches of each layer grow in place, and the attention writes
    a decode step's new rows itself (``kv_append``) instead of a copy per variable."""
    from netpass.runtime import Program
    _, _, stateful = plain_models["llama"]
    prog = Program.from_model(stateful)
    appends = [n for n in prog.nodes if n.state_role == "append"]
    assert len(appends) == len(prog.sinks) == 2 * 2
    assert all(n.append_by is not None for n in appends)


@pytest.mark.skipif(RUNTIME_DEVICE != "CPU", reason="tensor cores emulated on PoCL")
@pytest.mark.parametrize("flash", [False, True, "split"])
@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_long_prompts_fill_the_caches_in_the_attention(plain_models, name, flash, monkeypatch):
    """A prompt longer than a decode step over empty caches: the attention reads its new keys
    and values where they are and writes them into the caches itself (no copy launch per
    cache), on the row kernel and on the flash kernel (tensor cores emulated; "split": its
    keys split over work-groups, the first split filling the caches); then a long chunk over
    the filled caches (the appends copy) and single tokens. Every chunk's logits within rel.
    L2 1e-4 of onnxruntime's on the plain export fed its cache."""

    from netpass.runtime.device import Engine, select_device
    from netpass.runtime.kinds import attention as attention_kind
    if flash:
        monkeypatch.setattr(Engine.get(select_device("CPU")), "mma", "emulated")
        monkeypatch.setattr(attention_kind, "FLASH_MIN_M", 4)
    if flash == "split":
        monkeypatch.setattr(attention_kind, "FLASH_SKIP_WAVES", 1e9)
        monkeypatch.setattr(attention_kind, "FLASH_SPLIT_WAVES", {1: 1e9, 3: 1e9})
        monkeypatch.setattr(attention_kind, "FLASH_MIN_CHUNK", 1)
    dec, plain, stateful = plain_models[name]
    cm = netpass.compile_model(stateful, RUNTIME_DEVICE, {"TRANSFORMATIONS": "NONE"})
    req = cm.create_infer_request()
    first = 40 if flash == "split" else 20  # (splits need two key blocks)
    ids = np.random.default_rng(3).integers(1, dec.vocab, (1, first + 14))
    _chunks_equal_onnxruntime(dec, plain, cm, req, ids, (first, 12, 1, 1))
    sources = [key[2] for key in req._runtime_request.network.kernel_objects]
    kernel = "void flash_attention(" if flash else "void attention("
    assert any(kernel in s and "ck_ = CK" in s and ("fa_count" in s) == (flash == "split")
               for s in sources)


@pytest.mark.skipif(RUNTIME_DEVICE != "CPU", reason="tensor cores emulated on PoCL")
@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_a_prompt_on_the_tensor_cores_folds_its_norms_into_the_weights(plain_models, name,
                                                                        monkeypatch):
    """A 70-token prompt's normalized projections (LayerNorm, RMSNorm) on the tensor cores
    (emulated) read their weights with the norm folded in (one launch each), then a chunk
    and single tokens take the other kernels: every chunk's logits within rel. L2 1e-4 of
    onnxruntime's on the plain export fed its cache."""
    from netpass.runtime.device import Engine, select_device
    monkeypatch.setattr(Engine.get(select_device("CPU")), "mma", "emulated")
    dec, plain, stateful = plain_models[name]
    cm = netpass.compile_model(stateful, RUNTIME_DEVICE, {"TRANSFORMATIONS": "NONE"})
    req = cm.create_infer_request()
    ids = np.random.default_rng(5).integers(1, dec.vocab, (1, 70 + 9))
    _chunks_equal_onnxruntime(dec, plain, cm, req, ids, (70, 7, 1, 1))
    assert any("NORM_OUT" in key[2] for key in req._runtime_request.network.kernel_objects)


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_an_attention_on_the_host_writes_the_rows_its_kernel_would(plain_models, name):
    """An attention that writes its caches' new rows (``kv_append``) but runs on the host for
    a shape its kernels do not take: the appends left it the rows, so it writes them before
    reading the caches (a prompt over empty caches, a long chunk, single tokens), and the
    logits stay onnxruntime's (they were NaN: the caches' new rows never written)."""

    from netpass.runtime.kinds import FusedAttention, row_of
    dec, plain, stateful = plain_models[name]
    row = row_of(FusedAttention)
    kernel_impl = row.impl
    object.__setattr__(row, "impl", lambda p, key: None)  # (every shape to the host)
    try:
        cm = netpass.compile_model(stateful, RUNTIME_DEVICE, {"TRANSFORMATIONS": "NONE"})
        req = cm.create_infer_request()
        ids = np.random.default_rng(5).integers(1, dec.vocab, (1, 40))
        # (a prompt of 5, reset_state, then a prompt of 12 over empty caches)
        _chunks_equal_onnxruntime(dec, plain, cm, req, ids, (5,), reset=True)
        _chunks_equal_onnxruntime(dec, plain, cm, req, ids, (12, 1, 1, 20))
        assert req.stats["host_fallback_kinds"].get("FusedAttention", 0) > 0
    finally:
        object.__setattr__(row, "impl", kernel_impl)
