"""Minimal hand-built repros of runtime bugs the transformers zoo found, kept as regression
tests (a bug still open would be an ``xfail(strict=True)`` naming it).

- FullyConnected weights in a later infer request (fixed on main by b35fd03, "requests share
  only what is immutable or locked"): step plans and per-binding records are shared by a
  compiled model's requests, but the reordered FullyConnected weights belonged to the request
  that made them. A request created after another one had met a binding twice replayed that
  binding's plan without ever reordering its own weights: wrong outputs (the plan's weights
  slot read another request's buffer), then ``'NoneType' object has no attribute 'alloc'`` in
  ``step_plan.run``. Met in BERT's pooler (a FullyConnected on the first token, whose input
  shape does not change with the sequence length) when ``benchmarks/bench_zoo.py`` timed
  fresh requests.
- A data-dependent op (NonZero) on a constant, in the second infer of a request (fixed on
  fuzz7): ``update_shape`` returned early when no input shape or value had changed, so the
  host evaluation that the op's execute consumes (and drops) was never made again:
  ``NonZero ... failed at runtime: TypeError: 'NoneType' object is not iterable`` on every
  infer after the first. Met in Longformer's TorchScript export (``TRANSFORMATIONS`` NONE,
  which leaves the NonZero over a constant mask of its sliding-window attention).
- Step plans replayed the shapes of what reads a data-dependent op (fixed on fuzz7): a plan
  keeps one binding's input and output shapes per primitive, but the readers of NonZero's
  indices (a Gather of the tokens routed to an expert) have, for one binding, as many rows as
  the data selects. Replaying them with the recorded rows gave wrong outputs or ``IndexError``
  in a later host op. Met in SwitchTransformers' TorchScript export (expert routing), in one
  request and in two threads each with its own request.
- Step plans left out a view that only a fused side input reads (fixed on fuzz7): a plan
  elides a view whose readers are all replayed kernels (their arguments point under it), but
  it took the elementwise op fused into a primitive for the reader, not that primitive. When
  the primitive takes the per-primitive path in the replay (it reads NonZero's rows), a request
  that never ran the view failed: ``Reshape ...: output 0 has no value yet``. Met in
  Longformer's TorchScript export (the padding mask Unsqueezed into a Select fused into a
  Softmax), by the second of two requests.
- A kernel wrote past its buffer after infers as an in-place concat (fixed on fuzz7): a
  primitive reallocated its outputs only when its implementation changed, but a concat that
  was in place for a batch of 1 (its inputs writing into its buffer, shrunk to that batch) met
  its former implementation again at batch 3 and wrote three batches into one: heap corruption
  (``malloc(): ... corrupted``, segfaults) on PoCL. Met in ProphetNet's TorchScript export
  (batch 3, 1, 3), in one request and in hypothesis' interleaved pairs.
"""
from __future__ import annotations

import numpy as np

import netpass
from netpass import Model, opset
from netpass.testing import RUNTIME_DEVICE


def _first_token_projection() -> Model:
    """``x [1, s, 8]``: ``relu(x)`` and ``x[:, 0] @ W`` (a FullyConnected whose input shape
    is [1, 8] whatever ``s`` is)."""
    x = opset.parameter([1, "s", 8], np.float32, name="x")
    w = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)
    first = opset.gather(x, np.array(0, np.int64), np.array(1, np.int64))
    return Model([opset.result(opset.relu(x), name="all"),
                  opset.result(opset.matmul(first, opset.constant(w), False, False), name="first")],
                 [x])


def test_fresh_requests_over_the_same_lengths_keep_their_weights():
    model = _first_token_projection()
    compiled = netpass.compile_model(model, device=RUNTIME_DEVICE, config={"TRANSFORMATIONS": "NONE"})
    assert "FullyConnected" in {layer.type for layer in compiled.network.layers()}
    rng = np.random.default_rng(1)
    for request in range(3):
        req = compiled.create_infer_request()
        for s in (1, 2, 3):
            feeds = {"x": rng.standard_normal((1, s, 8)).astype(np.float32)}
            got, want = req.infer(feeds), netpass.reference.infer(model, feeds)
            for key in want:
                np.testing.assert_allclose(got[key], want[key], rtol=1e-4, atol=1e-5,
                                           err_msg=f"request {request}, length {s}, {key}")


def test_data_dependent_op_on_a_constant_runs_in_every_infer():
    """``x[nonzero(c)]`` with ``c`` constant: the same indices at every length, repeats too."""
    x = opset.parameter(["n"], np.int64, name="x")
    nz = opset.non_zero(opset.constant(np.array([1, 0, 1, 1], np.int64)), "i64")
    idx = opset.reshape(nz, opset.constant(np.array([-1], np.int64)), False)
    model = Model([opset.result(opset.gather(x, idx, opset.constant(np.int64(0))), name="y")],
                  [x])
    compiled = netpass.compile_model(model, device=RUNTIME_DEVICE,
                                     config={"TRANSFORMATIONS": "NONE"})
    req = compiled.create_infer_request()
    for n in (5, 6, 6, 5):
        got = req.infer({"x": np.arange(n, dtype=np.int64) * 10})["y"]
        np.testing.assert_array_equal(got, [0, 20, 30], err_msg=f"length {n}")


def _route_and_scatter() -> Model:
    """``x [n, 4]``: the rows whose first element is positive go through ``relu(. @ W)`` and
    are scattered back into zeros (a mixture-of-experts layer with one expert)."""
    def c(v):
        return opset.constant(np.array(v))
    x = opset.parameter(["n", 4], np.float32, name="x")
    first = opset.gather(x, c(np.int64(0)), c(np.int64(1)))
    rows = opset.squeeze(opset.non_zero(opset.greater(first, c(np.float32(0))), "i64"),
                         c(np.array([0], np.int64)))
    w = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)
    routed = opset.relu(opset.matmul(opset.gather(x, rows, c(np.int64(0))), c(w), False, False))
    where = opset.broadcast(opset.unsqueeze(rows, c(np.array([1], np.int64))),
                            opset.shape_of(routed))
    back = opset.scatter_elements_update(opset.multiply(x, c(np.float32(0))), where, routed,
                                         c(np.int64(0)))
    return Model([opset.result(opset.add(back, x), name="y"),
                  opset.result(routed, name="routed")], [x])


def test_step_plans_follow_the_rows_data_selects():
    model = _route_and_scatter()
    rng = np.random.default_rng(1)
    for transformations in ("NONE", "COMMON"):
        compiled = netpass.compile_model(model, device=RUNTIME_DEVICE,
                                         config={"TRANSFORMATIONS": transformations})
        req = compiled.create_infer_request()
        for step, n in enumerate((6, 6, 7, 6, 6, 7, 6, 6, 6)):
            feeds = {"x": rng.standard_normal((n, 4)).astype(np.float32)}
            got, want = req.infer(feeds), netpass.reference.infer(model, feeds)
            for key in want:
                np.testing.assert_allclose(got[key], want[key], rtol=1e-4, atol=1e-5,
                                           err_msg=f"{transformations}, step {step}, {key}")


def test_a_later_request_replays_a_plan_whose_view_only_a_fused_input_reads():
    """``softmax(x[rows]) where keep else 0``: ``keep`` an Unsqueezed view, the Select fused
    into the Softmax, which reads rows NonZero selects."""
    def c(v):
        return opset.constant(np.array(v))
    x = opset.parameter(["n", 4], np.float32, name="x")
    bias = opset.parameter([4], np.float32, name="bias")
    first = opset.gather(x, c(np.int64(0)), c(np.int64(1)))
    rows = opset.squeeze(opset.non_zero(opset.greater(first, c(np.float32(0))), "i64"),
                         c(np.array([0], np.int64)))
    scores = opset.softmax(opset.gather(x, rows, c(np.int64(0))), 1)
    keep = opset.unsqueeze(opset.greater(bias, c(np.float32(0))), c(np.array([0], np.int64)))
    model = Model([opset.result(opset.select(keep, scores, c(np.float32(0))), name="y")],
                  [x, bias])
    compiled = netpass.compile_model(model, device=RUNTIME_DEVICE,
                                     config={"TRANSFORMATIONS": "NONE"})
    rng = np.random.default_rng(1)
    for request in range(2):
        req = compiled.create_infer_request()
        for step in range(4):
            feeds = {"x": rng.standard_normal((6, 4)).astype(np.float32),
                     "bias": rng.standard_normal(4).astype(np.float32)}
            np.testing.assert_allclose(req.infer(feeds)["y"],
                                       netpass.reference.infer(model, feeds)["y"], rtol=1e-4,
                                       atol=1e-6, err_msg=f"request {request}, step {step}")


def test_a_concat_back_from_in_place_gets_a_buffer_for_its_shapes():
    """``concat([relu(a), relu(b)], 1) + 1``, in place only at batch 1: batch 3 at length 8
    (a large buffer), 3 at length 2 (reused), 1 at length 2 (in place: the buffer shrinks),
    3 at length 2 (the implementation of two infers before). Debug checks stop a launch
    that would write past its buffer (``invariants.check_write``)."""
    a = opset.parameter(["b", "l", 64], np.float32, name="a")
    b = opset.parameter(["b", "l", 64], np.float32, name="b")
    cat = opset.concat([opset.relu(a), opset.relu(b)], 1)
    model = Model([opset.result(opset.add(cat, opset.constant(np.float32(1))), name="y")],
                  [a, b])
    compiled = netpass.compile_model(model, device=RUNTIME_DEVICE,
                                     config={"TRANSFORMATIONS": "NONE", "DEBUG_CHECKS": True})
    req = compiled.create_infer_request()
    rng = np.random.default_rng(0)
    for batch, length in ((3, 8), (3, 2), (1, 2), (3, 2)):
        feeds = {k: rng.standard_normal((batch, length, 64)).astype(np.float32) for k in "ab"}
        np.testing.assert_allclose(req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"],
                                   err_msg=f"batch {batch}, length {length}")
