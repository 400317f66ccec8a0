"""The decode attention kernel (kernels.decode.attention_decode) and the key/value append it
takes over from the cache's Concat (kv_append), against the reference evaluator on random
data with odd shapes: few query rows over many keys (chunks of CHUNK), head and value widths
below and above the work-group's half, masks, scales, the NaN guard, and a cache grown in
place over decode steps of 1 and 3 rows after a longer prompt."""
from __future__ import annotations

import numpy as np
import pytest
from graph_blocks import ints64, randn_f32, rel_l2

import netpass
from netpass import Model, opset
from netpass.core.shape import PartialShape
from netpass.runtime import Program, compile_program
from netpass.runtime.kernels.decode import CHUNK, DECODE_ROWS
from netpass.testing import RUNTIME_DEVICE


def _attention_model(d: int, dv: int, masked: bool, guard: bool):
    """q [b, h, m, d] against k [b, h, n, d] (read transposed), v [b, h, n, dv]: scores scaled,
    plus an additive mask [b, 1, m, n] (with -inf entries when ``guard``), softmax, NaN
    guard, @ v, heads moved next to the values."""
    q = opset.parameter([-1, -1, -1, d], np.float32, name="q")
    k = opset.parameter([-1, -1, -1, d], np.float32, name="k")
    v = opset.parameter([-1, -1, -1, dv], np.float32, name="v")
    params = [q, k, v]
    scores = opset.multiply(opset.matmul(q, k, False, True), np.float32(d ** -0.5))
    if masked:
        mask = opset.parameter([-1, 1, -1, -1], np.float32, name="mask")
        params.append(mask)
        scores = opset.add(scores, mask)
    p = opset.softmax(scores, -1)
    if guard:
        p = opset.select(opset.is_nan(p), np.float32(0.0), p)
    y = opset.transpose(opset.matmul(p, v, False, False), ints64([0, 2, 1, 3]))
    return Model([opset.result(y, name="y")], params)


@pytest.mark.parametrize("b, h, m, n, d, dv", [
    (1, 3, 1, 1, 5, 5),            # one key
    (2, 3, 1, 131, 33, 64),        # value columns split over slices
    (1, 2, 3, 517, 64, 96),        # past one chunk of keys; 128-wide value slots
    (1, 1, DECODE_ROWS, 1030, 80, 130),  # columns per item (value wider than half)
])
@pytest.mark.parametrize("masked", [False, True])
def test_decode_kernel_matches_the_reference(rng, b, h, m, n, d, dv, masked):
    model = _attention_model(d, dv, masked, False)
    prog = Program.from_model(model)
    assert sum(x.kind == "FusedAttention" for x in prog.nodes) == 1
    assert n > CHUNK or n < 200  # (both sides of the chunk size are covered)
    feeds = {"q": randn_f32(rng, b, h, m, d), "k": randn_f32(rng, b, h, n, d), "v": randn_f32(rng, b, h, n, dv)}
    if masked:
        feeds["mask"] = np.where(rng.random((b, 1, m, n)) < 0.3, -1e4, 0).astype(np.float32)
    got = compile_program(model, RUNTIME_DEVICE).create_infer_request().infer(feeds)["y"]
    want = netpass.reference.infer(model, feeds)["y"]
    assert got.shape == want.shape and rel_l2(got, want) <= 1e-5


def test_fully_masked_rows_give_zeros_with_the_guard(rng):
    model = _attention_model(16, 16, True, True)
    feeds = {"q": randn_f32(rng, 1, 2, 2, 16), "k": randn_f32(rng, 1, 2, 9, 16), "v": randn_f32(rng, 1, 2, 9, 16),
             "mask": np.zeros((1, 1, 2, 9), np.float32)}
    feeds["mask"][:, :, 1] = -np.inf
    got = compile_program(model, RUNTIME_DEVICE).create_infer_request().infer(feeds)["y"]
    want = netpass.reference.infer(model, feeds)["y"]
    np.testing.assert_array_equal(got[:, 1], 0.0)
    assert rel_l2(got, want) <= 1e-5


def _cache_layer(h: int = 3, d: int = 12, e: int = 24, lead: int = 0):
    """A decoder layer's attention over a key/value cache held in variables, laid out as GPT-2
    exports it: x [1, s, e] projected to q, k, v by one MatMul and a Split, each [1, s, h, d]
    transposed to [1, h, s, d]; k and v appended to their caches (Concat along the sequence,
    Assign); q @ k^T over the transposed cache, a causal mask for the s new rows, softmax,
    @ v, heads moved back. ``lead``: columns of the projection before q, k and v, projected
    on to an output ``z`` of their own."""
    rng = np.random.default_rng(11)
    x = opset.parameter([1, "seq", e], np.float32, name="x")
    mask = opset.parameter([1, 1, "seq", "total"], np.float32, name="mask")
    qkv = opset.matmul(x, randn_f32(rng, e, lead + 3 * h * d), False, False)
    pieces = opset.variadic_split(qkv, ints64(-1), ints64([lead] + [h * d] * 3)).outputs() \
        if lead else [None] + opset.split(qkv, ints64(-1), 3).outputs()
    outputs = [opset.result(opset.matmul(pieces[0], randn_f32(rng, lead, 2), False, False),
                            name="z")] if lead else []
    heads = [opset.transpose(opset.reshape(piece, ints64([0, 0, h, d]), True), ints64([0, 2, 1, 3]))
             for piece in pieces[1:]]
    q, k, v = heads
    caches, sinks = [], []
    for name, new in (("k", k), ("v", v)):
        past = opset.read_value(name, np.float32, PartialShape([1, h, -1, d]))
        grown = opset.concat([past, new], 2)
        caches.append(grown)
        sinks.append(opset.assign(grown, name))
    kt = opset.transpose(caches[0], ints64([0, 1, 3, 2]))
    scores = opset.add(opset.multiply(opset.matmul(q, kt, False, False), np.float32(d ** -0.5)),
                       mask)
    att = opset.matmul(opset.softmax(scores, -1), caches[1], False, False)
    y = opset.transpose(att, ints64([0, 2, 1, 3]))
    return Model([opset.result(y, name="y")] + outputs, [x, mask], "cache_layer", sinks=sinks)


def _causal(s: int, total: int) -> np.ndarray:
    pos = np.arange(total - s, total)[:, None]
    return np.where(np.arange(total)[None] <= pos, 0, -1e9).astype(np.float32)[None, None]


@pytest.mark.parametrize("lead", [0, 1])
def test_the_attention_appends_decode_steps_to_the_cache(rng, lead):
    """(``lead`` 1: the new keys' rows start at an odd float, so the kernel reads them one
    float at a time; else as float4 runs)"""
    model = _cache_layer(lead=lead)
    cm = compile_program(model, RUNTIME_DEVICE)
    att = next(n for n in cm.program.nodes if n.kind == "FusedAttention")
    appends = [n for n in cm.program.nodes if n.state_role == "append"]
    assert att.subgraph.appends == 2 and all(c.append_by is att for c in appends)
    split = next(n for n in cm.program.nodes if n.kind in ("Split", "VariadicSplit"))
    assert split.strided_view  # (the new keys' and values' Transposes are views)
    req = cm.create_infer_request()
    ref_vars: dict = {}
    total = 0
    steps = [13] + [1] * 6 + [3] + [1] * 4  # a prompt (copied), then appended steps
    for s in steps:
        total += s
        feeds = {"x": randn_f32(rng, 1, s, 24), "mask": _causal(s, total)}
        before = dict(req.stats)
        got = req.infer(feeds)["y"]
        want = netpass.reference.infer(model, feeds, variables=ref_vars)["y"]
        assert rel_l2(got, want) <= 1e-5, (s, total)
        launches = req.stats["kernels_enqueued"] - before["kernels_enqueued"]
        if s <= DECODE_ROWS:
            assert launches == 2 + bool(lead)  # the projections and the attention: no copies
    for state in req.query_state():
        np.testing.assert_allclose(state.state, ref_vars[state.name], rtol=1e-4, atol=1e-5)


def test_appending_past_a_chunk_of_keys_and_into_a_regrown_buffer(rng):
    """A cache set to more than a chunk of keys, then steps that fill its room and make the
    variables' buffers grow (the past copied once, the new rows still appended by the
    kernel)."""
    model = _cache_layer()
    cm = compile_program(model, RUNTIME_DEVICE)
    req = cm.create_infer_request()
    start = {"k": randn_f32(rng, 1, 3, CHUNK + 70, 12), "v": randn_f32(rng, 1, 3, CHUNK + 70, 12)}
    for state in req.query_state():
        state.state = start[state.name]
    ref_vars = dict(start)
    total = CHUNK + 70
    for _ in range(130):  # (PREALLOC_STEPS of room: the last steps reallocate)
        total += 1
        feeds = {"x": randn_f32(rng, 1, 1, 24), "mask": _causal(1, total)}
        got = req.infer(feeds)["y"]
        want = netpass.reference.infer(model, feeds, variables=ref_vars)["y"]
        assert rel_l2(got, want) <= 1e-5, total
    assert req.stats["state_allocations"] > 2


def test_unaligned_key_and_value_rows_take_the_scalar_loads(rng):
    """k and v as views into wider tensors at an odd offset (their rows 17 floats apart): the
    float4 runs do not apply (checked per launch), the scalar loads give the same result."""
    d = 16
    q = opset.parameter([1, 2, -1, d], np.float32, name="q")
    kw = opset.parameter([1, 2, -1, d + 1], np.float32, name="kw")
    vw = opset.parameter([1, 2, -1, d + 1], np.float32, name="vw")
    cut = [opset.slice(t, ints64([1]), ints64([d + 1]), ints64([1]), ints64([3])) for t in (kw, vw)]
    p = opset.softmax(opset.matmul(q, cut[0], False, True), -1)
    model = Model([opset.result(opset.matmul(p, cut[1], False, False), name="y")], [q, kw, vw])
    prog = Program.from_model(model)
    assert all(n.strided_view for n in prog.nodes if n.kind == "Slice")
    feeds = {"q": randn_f32(rng, 1, 2, 3, d), "kw": randn_f32(rng, 1, 2, 41, d + 1),
             "vw": randn_f32(rng, 1, 2, 41, d + 1)}
    got = compile_program(model, RUNTIME_DEVICE).create_infer_request().infer(feeds)["y"]
    assert rel_l2(got, netpass.reference.infer(model, feeds)["y"]) <= 1e-5


@pytest.fixture
def key_splits(monkeypatch):
    """The decode kernel's key splits on any device: towards 64 work-groups per compute unit
    (MAX_SPLITS runs per row on PoCL's two units)."""
    from netpass.runtime.kinds import attention as attention_kind
    monkeypatch.setattr(attention_kind, "DECODE_SPLIT_WAVES", 64)


def _ran_splits(req) -> bool:
    net = req.network if hasattr(req, "network") else req._runtime_request.network
    return any("da_count" in key[2] for key in net.kernel_objects)


@pytest.mark.parametrize("b, h, m, n, d, dv", [
    (1, 3, 1, 131, 33, 64),        # runs of 33 keys
    (1, 3, 1, 5, 8, 8),            # fewer keys than runs: empty runs
    (1, 1, 2, 4200, 16, 16),       # runs longer than a chunk
    (2, 2, 3, 300, 64, 96),        # several rows and batches
])
@pytest.mark.parametrize("masked", [False, True])
def test_key_splits_match_the_reference(rng, key_splits, b, h, m, n, d, dv, masked):
    model = _attention_model(d, dv, masked, False)
    feeds = {"q": randn_f32(rng, b, h, m, d), "k": randn_f32(rng, b, h, n, d), "v": randn_f32(rng, b, h, n, dv)}
    if masked:  # (whole runs masked out as well)
        feeds["mask"] = np.where(rng.random((b, 1, m, n)) < 0.3, -1e4, 0).astype(np.float32)
        feeds["mask"][..., : n // 2] = -np.inf
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    for _ in range(2):  # (the second launch finds the arrival counts set back to 0)
        got = req.infer(feeds)["y"]
        want = netpass.reference.infer(model, feeds)["y"]
        assert got.shape == want.shape and rel_l2(got, want) <= 1e-5
    assert _ran_splits(req)


def test_key_splits_of_fully_masked_rows_give_zeros_with_the_guard(rng, key_splits):
    model = _attention_model(16, 16, True, True)
    feeds = {"q": randn_f32(rng, 1, 2, 2, 16), "k": randn_f32(rng, 1, 2, 40, 16), "v": randn_f32(rng, 1, 2, 40, 16),
             "mask": np.zeros((1, 1, 2, 40), np.float32)}
    feeds["mask"][:, :, 1] = -np.inf
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    got = req.infer(feeds)["y"]
    np.testing.assert_array_equal(got[:, 1], 0.0)
    assert rel_l2(got, netpass.reference.infer(model, feeds)["y"]) <= 1e-5 and _ran_splits(req)


def test_key_splits_append_decode_steps_into_a_regrown_cache(rng, key_splits):
    """Each new row appended by the run that holds it, over steps of 1 and 3 rows and the
    variables' buffers regrown; the kernel has a phase form (a persistent step's phase)."""
    from netpass.runtime.kernels import decode
    from netpass.runtime.kernels.phase import phase_of
    model = _cache_layer()
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    ref_vars: dict = {}
    total = 0
    for s in [13] + [1] * 60 + [3] + [1] * 80:
        total += s
        feeds = {"x": randn_f32(rng, 1, s, 24), "mask": _causal(s, total)}
        got = req.infer(feeds)["y"]
        want = netpass.reference.infer(model, feeds, variables=ref_vars)["y"]
        assert rel_l2(got, want) <= 1e-5, (s, total)
    for state in req.query_state():
        np.testing.assert_allclose(state.state, ref_vars[state.name], rtol=1e-4, atol=1e-5)
    assert _ran_splits(req) and req.stats["state_allocations"] > 2
    assert phase_of(decode.attention_decode([], [], 0, 12, 12, False, True, True)) is not None


def test_an_attention_left_to_the_per_primitive_path_reads_current_views(rng, monkeypatch):
    """A decode loop's attention that no affine form fits (here none does) takes the
    per-primitive path in the replay; the views its length family elided (the transposed
    cache, the heads' Reshapes) are brought up to the step's shapes before it (length_plan's
    ``pre``), so it reads the grown cache."""
    from netpass.runtime import length_steps
    monkeypatch.setattr(length_steps.LinKernel, "fit", staticmethod(lambda *a: None))
    model = _cache_layer()
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    ref_vars: dict = {}
    total = 0
    for s in [13] + [1] * 12:
        total += s
        feeds = {"x": randn_f32(rng, 1, s, 24), "mask": _causal(s, total)}
        got = req.infer(feeds)["y"]
        want = netpass.reference.infer(model, feeds, variables=ref_vars)["y"]
        assert rel_l2(got, want) <= 1e-5, total
