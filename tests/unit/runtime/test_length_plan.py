"""Length plans (netpass.runtime.length_plan, length_tape): a decoding loop's steps, each a new
binding, replayed from one family of entries whose moving fields are affine in the cache
length. The replay must give the per-primitive path's outputs and counters at every step,
also past the lengths it was fitted on."""
from __future__ import annotations

import numpy as np
import pytest
from graph_blocks import ints64

import netpass
from netpass import Model, opset
from netpass.core.shape import PartialShape
from netpass.runtime import compile_program
from netpass.runtime.impls import Cover
from netpass.runtime.length_forms import Form, GrowForm, fit_work, work_at, work_fn, work_holds
from netpass.runtime.length_guards import work_range
from netpass.runtime.length_steps import LinHost, LinKernel
from netpass.testing import RUNTIME_DEVICE


def _cache_model(d: int = 8):
    """One attention layer over a key cache kept in a variable: scores of the new rows against
    Concat(cache, new), an additive mask from the attention mask input (ones), a position term
    from Range over the grown length (a host-evaluated shape sub-graph), softmax, the weighted
    sum, and an elementwise chain over the whole grown length."""
    x = opset.parameter([1, "seq", d], np.float32, name="x")
    mask = opset.parameter([1, "total"], np.int64, name="mask")
    past = opset.read_value("cache", np.float32, PartialShape([1, -1, d]))
    keys = opset.concat([past, x], 1)
    assign = opset.assign(keys, "cache")
    scores = opset.matmul(x, keys, False, True)  # [1, seq, total]
    add_mask = opset.multiply(opset.subtract(opset.convert(mask, "f32"), np.float32(1.0)),
                              np.float32(1e4))
    n = opset.gather(opset.shape_of(keys), ints64(1), ints64(0))
    pos = opset.convert(opset.range(ints64(0), n, ints64(1), "i64"), "f32")  # [total]
    scores = opset.add(opset.add(scores, opset.unsqueeze(add_mask, ints64([1]))),
                       opset.multiply(pos, np.float32(1e-3)))
    probs = opset.softmax(scores, -1)
    y = opset.matmul(probs, keys, False, False)
    return Model([opset.result(y, name="y"), opset.result(opset.relu(scores), name="s")],
                 [x, mask], "cache_attention", sinks=[assign])


def _steps(model, lengths, rng, config=None, d: int = 8):
    """A prompt, then one row per step; the outputs of every step."""
    cm = compile_program(model, RUNTIME_DEVICE, config)
    req = cm.create_infer_request()
    outs, total = [], 0
    rng = np.random.default_rng(3)
    for n in lengths:
        total += n
        feeds = {"x": rng.standard_normal((1, n, d)).astype(np.float32),
                 "mask": np.ones((1, total), np.int64)}
        outs.append(req.infer(feeds))
    return cm, req, outs


def test_form_fits_nested_ints_and_refuses_what_is_not_affine():
    f = Form.fit(((1, 4, 10, 8), [3, 7]), ((1, 4, 12, 8), [3, 9]), 10, 12)
    assert f.at(20) == ((1, 4, 20, 8), [3, 17]) and f.agrees(((1, 4, 30, 8), [3, 27]), 30)
    assert not f.agrees(((1, 4, 30, 8), [3, 28]), 30)
    assert Form.fit((1, 3), (1, 4), 10, 12) is None           # slope 1/2
    assert Form.fit((1, 3), (1, 3, 4), 10, 12) is None        # another structure
    values = Form.fit({1: ints64([1, 10])}, {1: ints64([1, 11])}, 10, 11)
    np.testing.assert_array_equal(values.at(40)[1], [1, 40])
    assert Form.fit((5, 6), (5, 6), 1, 2).const == (5, 6)


def test_grow_form_fits_values_growing_along_one_axis():
    """arange over the grown length, an all-true row, positions past the cache; refused:
    values that are not affine along the axis, two growing axes."""
    def sample(values, dtype=np.int64):
        a = np.asarray(values, dtype).reshape(1, 1, -1)
        return ((a.shape,), (a,))
    f = GrowForm.fit(sample(range(5)), sample(range(7)), 4, 6)
    shapes, (v,) = f.at(20)
    assert shapes == ((1, 1, 21),) and v.tolist() == [[list(range(21))]]
    ones = GrowForm.fit(sample([1] * 5, bool), sample([1] * 6, bool), 4, 5)
    assert ones.at(9)[1][0].dtype == np.bool_ and ones.at(9)[1][0].all()
    past = GrowForm.fit(sample([4, 5]), sample([5, 6, 7]), 4, 5)  # (rows from t on)
    assert past.at(10)[1][0].reshape(-1).tolist() == list(range(10, 18))
    assert GrowForm.fit(sample([0, 1, 3]), sample([0, 1, 3, 6]), 2, 3) is None
    square = (((2, 2),), (np.zeros((2, 2), np.int64),))
    assert GrowForm.fit(square, (((3, 3),), (np.zeros((3, 3), np.int64),)), 2, 3) is None


def test_work_sizes_follow_the_moving_count_across_work_group_multiples():
    class _L:
        def __init__(self, gws, lws=(64,)):
            self.gws, self.lws = gws, lws

    # work_1d's sizes (a Cover): the element count 10 -> 11 leaves 64 work-items; at 65
    # elements they must be 128
    work = fit_work([_L(Cover((64,))), _L(Cover((64,)))], [[0, 10, 3], [0, 11, 3]], 10, 11)
    assert work_at(work, [0, 65, 3], 65) == (128,)
    assert work_at(work, [0, 64, 3], 64) == (64,)
    # 40 and 41 elements in 64 work-items, one per element or per float4 (eltwise_vec4):
    # the larger cover is taken (kernels bound-check their work-items; fewer would be wrong)
    work = fit_work([_L(Cover((64,))), _L(Cover((64,)))], [[40], [41]], 40, 41)
    assert work_at(work, [257], 257) == (320,)
    # a stride that moved with the count but stays smaller does not shrink the cover
    work = fit_work([_L(Cover((64,))), _L(Cover((64,)))], [[40, 10], [41, 11]], 40, 41)
    assert work_at(work, [257, 228], 257) == (320,)
    fixed = fit_work([_L((8, 3, 1), (8, 1, 1)), _L((8, 3, 1), (8, 1, 1))], [[5], [5]], 1, 2)
    assert work_at(fixed, [5], 9) == (8, 3, 1)


def test_a_fixed_work_size_a_moving_count_covers_by_chance_holds_only_while_it_does():
    """A decode attention's two batch rows (work size 2, one item each) and its key count
    5 -> 6, whose float4 count is 2 too: taking the rows for that count launched 3 rows at 9
    keys, past the output (heap corruption on PoCL). The dim stays 2 while the count's cover
    is 2, and the family's range ends where it would not be."""
    class _L:
        def __init__(self, gws, lws=(1,)):
            self.gws, self.lws = gws, lws

    work = fit_work([_L((2,)), _L((2,))], [[5, 7], [6, 7]], 5, 6)
    assert work[0][0] == "k" and work_at(work, [9, 7], 9) == (2,)
    assert work_holds(work, [8, 7]) and not work_holds(work, [9, 7])
    ints = Form.fit([5, 7], [6, 7], 5, 6)
    entry = LinKernel.__new__(LinKernel)
    entry.launches = [(None, None, ints, [], work)]
    assert work_range([entry], 6, 0, 1000) == (5, 8)


def test_decoding_steps_replay_one_family_and_match_the_reference(rng):
    model = _cache_model()
    lengths = [5] + [1] * 90  # crosses 64 and 128 elements of the grown length
    cm, req, outs = _steps(model, lengths, rng)
    families = list(cm.length_plans.families.values())
    assert len(families) == 1 and families[0].ready
    assert any(isinstance(e, LinKernel) for e in families[0].entries)
    # the Range over the grown length and the positions: set from their forms
    assert any(isinstance(e, LinHost) and isinstance(e.form, GrowForm)
               for e in families[0].entries)
    # every step but: the first two bindings (full path: the symbolic checks), the first
    # symbolic one (no step before it to find its family) and the family's three samples
    assert req.stats["length_replays"] == len(lengths) - 6
    ref_vars: dict = {}
    total, r = 0, np.random.default_rng(3)
    for n, got in zip(lengths, outs):
        total += n
        feeds = {"x": r.standard_normal((1, n, 8)).astype(np.float32),
                 "mask": np.ones((1, total), np.int64)}
        want = netpass.reference.infer(model, feeds, variables=ref_vars)
        for name in ("y", "s"):
            np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("debug", [False, True])
def test_replay_counts_and_outputs_as_the_per_primitive_path(rng, debug):
    model = _cache_model()
    lengths = [3] + [1] * 40
    _, plain, want = _steps(model, lengths, rng, {"STEP_PLANS": False})
    _, req, got = _steps(model, lengths, rng, {"DEBUG_CHECKS": debug})
    assert req.stats["length_replays"] > 30
    for a, b in zip(got, want):
        for name in ("y", "s"):
            np.testing.assert_array_equal(a[name], b[name])
    for key in ("kernels_enqueued", "primitives", "skipped", "fused", "state_appends",
                "host_waits", "infers"):
        assert req.stats[key] == plain.stats[key], key


def test_a_new_sequence_replays_the_same_family(rng):
    """After reset_state a prompt of another length decodes in the family the first sequence
    made (the moving symbols' offsets and the buffer layouts are the same)."""
    model = _cache_model()
    cm = compile_program(model, RUNTIME_DEVICE)
    req = cm.create_infer_request()
    r = np.random.default_rng(5)
    for prompt in (6, 9):
        req.reset_state()
        total = 0
        for n in [prompt] + [1] * 12:
            total += n
            feeds = {"x": r.standard_normal((1, n, 8)).astype(np.float32),
                     "mask": np.ones((1, total), np.int64)}
            req.infer(feeds)
    assert len(cm.length_plans.families) == 1
    # the second sequence replays from its second decode step on
    assert req.stats["length_replays"] == (12 - 5) + (12 - 1)


def test_a_decoding_loop_keeps_the_prompts_buffers(rng):
    """The decode steps after a prompt reclaim none of the prompt's (10x larger) buffers, so
    the next prompt of that length on the request allocates nothing."""
    model = _cache_model()
    cm = compile_program(model, RUNTIME_DEVICE)
    req = cm.create_infer_request()
    r = np.random.default_rng(9)
    for _ in range(2):
        req.reset_state()
        before = dict(req.stats)
        total = 0
        for n in [40] + [1] * 12:
            total += n
            req.infer({"x": r.standard_normal((1, n, 8)).astype(np.float32),
                       "mask": np.ones((1, total), np.int64)})
        assert req.stats["reclaims"] == before["reclaims"]
    assert req.stats["allocations"] == before["allocations"]


@pytest.mark.parametrize("dtype", [np.int64, np.bool_, np.int32])
def test_form_arrays_are_the_affine_values_in_their_dtype(dtype):
    """A moving host array of a few ints (written as a literal for int64 and bool) and a
    growing one (one arange) hold base + slope * t in the array's dtype and shape, as fresh
    writable arrays (bool values cannot move but along a growing axis)."""
    for shape in [(), (1,), (1, 1, 1, 1), (2, 3)] if dtype != np.bool_ else []:
        a = np.asarray(np.arange(int(np.prod(shape))).reshape(shape) * 3 + 10)
        b = np.asarray(a + np.arange(a.size).reshape(shape) % 2 + 1)
        f = Form.fit(((shape,), (a.astype(dtype),)), ((shape,), (b.astype(dtype),)), 10, 11)
        for t in (0, 10, 500):
            want = (a + (b - a) * (t - 10)).astype(dtype)
            (got,) = f.at(t)[1]
            assert got.dtype == want.dtype and got.shape == shape and got.flags.writeable
            np.testing.assert_array_equal(got, want)
            assert f.at(t)[1][0] is not got
    grows = ((1, 0, 0), (0, 1, 0), (2, 3, 1), (-1, 0, 1)) if dtype != np.bool_ else ((0, 1, 0),)
    for c, a0, b0 in grows:
        def sample(t, c=c, a0=a0, b0=b0):
            v = (a0 + b0 * t + c * np.arange(t + 1)).astype(dtype).reshape(1, 1, t + 1)
            return ((v.shape,), (v,))
        g = GrowForm.fit(sample(4), sample(6), 4, 6)
        for t in (4, 63, 64, 200):
            shapes, (got,) = g.at(t)
            want = sample(t)[1][0]
            assert shapes == ((1, 1, t + 1),) and got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)


def test_two_requests_alternating_steps_give_the_per_primitive_outputs(rng):
    """Two requests of one compiled model decode in turns (one family, each its own tape and
    fast arguments; the second starts later, with another prompt length): every step's outputs
    and the counters equal a request's without plans."""
    model = _cache_model()
    cm = compile_program(model, RUNTIME_DEVICE)
    plain = compile_program(model, RUNTIME_DEVICE, {"STEP_PLANS": False})
    reqs = [cm.create_infer_request(), cm.create_infer_request()]
    refs = [plain.create_infer_request(), plain.create_infer_request()]
    r = np.random.default_rng(11)
    totals = [0, 0]
    plan = {0: [4] + [1] * 70, 1: [7] + [1] * 70}
    for step in range(71):
        for j in (0, 1):
            if j == 1 and step < 5:
                continue
            n = plan[j][step - (5 if j else 0)]
            totals[j] += n
            feeds = {"x": r.standard_normal((1, n, 8)).astype(np.float32),
                     "mask": np.ones((1, totals[j]), np.int64)}
            got, want = reqs[j].infer(feeds), refs[j].infer(feeds)
            for name in ("y", "s"):
                np.testing.assert_array_equal(got[name], want[name])
    for req, ref in zip(reqs, refs):
        assert req.stats["length_replays"] > 50
        for key in ("kernels_enqueued", "primitives", "skipped", "state_appends", "infers"):
            assert req.stats[key] == ref.stats[key], key


def test_a_decode_step_leaves_every_primitive_flag_reset(rng):
    """The tape resets the flags of the primitives whose steps may set them; every step,
    whichever path it took, leaves all of them as the per-primitive path does (the inputs'
    are set by each inference's feeds)."""
    model = _cache_model()
    cm = compile_program(model, RUNTIME_DEVICE)
    req = cm.create_infer_request()
    r = np.random.default_rng(2)
    total = 0
    for n in [5] + [1] * 30:
        total += n
        req.infer({"x": r.standard_normal((1, n, 8)).astype(np.float32),
                   "mask": np.ones((1, total), np.int64)})
        for inst in req.network.insts:
            assert inst.node.is_parameter or not (inst.shape_changed or inst.impl_changed or inst.skip
                        or inst.done_by_other or inst.allocation_done_by_other
                        or inst.concat_decided), inst.node.name
    assert req.stats["length_replays"] > 20


def test_work_sizes_as_a_function_of_t_agree_with_work_at():
    class _L:
        def __init__(self, gws, lws=(64,)):
            self.gws, self.lws = gws, lws

    base, slope = [0, 10, 3, 7], [0, 1, 0, 2]
    work = fit_work([_L(Cover((64, 2, 5)), (64, 1, 1)), _L(Cover((64, 2, 7)), (64, 1, 1))],
                    [[0, 10, 3, 7], [0, 11, 3, 9]], 0, 1)
    assert [w[0] for w in work] == ["r", "c", "a"]
    at = work_fn(work, base, slope)
    for t in (0, 1, 30, 54, 55, 200, 1000):
        ints = [b + s * t for b, s in zip(base, slope)]
        assert at(t) == work_at(work, ints, t)


def test_decoding_resumes_its_tape_after_steps_of_other_lengths(rng):
    """Mid-sequence steps of two rows (another binding: the per-primitive path, which sets
    other arguments on the moving kernels and other shapes on their primitives) between
    one-row steps: the tape's fast paths notice and the outputs stay the plain path's."""
    model = _cache_model()
    lengths = [5] + [1] * 12 + [2] + [1] * 9 + [2, 2] + [1] * 30
    _, plain, want = _steps(model, lengths, rng, {"STEP_PLANS": False})
    _, req, got = _steps(model, lengths, rng)
    assert req.stats["length_replays"] > 30
    for a, b in zip(got, want):
        for name in ("y", "s"):
            np.testing.assert_array_equal(a[name], b[name])
    for key in ("kernels_enqueued", "primitives", "skipped", "state_appends", "infers"):
        assert req.stats[key] == plain.stats[key], key


def test_a_host_op_reads_a_fixed_view_of_this_steps_kernel(rng):
    """A host-run op (GatherND: no kernel) reads a reshape, a view of a kernel's output that
    does not move with the length, every step: the tape launches the kernel again but leaves
    the view as it stands, so the host copy the previous step read must not be taken again
    (Falcon's dynamo export picks the query, key and value heads so)."""
    d = 8
    x = opset.parameter([1, "seq", d], np.float32, name="x")
    mask = opset.parameter([1, "total"], np.int64, name="mask")
    past = opset.read_value("cache", np.float32, PartialShape([1, -1, d]))
    keys = opset.concat([past, x], 1)
    scores = opset.matmul(x, keys, False, True)
    heads = opset.reshape(opset.relu(x), ints64([1, -1, 2, d // 2]), False)
    picked = opset.gather_nd(heads, ints64([[0]]))  # [seq, 2, d / 2]
    model = Model([opset.result(scores, name="s"),
                   opset.result(opset.multiply(picked, np.float32(2.0)), name="y")],
                  [x, mask], "host_reads_a_view", sinks=[opset.assign(keys, "cache")])
    lengths = [4] + [1] * 12
    _, _, want = _steps(model, lengths, rng, {"STEP_PLANS": False})
    _, req, got = _steps(model, lengths, rng, {"DEBUG_CHECKS": False})
    assert req.stats["length_replays"] > 5
    for step, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(a["y"], b["y"], err_msg=f"step {step}")


def test_a_moving_kernel_reads_a_table_sliced_to_the_grown_length(rng):
    """An attention whose scores take a per-head bias table's last ``total`` columns (MPT's
    ALiBi bias: a strided view of a constant, whose offset moves back a column per step):
    the attention's fast arguments fold the view's moving offset in, and every step equals
    the plain path's."""
    h, d, width = 4, 16, 256
    x = opset.parameter([1, "seq", h * d], np.float32, name="x")
    mask = opset.parameter([1, "total"], np.int64, name="mask")
    new = opset.transpose(opset.reshape(x, ints64([0, 0, h, d]), True), ints64([0, 2, 1, 3]))
    past = opset.read_value("cache", np.float32, PartialShape([1, h, -1, d]))
    keys = opset.concat([past, new], 2)
    total = opset.gather(opset.shape_of(keys), ints64([2]), ints64(0))
    table = rng.standard_normal((h, 1, width)).astype(np.float32)
    bias = opset.slice(table, opset.subtract(ints64([width]), total), ints64([width]), ints64([1]),
                       ints64([2]))  # [h, 1, total]
    scores = opset.add(opset.multiply(opset.matmul(new, keys, False, True),
                                      np.float32(d ** -0.5)), bias)
    values = opset.concat([opset.read_value("values", np.float32, PartialShape([1, h, -1, d])),
                           opset.relu(new)], 2)
    y = opset.matmul(opset.softmax(scores, -1), values, False, False)
    model = Model([opset.result(y, name="y")], [x, mask], "sliced_bias",
                  sinks=[opset.assign(keys, "cache"), opset.assign(values, "values")])
    lengths = [4] + [1] * 20
    _, _, want = _steps(model, lengths, rng, {"STEP_PLANS": False}, d=h * d)
    cm, req, got = _steps(model, lengths, rng, {"DEBUG_CHECKS": False}, d=h * d)
    assert req.stats["length_replays"] > 10
    (family,) = cm.length_plans.families.values()
    moving = {(type(e).__name__, cm.program.nodes[e.index].kind) for e in family.entries}
    assert {("LinKernel", "FusedAttention"), ("LinView", "Slice")} <= moving
    for step, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(a["y"], b["y"], err_msg=f"step {step}")


@pytest.mark.parametrize("prompts", [[3], [14, 3]])
def test_a_sliding_window_mask_is_replayed_only_where_its_form_holds(rng, prompts):
    """A sliding window's mask (``position > last - window``, on the host from the grown
    length) is all true while the sequence is shorter than the window: a family fitted on
    such steps must not give it to the steps past the window, and one fitted past the window
    not to a later sequence's steps before it. Every step equals the plain path's."""
    d, window = 8, 12
    x = opset.parameter([1, "seq", d], np.float32, name="x")
    mask = opset.parameter([1, "total"], np.int64, name="mask")
    past = opset.read_value("cache", np.float32, PartialShape([1, -1, d]))
    keys = opset.concat([past, x], 1)
    total = opset.gather(opset.shape_of(keys), ints64(1), ints64(0))
    positions = opset.range(ints64(0), total, ints64(1), "i64")
    inside = opset.greater(positions, opset.subtract(total, ints64(window + 1)))
    scores = opset.select(inside, opset.matmul(x, keys, False, True), np.float32(-1e4))
    y = opset.matmul(opset.softmax(scores, -1), keys, False, False)
    model = Model([opset.result(y, name="y")], [x, mask], "sliding_window",
                  sinks=[opset.assign(keys, "cache")])
    cm = compile_program(model, RUNTIME_DEVICE, {"DEBUG_CHECKS": False})
    plain = compile_program(model, RUNTIME_DEVICE, {"STEP_PLANS": False})
    r = np.random.default_rng(4)
    for prompt in prompts:
        req, ref = cm.create_infer_request(), plain.create_infer_request()
        total_len = 0
        for step, n in enumerate([prompt] + [1] * 20):
            total_len += n
            feeds = {"x": r.standard_normal((1, n, d)).astype(np.float32),
                     "mask": np.ones((1, total_len), np.int64)}
            np.testing.assert_array_equal(req.infer(feeds)["y"], ref.infer(feeds)["y"],
                                          err_msg=f"prompt {prompt}, step {step}")
        assert req.stats["length_replays"] > 5
