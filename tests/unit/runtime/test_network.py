"""The dynamic pipeline: runtime skips, in-place concat, implementation cache, shape_of
sub-graphs on the host, update_shape / argument-setting skips, host waits, devices."""
from __future__ import annotations

import numpy as np
import pytest
from graph_blocks import ints64, randn_f32

import netpass
from netpass import Model, opset
from netpass.errors import DeviceError, InputError, ShapeInferenceError
from netpass.runtime import Program, compile_program, devices, resolve_device_name
from netpass.testing import RUNTIME_DEVICE

pocl_only = pytest.mark.skipif(RUNTIME_DEVICE != "CPU", reason="checks the kernel choices on PoCL")


def _one_output(node, *params):
    return Model([opset.result(node, name="y")], list(params))


def test_permute_of_size_one_dims_is_skipped(run_shapes, rng):
    x = opset.parameter([-1, -1, -1, -1], np.float32, name="x")
    model = _one_output(opset.relu(opset.transpose(x, ints64([0, 2, 1, 3]))), x)
    req = run_shapes(model, [{"x": randn_f32(rng, 2, 1, 5, 4)}])
    assert req.stats["skipped"] == 1
    req = run_shapes(model, [{"x": randn_f32(rng, 2, 3, 5, 4)}])
    assert req.stats["skipped"] == 0


def test_reshape_squeeze_unsqueeze_alias_their_input(run_shapes, rng):
    x = opset.parameter([-1, 1, -1], np.float32, name="x")
    r = opset.reshape(opset.squeeze(x, ints64([1])), ints64([0, -1, 2]), True)
    model = _one_output(opset.relu(opset.unsqueeze(r, ints64([0]))), x)
    req = run_shapes(model, [{"x": randn_f32(rng, 3, 1, 8)}, {"x": randn_f32(rng, 2, 1, 6)}])
    assert req.stats["skipped"] == 6
    assert req.stats["kernels_enqueued"] == 2


def test_gather_with_identity_indices_is_skipped(run_shapes, rng):
    x = opset.parameter([-1, -1], np.float32, name="x")
    idx = opset.parameter([-1], np.int64, name="idx")
    model = _one_output(opset.relu(opset.gather(x, idx, ints64(1))), x, idx)
    req = run_shapes(model, [{"x": randn_f32(rng, 3, 4), "idx": ints64([0, 1, 2, 3])}])
    assert req.stats["skipped"] == 1
    req = run_shapes(model, [{"x": randn_f32(rng, 3, 4), "idx": ints64([0, 2, 1, 3])}])
    assert req.stats["skipped"] == 0


def test_slice_of_everything_is_skipped(run_shapes, rng):
    x = opset.parameter([-1, -1], np.float32, name="x")
    s = opset.strided_slice(x, ints64([0, 0]), ints64([0, 0]), ints64([1, 1]), [1, 1], [1, 1])
    model = _one_output(opset.relu(s), x)
    req = run_shapes(model, [{"x": randn_f32(rng, 3, 4)}, {"x": randn_f32(rng, 5, 2)}])
    assert req.stats["skipped"] == 2


def test_partial_slice_runs(run_shapes, rng):
    x = opset.parameter([-1, -1], np.float32, name="x")
    s = opset.slice(x, ints64([1]), ints64([100]), ints64([1]), ints64([1]))
    req = run_shapes(_one_output(opset.relu(s), x), [{"x": randn_f32(rng, 3, 4)}])
    assert req.stats["skipped"] == 0


def test_broadcast_to_the_same_shape_is_skipped(run_shapes, rng):
    """To another input's shape, the same at run time: skipped then (to its own shape, the
    build bypasses it: test_decode_launches)."""
    x = opset.parameter([-1, -1], np.float32, name="x")
    t = opset.parameter([-1, -1], np.float32, name="t")
    model = _one_output(opset.relu(opset.broadcast(x, opset.shape_of(t))), x, t)
    req = run_shapes(model, [{"x": randn_f32(rng, 3, 4), "t": randn_f32(rng, 3, 4)},
                             {"x": randn_f32(rng, 2, 6), "t": randn_f32(rng, 2, 6)}])
    assert req.stats["skipped"] == 2


def test_crop_at_offset_zero_of_full_size_is_skipped(run_shapes, rng):
    x = opset.parameter([-1, 8], np.float32, name="x")
    model = _one_output(opset.relu(opset.crop_ie(x, [1], [8], [0])), x)
    req = run_shapes(model, [{"x": randn_f32(rng, 3, 8)}, {"x": randn_f32(rng, 5, 8)}])
    assert req.stats["skipped"] == 2


def _concat_model():
    a = opset.parameter([1, -1, 16], np.float32, name="a")
    b = opset.parameter([1, -1, 16], np.float32, name="b")
    c = opset.concat([opset.relu(a), opset.sigmoid(b)], 1)
    return _one_output(opset.multiply(c, np.float32(2.0)), a, b)


def test_concat_inputs_write_in_place(run_shapes, rng):
    model = _concat_model()
    prog = Program.from_model(model)
    concat = next(n for n in prog.nodes if n.kind == "Concat")
    assert concat.inplace_concat and concat.runtime_skippable
    order = [n.kind for n in prog.exec_order]
    assert order.index("Concat") - order.index("Sigmoid") == 1
    req = run_shapes(model, [{"a": randn_f32(rng, 1, 3, 16), "b": randn_f32(rng, 1, 5, 16)},
                             {"a": randn_f32(rng, 1, 4, 16), "b": randn_f32(rng, 1, 2, 16)}])
    assert req.stats["skipped"] == 2
    assert req.stats["kernels_enqueued"] == 6


def test_concat_in_place_buffer_is_not_one_its_inputs_still_read(rng):
    """An in-place concat's buffer is written from its first input's kernel on: the pool must
    not hand it a buffer whose tensor a later input still reads (here the halves of ``x @ w``,
    which dies at the second input's GEMM, before the concat's own place: a mixture of
    experts' tokens split by expert, each half through its expert, concatenated)."""
    x = opset.parameter([-1, 64], np.float32, name="x")
    w, v, u = (randn_f32(rng, 64, 64) for _ in range(3))
    halves = opset.split(opset.matmul(x, w, False, False), ints64(0), 2)
    # (the second half's GEMM first: it writes the rows the first half's GEMM then reads)
    second = opset.matmul(halves.output(1), u, False, False)
    c = opset.concat([second, opset.matmul(halves.output(0), v, False, False)], 0)
    model = _one_output(opset.relu(c), x)
    prog = Program.from_model(model)
    assert next(n for n in prog.nodes if n.kind == "Concat").inplace_concat
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    for n in (6, 10, 6):
        xv = randn_f32(rng, n, 64)
        s = xv @ w
        want = np.maximum(np.concatenate([s[n // 2:] @ u, s[:n // 2] @ v]), 0)
        np.testing.assert_allclose(req.infer({"x": xv})["y"], want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("symbolic", [True, False])
def test_concat_input_leaves_the_concat_buffer_when_no_longer_in_place(run_shapes, rng,
                                                                       symbolic):
    """An input of unchanged shape that wrote into the concat's buffer last infer writes into
    a buffer of its own again once the concat is no longer in place (an empty input): a
    mixture of experts' tokens per expert, one expert getting none (JetMoE, dynamo)."""
    xs = [opset.parameter([-1, 8], np.float32, name=n) for n in "abc"]
    w = randn_f32(rng, 8, 8)
    c = opset.concat([opset.matmul(x, w, False, False) for x in xs], 0)
    model = _one_output(opset.relu(c), *xs)
    assert next(n for n in Program.from_model(model).nodes if n.kind == "Concat").inplace_concat

    def feeds(*rows):
        return {n: randn_f32(rng, r, 8) for n, r in zip("abc", rows)}
    # (not in place, in place with b's shape unchanged, not in place again: b kept its view)
    run_shapes(model, [feeds(0, 1, 1), feeds(1, 1, 1), feeds(2, 1, 0), feeds(2, 1, 0)],
               config={"SYMBOLIC_SHAPES": symbolic})


def test_concat_not_in_place_when_inputs_are_not_contiguous_chunks(run_shapes, rng):
    a = opset.parameter([-1, -1], np.float32, name="a")
    model = _one_output(opset.concat([opset.relu(a), opset.exp(a)], 1), a)
    req = run_shapes(model, [{"a": randn_f32(rng, 2, 3)}])
    assert req.stats["skipped"] == 0


def test_repeated_shapes_hit_the_impl_cache(rng):
    model = _concat_model()
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    feeds = {"a": randn_f32(rng, 1, 3, 16), "b": randn_f32(rng, 1, 5, 16)}
    req.infer(feeds)
    per_run = req.stats["impl_cache_misses"]
    req.infer({"a": randn_f32(rng, 1, 4, 16), "b": randn_f32(rng, 1, 2, 16)})
    before = dict(req.stats)
    req.infer(feeds)
    assert req.stats["impl_cache_misses"] == before["impl_cache_misses"] == 2 * per_run
    assert req.stats["impl_cache_hits"] == before["impl_cache_hits"] + per_run


def test_impl_cache_capacity_evicts(rng):
    x = opset.parameter([-1], np.float32, name="x")
    model = _one_output(opset.relu(x), x)
    cm = compile_program(model, RUNTIME_DEVICE, {"IMPLS_CACHE_CAPACITY": 2})
    req = cm.create_infer_request()
    for n in (3, 4, 5, 3):
        req.infer({"x": randn_f32(rng, n)})
    assert len(cm.impl_cache) == 2
    assert req.stats["impl_cache_misses"] == 4


def test_unchanged_shapes_skip_shape_inference_and_argument_setting(rng):
    model = _concat_model()
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    feeds = {"a": randn_f32(rng, 1, 3, 16), "b": randn_f32(rng, 1, 5, 16)}
    # the second infer takes the symbolic path (its binding was checked by the first), the
    # third builds its step plan, the fourth replays it and sets its arguments once
    for _ in range(4):
        req.infer(feeds)
    before = dict(req.stats)
    out = req.infer({k: v + 1 for k, v in feeds.items()})
    assert req.stats["shape_updates"] == before["shape_updates"]
    assert req.stats["set_arguments"] == before["set_arguments"]
    assert req.stats["allocations"] == before["allocations"]
    ref = netpass.reference.infer(model, {k: v + 1 for k, v in feeds.items()})
    np.testing.assert_allclose(out["y"], ref["y"], rtol=1e-5)


def test_shape_of_subgraph_runs_on_host_without_kernels(run_shapes, rng):
    x = opset.parameter([-1, -1, 8], np.float32, name="x")
    shape = opset.shape_of(x)
    rows = opset.multiply(opset.gather(shape, ints64([0]), ints64(0)), opset.gather(shape, ints64([1]), ints64(0)))
    target = opset.concat([rows, ints64([8])], 0)
    model = _one_output(opset.relu(opset.reshape(x, target, False)), x)
    prog = Program.from_model(model)
    assert {n.kind for n in prog.nodes if n.in_shape_of_subgraph} >= {"ShapeOf", "Gather", "Multiply", "Concat"}
    req = run_shapes(model, [{"x": randn_f32(rng, 2, 3, 8)}, {"x": randn_f32(rng, 4, 1, 8)}])
    assert req.stats["kernels_enqueued"] == 2  # the Relu, twice
    assert req.stats["host_waits"] == 2        # the output reads only


def test_one_host_wait_per_inference_without_value_dependent_shapes(run_shapes, rng):
    req = run_shapes(_concat_model(), [{"a": randn_f32(rng, 1, 3, 16), "b": randn_f32(rng, 1, 5, 16)}] * 3)
    assert req.stats["host_waits"] == 3


def test_value_dependent_shape_reads_back_from_the_device(run_shapes, rng):
    x = opset.parameter([-1], np.float32, name="x")
    n = opset.parameter([1], np.int64, name="n")
    target = opset.add(n, ints64([0]))  # computed by a device kernel
    model = _one_output(opset.reshape(opset.relu(x), target, False), x, n)
    req = run_shapes(model, [{"x": randn_f32(rng, 6), "n": ints64([6])}])
    assert req.stats["host_waits"] == 2


def test_profiling_reports_per_primitive_times(rng):
    model = _concat_model()
    req = compile_program(model, RUNTIME_DEVICE, {"PROFILING": True}).create_infer_request()
    req.infer({"a": randn_f32(rng, 1, 3, 16), "b": randn_f32(rng, 1, 5, 16)})
    times = req.get_profiling_info()
    assert len(times) == 3 and all(t >= 0 for t in times.values())


def test_reference_device_matches(rng):
    model = _concat_model()
    feeds = {"a": randn_f32(rng, 1, 3, 16), "b": randn_f32(rng, 1, 5, 16)}
    out = compile_program(model, "REFERENCE").create_infer_request().infer(feeds)
    np.testing.assert_array_equal(out["y"], netpass.reference.infer(model, feeds)["y"])


def test_gpu_request_without_gpu_raises_device_error():
    if any("GPU" in d["type"] for d in devices()):
        pytest.skip("a GPU is present")
    with pytest.raises(DeviceError, match="GPU"):
        compile_program(_concat_model(), "GPU")


def test_netpass_device_env_overrides_the_default(monkeypatch):
    monkeypatch.setenv("NETPASS_DEVICE", "reference")
    assert resolve_device_name("AUTO") == "REFERENCE"
    assert resolve_device_name(None) == "REFERENCE"


def test_netpass_device_env_leaves_a_named_device(monkeypatch):
    monkeypatch.setenv("NETPASS_DEVICE", "reference")
    assert resolve_device_name("CPU") == "CPU"


@pocl_only
def test_devices_lists_pocl():
    assert any(d["type"].endswith("CPU") for d in devices())


def test_missing_input_names_the_input(rng):
    req = compile_program(_concat_model(), RUNTIME_DEVICE).create_infer_request()
    with pytest.raises(InputError, match="'b'"):
        req.infer({"a": randn_f32(rng, 1, 3, 16)})


def test_crop_of_a_contiguous_piece_is_a_view_at_its_offset(run_shapes, rng):
    x = opset.parameter([1, -1], np.float32, name="x")
    model = _one_output(opset.relu(opset.crop_ie(opset.exp(x), [1], [8], [4])), x)
    req = run_shapes(model, [{"x": randn_f32(rng, 1, 20)}, {"x": randn_f32(rng, 1, 12)}])
    assert req.stats["skipped"] == 2


def test_crop_of_a_strided_piece_copies(run_shapes, rng):
    x = opset.parameter([-1, 20], np.float32, name="x")
    model = _one_output(opset.relu(opset.crop_ie(opset.exp(x), [1], [8], [4])), x)
    req = run_shapes(model, [{"x": randn_f32(rng, 3, 20)}])
    assert req.stats["skipped"] == 0


def test_interleaved_requests_share_kernels_but_not_arguments(rng):
    model = _concat_model()
    cm = compile_program(model, RUNTIME_DEVICE)
    r1, r2 = cm.create_infer_request(), cm.create_infer_request()
    f1 = {"a": randn_f32(rng, 1, 3, 16), "b": randn_f32(rng, 1, 5, 16)}
    f2 = {"a": randn_f32(rng, 1, 2, 16), "b": randn_f32(rng, 1, 1, 16)}
    for _ in range(2):
        for req, feeds in ((r1, f1), (r2, f2)):
            out = req.infer(feeds)
            np.testing.assert_allclose(out["y"], netpass.reference.infer(model, feeds)["y"], rtol=1e-5)


def test_same_op_with_differently_shaped_fused_constants_gets_its_own_impl(run_shapes, rng):
    x = opset.parameter([3, 4], np.float32, name="x")
    w = randn_f32(rng, 4, 4)
    a = opset.add(opset.matmul(x, w, False, False), randn_f32(rng, 4))        # bias [4]
    b = opset.add(opset.matmul(x, w, False, False), randn_f32(rng, 3, 1))     # bias [3, 1]
    model = Model([opset.result(a, name="a"), opset.result(b, name="b")], [x])
    req = run_shapes(model, [{"x": randn_f32(rng, 3, 4)}])
    assert req.stats["fused"] == 2 and req.stats["impl_cache_misses"] == 2


def test_dropping_a_request_frees_its_device_memory(rng):
    """A request's primitives and pool point back at its network; the request breaks those
    links when it goes, so its buffers are freed at once, not at a later cyclic collection."""
    import gc

    from netpass.runtime.models import gpt_decoder
    cm = compile_program(gpt_decoder(64, 2, 32, 2, 64), RUNTIME_DEVICE)
    gc.disable()
    try:
        req = cm.create_infer_request()
        req.infer({"ids": rng.integers(0, 64, (1, 5)).astype(np.int64)})
        held = cm.engine.used_device_memory
        del req
        assert cm.engine.used_device_memory < held
    finally:
        gc.enable()


def test_impl_buffers_are_never_those_of_another_impl_with_its_id(rng):
    """An impl's uploaded buffers (a reflect Pad's index map) are kept with the impl itself: an
    impl the implementations cache evicted is freed, and a new impl may get its id; the new
    one must get its own buffers, not the old one's (a stale index map read out of bounds and
    crashed PoCL in the zoo's shape fuzzing)."""
    x = opset.parameter([-1, 4], np.float32, name="x")
    y = opset.pad(x, np.array([0, 1], np.int64), np.array([0, 2], np.int64), "reflect")
    req = compile_program(Model([opset.result(y, name="y")], [x]),
                          RUNTIME_DEVICE).create_infer_request()
    net = req.network
    small, large = rng.standard_normal((2, 4)).astype(np.float32), \
        rng.standard_normal((6, 4)).astype(np.float32)
    req.infer({"x": small})
    (old_impl, old_bufs), = net._impl_bufs.values()
    req.infer({"x": large})
    new_impl = next(i for i, _ in net._impl_bufs.values() if i is not old_impl)
    # the old impl's entry standing under the new impl's id, as when the id is reused
    net._impl_bufs = {id(new_impl): (old_impl, old_bufs)}
    assert net.impl_buffers(new_impl) is not old_bufs
    got = req.infer({"x": large})["y"]
    np.testing.assert_array_equal(got, np.pad(large, ((0, 0), (1, 2)), mode="reflect"))


def test_split_lengths_that_miss_the_input_raise(rng):
    """Constant split lengths that do not add up to the run-time dim (a TorchScript trace of a
    mixture of experts fixes its example's tokens per expert) raise the op's shape error, and
    no kernel reads or writes past the input (the split kernel once corrupted the heap)."""
    x = opset.parameter([-1, 8], np.float32, name="x")
    pieces = opset.variadic_split(x, np.int64(0), ints64([1, 2, 3]))
    model = Model([opset.result(opset.relu(pieces.output(i)), name=f"y{i}") for i in range(3)],
                  [x])
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    req.infer({"x": randn_f32(rng, 6, 8)})
    with pytest.raises(ShapeInferenceError, match="do not add up"):
        req.infer({"x": randn_f32(rng, 16, 8)})
