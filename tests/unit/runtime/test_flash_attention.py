"""The tensor-core flash attention kernel (netpass.runtime.kernels.flash) against numpy on
random data, on PoCL with the PTX pieces emulated (mma.sync and the butterfly shuffles
through local memory): odd query and key counts (tails of both blocks), head sizes that are
no multiple of 16 and value widths no multiple of 8, several heads, grouped-query heads,
additive masks with -inf, causal masking with block skipping, 16-byte and element copies;
then fused attentions of exported shapes through the runtime with either precision.

Tolerances, relative L2 against float64: TF32 <= 2e-3 (measured 3e-4), 3xTF32 <= 2e-6
(measured 3e-7)."""
from __future__ import annotations

import re

import numpy as np
import pytest
from graph_blocks import ints64, randn_f32, rel_l2_unfloored
from torchvision_heads import torchvision_attention

import netpass
from netpass import Model, opset
from netpass.runtime import Program, compile_program
from netpass.runtime.device import Engine, select_device
from netpass.runtime.kernels import Stage, flash
from netpass.runtime.kernels.common import flit
from netpass.runtime.kinds import attention as attention_kind
from netpass.testing import RUNTIME_DEVICE

pocl_only = pytest.mark.skipif(RUNTIME_DEVICE != "CPU", reason="emulated tensor cores on PoCL")
TOL = {1: 2e-3, 3: 2e-6}


def _launch(q, k, v, mask, split, causal, vec, skip=False, empty_rows="zero_nan", chunk=0,
            launches=1, bound=None, unit_keys=True, shared=None):
    """The kernel over q [heads, m, d], k, v [kv_heads, n, *] and ``scores / 8 + mask``;
    ``chunk``: key blocks per key split (0: none); ``launches``: runs of the same launch (the
    last one's output); ``bound``: the mask is dead past key m + bound (``bounded``);
    ``unit_keys``: the kernel built for the mask's unit key stride (else any stride);
    ``shared``: the mask's value past the bound, its last row read for every query."""
    eng = Engine.get(select_device("CPU"))
    cl = eng.cl
    (heads, m, d), (kv_heads, n, dv) = q.shape, v.shape
    ops = [Stage("({0} * 0.125f)", [("x", None)], "float"), Stage("({0} + {1})", [("x", None), ("in", 0)], "float")]
    cfg = flash.config_for(d, split)
    dead = (0, flash.dead_predicate(np.float32)) if skip else None
    src = flash.flash_attention(cfg, d, dv, split, False, vec, ops, [np.float32], causal, empty_rows,
                                "rn", dead, False, bool(chunk), bound is not None, unit_keys,
                                None if shared is None else (0, shared))
    mf = cl.mem_flags
    bufs = [cl.Buffer(eng.context, mf.COPY_HOST_PTR, hostbuf=x) for x in (q, k, v, mask)]
    out = cl.Buffer(eng.context, mf.READ_WRITE, heads * m * dv * 4)
    cofs = n - m if bound is None else bound
    ints = [0, 0, 0, 0, m, n, d, dv, heads, heads // kv_heads, cofs, 0, m * d, d, 1, 0, n * d, d, 1,
            0, n * dv, dv, 1, 0, m * dv, dv, 1, 0, 0, 0, n, 1]
    m_blocks, splits, extra = -(-m // cfg.bq), 1, []
    if chunk:
        blocks = -(-n // cfg.bkv)
        splits = -(-blocks // chunk)
        ints.append(chunk)
        part = heads * m_blocks * splits * cfg.bq * (-(-dv // 8) * 8 + 2) * 4
        extra = [cl.Buffer(eng.context, mf.READ_WRITE, part),
                 cl.Buffer(eng.context, mf.COPY_HOST_PTR, hostbuf=np.zeros(heads * m_blocks, np.int32))]
    kern = cl.Kernel(eng.build(src.text), src.name)
    kern.set_args(*bufs[:3], out, bufs[3], *extra, np.array(ints, np.int32))
    got = np.full((heads, m, dv), np.nan, np.float32)
    for _ in range(launches):
        cl.enqueue_copy(eng.queue, out, got)
        cl.enqueue_nd_range_kernel(eng.queue, kern, (m_blocks * cfg.threads, heads, splits),
                                   (cfg.threads, 1, 1))
    cl.enqueue_copy(eng.queue, got, out)
    eng.queue.finish()
    return got


def _run_kernel(m, n, d, dv, split, causal, vec, heads, kv_heads, rng, **launch):
    """Scores scaled by 1/8 plus a random mask with -inf holes, through the kernel (``launch``:
    ``_launch``'s keywords); (out, ref)."""
    q, k, v = randn_f32(rng, heads, m, d), randn_f32(rng, kv_heads, n, d), randn_f32(rng, kv_heads, n, dv)
    mask = np.where(rng.random((m, n)) < 0.2, -np.inf, randn_f32(rng, m, n)).astype(np.float32)
    got = _launch(q, k, v, mask, split, causal, vec, **launch)
    kk = np.repeat(k, heads // kv_heads, 0).astype(np.float64)
    vv = np.repeat(v, heads // kv_heads, 0).astype(np.float64)
    s = q.astype(np.float64) @ kk.transpose(0, 2, 1) * 0.125 + mask
    if causal:
        s = np.where(np.arange(n)[None, :] > np.arange(m)[:, None] + n - m, -np.inf, s)
    with np.errstate(invalid="ignore"):
        e = np.exp(s - s.max(-1, keepdims=True))
        want = np.nan_to_num(e / e.sum(-1, keepdims=True) @ vv, nan=0.0)
    return got, want


@pocl_only
@pytest.mark.parametrize("m,n,d,dv,split,causal,vec,heads,kv_heads", [
    (37, 45, 64, 64, 1, False, False, 2, 2),
    (37, 45, 64, 64, 3, True, False, 2, 2),
    (20, 70, 40, 24, 1, False, True, 4, 2),
    (70, 70, 96, 72, 1, True, True, 1, 1),
    (65, 33, 30, 20, 3, False, False, 3, 1),
])
def test_kernel_matches_numpy(m, n, d, dv, split, causal, vec, heads, kv_heads, rng):
    got, want = _run_kernel(m, n, d, dv, split, causal, vec, heads, kv_heads, rng)
    assert not np.isnan(got).any()
    assert rel_l2_unfloored(got, want) <= TOL[split]


@pocl_only
@pytest.mark.parametrize("unit_keys", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_side_inputs_read_with_any_key_stride(unit_keys, causal, rng):
    """The blocks inside the keys read the mask through per-block pointers, at offsets known
    at build time for a unit key stride or scaled by the stride argument; the tail block
    through clamped indices: both against numpy (83 keys: two full blocks and a tail)."""
    got, want = _run_kernel(45, 83, 64, 64, 1, causal, True, 2, 2, rng, unit_keys=unit_keys)
    assert not np.isnan(got).any()
    assert rel_l2_unfloored(got, want) <= TOL[1]


@pocl_only
@pytest.mark.parametrize("m,n,d,dv,split,causal,vec,heads,kv_heads,chunk", [
    (37, 45, 64, 64, 1, False, False, 2, 2, 1),
    (70, 130, 64, 64, 3, True, True, 2, 1, 2),
    (20, 70, 40, 24, 1, False, True, 4, 2, 2),
    (65, 33, 30, 20, 3, True, False, 3, 1, 1),
])
def test_key_splits_match_numpy(m, n, d, dv, split, causal, vec, heads, kv_heads, chunk, rng):
    """Each query block's keys in runs of ``chunk`` blocks, merged by the last run to arrive;
    run twice so that the second launch finds its arrival counters reset."""
    got, want = _run_kernel(m, n, d, dv, split, causal, vec, heads, kv_heads, rng, chunk=chunk,
                            launches=2)
    assert not np.isnan(got).any()
    assert rel_l2_unfloored(got, want) <= TOL[split]


@pocl_only
@pytest.mark.parametrize("split", [1, 3])
@pytest.mark.parametrize("nan_keys", [[40], list(range(32))])
def test_nan_inputs_reach_the_rows_that_attend_them(split, nan_keys, rng):
    """A NaN in query row 5 makes that output row NaN, a NaN in a key every row that attends
    the key (causal), as a softmax over scores holding a NaN does, also where a whole key block
    is NaN for a row (its running maximum then NaN, not -inf); the other rows keep their
    values."""
    m, d = 70, 32
    q, k, v = randn_f32(rng, 1, m, d), randn_f32(rng, 1, m, d), randn_f32(rng, 1, m, d)
    q[0, 5, 3] = np.nan
    k[0, nan_keys, 7] = np.nan
    got = _launch(q, k, v, np.zeros((m, m), np.float32), split, True, True, empty_rows="nan")
    s = q.astype(np.float64) @ k.astype(np.float64).transpose(0, 2, 1) * 0.125
    s = np.where(np.arange(m)[None, :] > np.arange(m)[:, None], -np.inf, s)
    with np.errstate(invalid="ignore"):
        e = np.exp(s - s.max(-1, keepdims=True))
        want = e / e.sum(-1, keepdims=True) @ v.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(want[0, 5]).all() and np.isnan(want[0, nan_keys[-1]:]).all()
    ok = ~np.isnan(want)
    if ok.any():
        assert rel_l2_unfloored(got[ok], want[ok]) <= TOL[split]


@pocl_only
def test_key_splits_keep_masked_rows(rng):
    """A padded causal mask (rows at the float32 minimum, rows all -inf) split into runs of
    one key block: the same output as one walk over the keys (3xTF32, so that the runs'
    rounding differs little), the fully masked rows included (a run whose keys are all -inf
    adds nothing to its row)."""
    m, d, heads = 70, 32, 2
    q, k, v = randn_f32(rng, heads, m, d), randn_f32(rng, heads, m, d), randn_f32(rng, heads, m, d)
    mask = _causal_mask(m, m, rng)
    plain = _launch(q, k, v, mask, 3, False, True, empty_rows="nan")
    split = _launch(q, k, v, mask, 3, False, True, empty_rows="nan", chunk=1)
    np.testing.assert_array_equal(np.isnan(split), np.isnan(plain))
    assert np.isnan(plain[:, m - 2]).all()
    ok = ~np.isnan(plain)
    assert rel_l2_unfloored(split[ok], plain[ok]) <= TOL[3]


def _causal_mask(m, n, rng):
    """What GPT-2's export computes: 0 where key n <= query m, the float32 minimum above, ANDed
    with left padding (the first 9 keys masked); the last query row but one fully -inf, the
    last masked up to 60 % of its keys; row 10 all at the minimum (its softmax spreads over
    every key: the work-group that skips past its last live key must visit them all)."""
    mask = np.where(np.arange(n)[None, :] <= np.arange(m)[:, None], 0.0, np.finfo(np.float32).min)
    mask[:, :9] = np.finfo(np.float32).min
    mask[:9, :9] = 0.0
    mask[m - 2] = -np.inf
    mask[m - 1, :int(0.6 * n)] = -np.inf
    mask = (mask + 0.1 * rng.standard_normal((m, n))).astype(np.float32)
    mask[10] = np.finfo(np.float32).min
    return mask


@pocl_only
@pytest.mark.parametrize("m,d,split,vec", [(150, 64, 1, True), (100, 40, 3, False)])
def test_dead_key_blocks(m, d, split, vec, rng):
    """A causal mask tensor (with padding, fully masked rows, a row masked far into its
    keys): skipping dead key blocks gives bit-identical output to visiting them (a dead key
    adds exactly 0), and matches numpy; NaN values of keys dead for a whole work-group (no
    query of rows 0..63 sees keys from 64 on) do not reach those rows: their blocks were not
    visited."""
    heads = 2
    q, k, v = randn_f32(rng, heads, m, d), randn_f32(rng, heads, m, d), randn_f32(rng, heads, m, d)
    mask = _causal_mask(m, m, rng)
    plain = _launch(q, k, v, mask, split, False, vec)
    skipped = _launch(q, k, v, mask, split, False, vec, skip=True)
    np.testing.assert_array_equal(skipped, plain)
    assert rel_l2_unfloored(skipped[:, 10], v.mean(1)) <= TOL[split]
    live = np.where(mask <= -1e30, -np.inf, mask).astype(np.float64)
    live[10] = 0.0
    s = q.astype(np.float64) @ k.astype(np.float64).transpose(0, 2, 1) * 0.125 + live
    with np.errstate(invalid="ignore"):
        e = np.exp(s - s.max(-1, keepdims=True))
        want = np.nan_to_num(e / e.sum(-1, keepdims=True) @ v, nan=0.0)
    want[:, 10] = v.mean(1)
    assert np.all(skipped[:, m - 2] == 0)
    assert rel_l2_unfloored(skipped, want) <= TOL[split]
    bq = flash.config_for(d, split).bq
    mask[10] = np.where(np.arange(m) <= 10, 0.0, np.finfo(np.float32).min)
    clean = _launch(q, k, v, mask, split, False, vec, True, "nan")
    poisoned = v.copy()
    poisoned[:, bq:] = np.nan
    got = _launch(q, k, poisoned, mask, split, False, vec, True, "nan")
    assert np.isnan(_launch(q, k, poisoned, mask, split, False, vec, False, "nan")[:, :bq]).all()
    np.testing.assert_array_equal(got[:, :bq], clean[:, :bq])


@pocl_only
@pytest.mark.parametrize("chunk", [1, 2])
def test_key_splits_skip_dead_keys(chunk, rng):
    """Splits that scan their own keys: the padded causal mask of ``_causal_mask`` (rows
    without a live key keep every split's keys) gives the output of one plain walk, and once
    every row of the first query block has a live key, NaN values past its keys do not reach
    it (its later splits stored empty partials)."""
    m, d, heads = 100, 32, 2
    q, k, v = randn_f32(rng, heads, m, d), randn_f32(rng, heads, m, d), randn_f32(rng, heads, m, d)
    mask = _causal_mask(m, m, rng)
    plain = _launch(q, k, v, mask, 1, False, True)
    got = _launch(q, k, v, mask, 1, False, True, skip=True, chunk=chunk, launches=2)
    assert np.all(got[:, m - 2] == 0)
    assert rel_l2_unfloored(got, plain) <= TOL[1]
    bq = flash.config_for(d).bq
    mask[10] = np.where(np.arange(m) <= 10, 0.0, np.finfo(np.float32).min)
    clean = _launch(q, k, v, mask, 1, False, True, True, "nan", chunk)
    poisoned = v.copy()
    poisoned[:, bq:] = np.nan
    got = _launch(q, k, poisoned, mask, 1, False, True, True, "nan", chunk)
    np.testing.assert_array_equal(got[:, :bq], clean[:, :bq])


def _bounded_mask(m, n, bound, rng):
    """Dead (the float32 minimum) for keys past m + ``bound``, ANDed with padding (the first
    5 keys of rows from 5 on), live values jittered; row 10 all at the minimum (no anchor: its
    softmax spreads over every key, past the bound too), row m - 2 all -inf."""
    mask = np.where(np.arange(n)[None, :] <= np.arange(m)[:, None] + bound, 0.0,
                    np.finfo(np.float32).min)
    mask[5:, :5] = np.finfo(np.float32).min
    mask = np.where(mask == 0.0, 0.1 * rng.standard_normal((m, n)), mask).astype(np.float32)
    mask[10] = np.finfo(np.float32).min
    mask[m - 2] = -np.inf
    return mask


@pocl_only
@pytest.mark.parametrize("m,n,bound,chunk", [(150, 150, 0, 0), (100, 131, 31, 0), (100, 100, 0, 1),
                                             (100, 140, 40, 2), (90, 90, 7, 1)])
def test_causal_bound_replaces_the_scan(m, n, bound, chunk, rng):
    """A mask the build proves dead past key m + bound (``bounded``): the output of visiting
    every key (the unanchored row 10 included, which must walk past the bound), and NaN in
    the values past the first query block's bound reach none of its rows once they all have
    an anchor (their key blocks were not visited)."""
    d, heads = 32, 2
    q, k, v = randn_f32(rng, heads, m, d), randn_f32(rng, heads, n, d), randn_f32(rng, heads, n, d)
    mask = _bounded_mask(m, n, bound, rng)
    plain = _launch(q, k, v, mask, 3, False, True, empty_rows="nan")
    got = _launch(q, k, v, mask, 3, False, True, True, "nan", chunk, launches=2, bound=bound)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(plain))
    ok = ~np.isnan(plain)
    assert rel_l2_unfloored(got[ok], plain[ok]) <= TOL[3]
    assert rel_l2_unfloored(got[:, 10], v.mean(1)) <= TOL[3]
    cfg = flash.config_for(d, 3)
    mask[10] = np.where(np.arange(n) <= 10 + bound, 0.0, np.finfo(np.float32).min)
    clean = _launch(q, k, v, mask, 3, False, True, True, "nan", chunk, bound=bound)
    poisoned = v.copy()
    poisoned[:, -(-(cfg.bq + bound) // cfg.bkv) * cfg.bkv:] = np.nan  # past the blocks visited
    bq = cfg.bq
    got = _launch(q, k, poisoned, mask, 3, False, True, True, "nan", chunk, bound=bound)
    np.testing.assert_array_equal(got[:, :bq], clean[:, :bq])


@pocl_only
@pytest.mark.parametrize("m,n,bound,chunk,unit_keys", [(150, 150, 0, 0, True), (100, 131, 31, 0, True),
                                                       (100, 140, 40, 2, True), (90, 90, 7, 1, False)])
def test_shared_mask_row_reads_the_same_numbers(m, n, bound, chunk, unit_keys, rng):
    """A mask that inside its bound is one padding row (``shared_row``): reading its last row
    for every query, the fill past the bound, gives the output of reading each row, bit for
    bit; the first rows, whose visible keys are all padding, walk every key."""
    d, heads = 32, 2
    q, k, v = randn_f32(rng, heads, m, d), randn_f32(rng, heads, n, d), randn_f32(rng, heads, n, d)
    pad = np.where(rng.random(n) < 0.2, np.finfo(np.float32).min, 0.1 * rng.standard_normal(n))
    pad[:5] = np.finfo(np.float32).min
    inside = np.arange(n)[None, :] <= np.arange(m)[:, None] + bound
    mask = np.where(inside, pad[None, :], np.finfo(np.float32).min).astype(np.float32)
    fill = flit(np.finfo(np.float32).min)
    for split in (1, 3):
        each = _launch(q, k, v, mask, split, False, True, True, "nan", chunk, bound=bound,
                       unit_keys=unit_keys)
        one = _launch(q, k, v, mask, split, False, True, True, "nan", chunk, bound=bound,
                      unit_keys=unit_keys, shared=fill)
        np.testing.assert_array_equal(one, each)
        plain = _launch(q, k, v, mask, split, False, True, empty_rows="nan")
        assert rel_l2_unfloored(one, plain) <= TOL[split]


def _heads(x, h, d, order=(0, 2, 1, 3)):
    return opset.transpose(opset.reshape(x, ints64([0, 0, h, d]), True), ints64(list(order)))


def _decoder(h=2, d=16, max_seq=96, fill=-1e9):
    """GPT-style: a QKV projection split into strided views, a causal mask (``fill`` above the
    diagonal) sliced from a constant, the heads transposed back and merged."""
    rng = np.random.default_rng(3)
    x = opset.parameter([1, -1, h * d], np.float32, name="x")
    qkv = opset.matmul(x, randn_f32(rng, h * d, 3 * h * d), False, False)
    q, k, v = opset.split(qkv, ints64(-1), 3).outputs()
    scores = opset.multiply(opset.matmul(_heads(q, h, d), _heads(k, h, d, (0, 2, 3, 1)), False, False),
                            np.float32(d ** -0.5))
    seq = opset.gather(opset.shape_of(x), ints64([1]), ints64(0))
    tri = np.triu(np.full((max_seq, max_seq), fill, np.float32), 1)
    mask = opset.slice(tri, ints64([0, 0]), opset.concat([seq, seq], 0), ints64([1, 1]), ints64([0, 1]))
    att = opset.matmul(opset.softmax(opset.add(scores, mask), -1), _heads(v, h, d), False, False)
    y = opset.reshape(opset.transpose(att, ints64([0, 2, 1, 3])), ints64([0, 0, -1]), True)
    return Model([opset.result(y, name="y")], [x])


def _ran_flash(req) -> bool:
    return any("flash_attention(" in key[2] for key in req.network.kernel_objects)


@pocl_only
@pytest.mark.parametrize("precision", ["tf32", "f32"])
def test_decoder_prefill(precision, emulated_flash, rng):
    model = _decoder()
    cm = compile_program(model, RUNTIME_DEVICE, {"INFERENCE_PRECISION_HINT": precision})
    req = cm.create_infer_request()
    for s in (37, 70, 2):
        feeds = {"x": randn_f32(rng, 1, s, 32)}
        got, want = req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]
        assert rel_l2_unfloored(got, want) <= 2 * TOL[1 if precision == "tf32" else 3]
    assert _ran_flash(req)
    assert req.stats["host_fallbacks"] == 0


@pocl_only
def test_decoder_prefill_splits_long_rows(emulated_flash, monkeypatch, rng):
    """Few query blocks: each row's keys split into runs of one block over the launch's third
    dimension (kernels.flash, "Key splits"), the runs merged by the last to arrive; two
    requests take turns on one compiled model (each its own arrival counters)."""
    monkeypatch.setattr(attention_kind, "FLASH_SKIP_WAVES", 1e9)
    monkeypatch.setattr(attention_kind, "FLASH_SPLIT_WAVES", {1: 1e9, 3: 1e9})
    monkeypatch.setattr(attention_kind, "FLASH_MIN_CHUNK", 1)
    model = _decoder()
    cm = compile_program(model, RUNTIME_DEVICE, {"INFERENCE_PRECISION_HINT": "f32"})
    reqs = [cm.create_infer_request() for _ in range(2)]
    for s in (70, 37, 70):
        for req in reqs:
            feeds = {"x": randn_f32(rng, 1, s, 32)}
            got, want = req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]
            assert rel_l2_unfloored(got, want) <= 2 * TOL[3]
    assert any("fa_count" in key[2] for key in reqs[0].network.kernel_objects)


def _padded_decoder(h=2, d=16, window=None):
    """A transformers-style export's mask: Where(kv <= q AND padding, 0, float32 min), the
    positions two Ranges over the prompt's length, the padding an input; ``window``: also
    kv > q - window (a sliding window)."""
    rng = np.random.default_rng(5)
    x = opset.parameter([1, -1, h * d], np.float32, name="x")
    pad = opset.parameter([1, -1], np.bool_, name="pad")
    qkv = opset.matmul(x, randn_f32(rng, h * d, 3 * h * d), False, False)
    q, k, v = opset.split(qkv, ints64(-1), 3).outputs()
    scores = opset.multiply(opset.matmul(_heads(q, h, d), _heads(k, h, d, (0, 2, 3, 1)), False, False),
                            np.float32(d ** -0.5))
    seq = opset.squeeze(opset.gather(opset.shape_of(x), ints64([1]), ints64(0)), ints64([0]))
    pos = opset.range(ints64(0), seq, ints64(1), "i64")
    causal = opset.less_equal(opset.unsqueeze(pos, ints64([0, 1, 2])), opset.unsqueeze(pos, ints64([0, 1, 3])))
    keep = opset.logical_and(causal, opset.unsqueeze(pad, ints64([1, 2])))
    if window is not None:
        keep = opset.logical_and(keep, opset.greater(opset.unsqueeze(pos, ints64([0, 1, 2])), opset.subtract(
            opset.unsqueeze(pos, ints64([0, 1, 3])), ints64(window))))
    mask = opset.select(keep, np.float32(0.0), np.float32(np.finfo(np.float32).min))
    att = opset.matmul(opset.softmax(opset.add(scores, mask), -1), _heads(v, h, d), False, False)
    y = opset.reshape(opset.transpose(att, ints64([0, 2, 1, 3])), ints64([0, 0, -1]), True)
    return Model([opset.result(y, name="y")], [x, pad])


@pocl_only
@pytest.mark.parametrize("split_keys", [False, True])
def test_decoder_prefill_with_a_proven_causal_mask(split_keys, emulated_flash, monkeypatch, rng):
    """The build proves the mask dead past the diagonal (``runtime.mask_bounds``), so the
    flash kernel is built ``bounded`` and, the mask being one padding row inside the bound,
    reads that row for every query (``shared_row``): the reference's output over prompts of
    several lengths, left-padded ones included (their first rows have no live key and spread
    over every key), with and without key splits."""
    if split_keys:
        monkeypatch.setattr(attention_kind, "FLASH_SKIP_WAVES", 1e9)
        monkeypatch.setattr(attention_kind, "FLASH_SPLIT_WAVES", {1: 1e9, 3: 1e9})
        monkeypatch.setattr(attention_kind, "FLASH_MIN_CHUNK", 1)
    model = _padded_decoder()
    req = compile_program(model, RUNTIME_DEVICE, {"INFERENCE_PRECISION_HINT": "f32"}).create_infer_request()
    for s, padded in ((70, 0), (37, 3), (100, 0), (70, 5)):
        pad = np.arange(s)[None] >= padded
        feeds = {"x": randn_f32(rng, 1, s, 32), "pad": pad}
        got, want = req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]
        assert rel_l2_unfloored(got, want) <= 2 * TOL[3], (s, padded)
    assert any("flash_attention(" in key[2] and "nlive" in key[2] and _shares_a_mask_row(key[2])
               for key in req.network.kernel_objects)


def _shares_a_mask_row(kernel_source: str) -> bool:
    return re.search(r"srow\d_s = ", kernel_source) is not None


@pocl_only
def test_a_sliding_window_reads_each_mask_row(emulated_flash, rng):
    """A sliding window's mask differs between rows inside the causal bound (its lower edge
    moves with the row): the kernel is bounded but reads every row's own mask values, also
    where the window is longer than the prompt (``mask_bounds.row_free``: a decoding loop's
    length family could replay a shared row past the window)."""
    for window in (20, 100):
        model = _padded_decoder(window=window)
        req = compile_program(model, RUNTIME_DEVICE, {"INFERENCE_PRECISION_HINT": "f32"}).create_infer_request()
        for s, padded in ((70, 0), (45, 3)):
            feeds = {"x": randn_f32(rng, 1, s, 32), "pad": np.arange(s)[None] >= padded}
            got, want = req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]
            assert rel_l2_unfloored(got, want) <= 2 * TOL[3], (window, s, padded)
        flash_keys = [key[2] for key in req.network.kernel_objects if "flash_attention(" in key[2]]
        assert flash_keys and all("nlive" in k and not _shares_a_mask_row(k) for k in flash_keys)


@pocl_only
def test_vision_heads_read_through_reshaped_transposes(emulated_flash, rng):
    """torchvision's attention layout ([S, B, D] to heads by Reshape, Transpose, Reshape; the
    Transposes read as views through the Reshapes) on the flash kernel, 3xTF32."""
    S, B, D = 37, 3, 32
    model = torchvision_attention(rng, S, B, 2, D // 2)
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    feeds = {"x": randn_f32(rng, S, B, D)}
    assert rel_l2_unfloored(req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]) <= 2 * TOL[3]
    assert _ran_flash(req) and req.stats["kernels_enqueued"] == 3 + 1  # (q, k, v; attention)


@pocl_only
def test_decoder_prefill_skips_dead_key_blocks(emulated_flash, monkeypatch, rng):
    """The causal mask at the float32 minimum (as transformers' exports write it): the flash
    kernel skips the key blocks past each work-group's last query (looked for whatever the
    work-group count), so NaN in the later tokens reach no earlier row (the reference, which
    visits every key, gives NaN everywhere): the first 64 rows equal the reference run on
    the first 64 tokens alone."""
    monkeypatch.setattr(attention_kind, "FLASH_SKIP_WAVES", 0.0)
    model = _decoder(max_seq=128, fill=np.finfo(np.float32).min)
    cm = compile_program(model, RUNTIME_DEVICE, {"INFERENCE_PRECISION_HINT": "tf32"})
    req = cm.create_infer_request()
    x = randn_f32(rng, 1, 100, 32)
    want = netpass.reference.infer(model, {"x": x})["y"]
    assert rel_l2_unfloored(req.infer({"x": x})["y"], want) <= 2 * TOL[1]
    x[:, 64:] = np.nan
    got = req.infer({"x": x})["y"]
    assert np.isnan(got[:, 64:]).all()
    assert rel_l2_unfloored(got[:, :64], netpass.reference.infer(model, {"x": x[:, :64]})["y"]) <= 2 * TOL[1]
    assert _ran_flash(req)


@pocl_only
def test_padding_mask_batch_and_nan_guard(emulated_flash, rng):
    """BERT-style (q k^T) / sqrt(d) + mask[b, 1, 1, s] over a batch of 2, torch's
    Where(IsNaN(p), 0, p) guard: a sequence whose keys are all masked gives zeros."""
    b_, h, d = 2, 3, 12
    q, k, v = (opset.parameter([b_, h, -1, d], np.float32, name=n) for n in "qkv")
    mask = opset.parameter([b_, 1, 1, -1], np.float32, name="mask")
    scores = opset.add(opset.divide(opset.matmul(q, k, False, True), np.float32(np.sqrt(d))), mask)
    p = opset.softmax(scores, -1)
    p = opset.select(opset.is_nan(p), np.float32(0.0), p)
    model = Model([opset.result(opset.matmul(p, v, False, False), name="y")], [q, k, v, mask])
    assert sum(n.kind == "FusedAttention" for n in Program.from_model(model).nodes) == 1
    req = compile_program(model, RUNTIME_DEVICE, {"INFERENCE_PRECISION_HINT": "tf32"}).create_infer_request()
    s = 21
    m = np.where(rng.random((b_, 1, 1, s)) < 0.3, -np.inf, 0.0).astype(np.float32)
    m[1] = -np.inf
    feeds = {"q": randn_f32(rng, b_, h, s, d), "k": randn_f32(rng, b_, h, s, d), "v": randn_f32(rng, b_, h, s, d), "mask": m}
    with np.errstate(invalid="ignore"):
        want = netpass.reference.infer(model, feeds)["y"]
    got = req.infer(feeds)["y"]
    assert np.all(got[1] == 0)
    assert rel_l2_unfloored(got[0], want[0]) <= TOL[1]
    assert _ran_flash(req)


@pocl_only
def test_few_queries_keep_the_row_kernel(emulated_flash, rng):
    model = _decoder()
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    feeds = {"x": randn_f32(rng, 1, 3, 32)}
    assert rel_l2_unfloored(req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]) <= 1e-5
    assert not _ran_flash(req)


@pytest.mark.parametrize("split", [1, 3])
def test_configs_fit_local_memory(split):
    """Two stages of K and V in 48 KB, key blocks of whole m16n8 fragments."""
    for d in (16, 64, 96, 128):
        cfg = flash.config_for(d, split)
        dk, dvp = -(-d // 16) * 16, -(-d // 8) * 8
        vst = dvp + (4 - dvp) % 16
        assert cfg.bkv % 8 == 0
        assert 4 * 2 * cfg.bkv * (dk + vst) <= 48 << 10


def _onnx_attention(rank: int, mask_dtype, **attrs):
    """ONNX Attention over q [2, 4, S, 24] and k, v of 2 heads (grouped-query), or the 3-D
    [2, S, heads * 24] form, with an optional mask [S, S]."""
    from netpass.ops.attention import attention
    shapes = {"q": [2, 4, -1, 24], "k": [2, 2, -1, 24], "v": [2, 2, -1, 20]} if rank == 4 else \
        {"q": [2, -1, 96], "k": [2, -1, 48], "v": [2, -1, 40]}
    ins = [opset.parameter(s, np.float32, name=n) for n, s in shapes.items()]
    mask = None
    if mask_dtype is not None:
        mask = opset.parameter([-1, -1], mask_dtype, name="mask")
        ins.append(mask)
    if rank == 3:
        attrs.update(q_num_heads=4, kv_num_heads=2)
    y = attention(*ins[:3], attn_mask=mask, **attrs)
    return Model([opset.result(y.output(0), name="y")], ins)


@pocl_only
@pytest.mark.parametrize("rank,mask_dtype,attrs", [
    (4, None, {"is_causal": True}),
    (4, np.bool_, {"scale": 0.3}),
    (3, np.float32, {"softcap": 2.0}),
    (3, np.bool_, {"is_causal": True}),
])
def test_onnx_attention_op(rank, mask_dtype, attrs, emulated_flash, rng):
    """The ONNX Attention op runs on the flash kernel (it has no other kernel): grouped-query
    heads, 3-D inputs, boolean and additive masks (a query row with every key masked gives
    zeros), causal masking, scale and soft cap."""
    model = _onnx_attention(rank, mask_dtype, **attrs)
    req = compile_program(model, RUNTIME_DEVICE, {"INFERENCE_PRECISION_HINT": "tf32"}).create_infer_request()
    for s in (19, 40):
        feeds = {"q": randn_f32(rng, 2, 4, s, 24), "k": randn_f32(rng, 2, 2, s, 24), "v": randn_f32(rng, 2, 2, s, 20)} if rank == 4 else \
            {"q": randn_f32(rng, 2, s, 96), "k": randn_f32(rng, 2, s, 48), "v": randn_f32(rng, 2, s, 40)}
        if mask_dtype is np.bool_:
            m = rng.random((s, s)) < 0.7
            m[3] = False
            feeds["mask"] = m
        elif mask_dtype is not None:
            feeds["mask"] = np.where(rng.random((s, s)) < 0.3, -np.inf, randn_f32(rng, s, s)).astype(np.float32)
        with np.errstate(invalid="ignore"):
            want = netpass.reference.infer(model, feeds)["y"]
        got = req.infer(feeds)["y"]
        assert got.shape == want.shape
        assert rel_l2_unfloored(got, want) <= TOL[1]
    assert _ran_flash(req) and req.stats["host_fallbacks"] == 0


@pocl_only
@pytest.mark.parametrize("additive", [False, True])
def test_onnx_attention_with_a_proven_causal_mask(additive, emulated_flash, rng):
    """ONNX Attention whose mask is ``kv <= q AND keep[kv]`` of two Ranges, boolean (the op
    decomposed into a fused attention) or as ``Where(mask, 0, -inf)`` with a soft cap (the
    op's own kernel): the build proves it dead past the diagonal (``bounded``); rows whose
    keys are all masked (the first three, ``keep`` false there) give zeros as the op says."""
    from netpass.ops.attention import attention
    q, k, v = (opset.parameter(s, np.float32, name=n) for n, s in
               (("q", [1, 4, -1, 24]), ("k", [1, 2, -1, 24]), ("v", [1, 2, -1, 20])))
    keep = opset.parameter([-1], np.bool_, name="keep")
    seq = opset.squeeze(opset.gather(opset.shape_of(q), ints64([2]), ints64(0)), ints64([0]))
    pos = opset.range(ints64(0), seq, ints64(1), "i64")
    mask = opset.logical_and(opset.less_equal(opset.unsqueeze(pos, ints64([0])),
                                              opset.unsqueeze(pos, ints64([1]))), keep)
    attrs = {}
    if additive:
        mask, attrs = opset.select(mask, np.float32(0.0), np.float32(-np.inf)), {"softcap": 2.0}
    model = Model([opset.result(attention(q, k, v, attn_mask=mask, **attrs).output(0), name="y")],
                  [q, k, v, keep])
    req = compile_program(model, RUNTIME_DEVICE, {"INFERENCE_PRECISION_HINT": "f32"}).create_infer_request()
    for s in (40, 77):
        feeds = {"q": randn_f32(rng, 1, 4, s, 24), "k": randn_f32(rng, 1, 2, s, 24), "v": randn_f32(rng, 1, 2, s, 20),
                 "keep": np.arange(s) >= 3}
        with np.errstate(invalid="ignore"):
            want = netpass.reference.infer(model, feeds)["y"]
        got = req.infer(feeds)["y"]
        assert np.all(got[:, :, :3] == 0)
        assert rel_l2_unfloored(got, want) <= 2 * TOL[3]
    assert any("flash_attention(" in key[2] and "nlive" in key[2] and _shares_a_mask_row(key[2])
               for key in req.network.kernel_objects)
