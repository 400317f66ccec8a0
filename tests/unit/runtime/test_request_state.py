"""What infer requests of one compiled model own: kernel objects (handed on to later requests
once a request is gone, never shared by two live ones), command queues; and what they share:
the reordered FullyConnected weights, made once per compiled model."""
from __future__ import annotations

import gc
import subprocess
import sys

import numpy as np

import netpass
from netpass import Model, opset
from netpass.runtime import compile_program
from netpass.runtime.models import gpt_decoder
from netpass.testing import RUNTIME_DEVICE


def _feeds(rng, n):
    return {"ids": rng.integers(0, 64, (1, n)).astype(np.int64)}


def _run(req, model, rng, lengths):
    for n in lengths:
        feeds = _feeds(rng, n)
        out = req.infer(feeds)["logits"]
        np.testing.assert_allclose(out, netpass.reference.infer(model, feeds)["logits"], rtol=1e-4, atol=1e-5)


def test_live_requests_share_no_kernel_object_or_queue(rng):
    model = gpt_decoder(64, 2, 32, 2, 64)
    cm = compile_program(model, RUNTIME_DEVICE)
    a, b = cm.create_infer_request(), cm.create_infer_request()
    _run(a, model, rng, [1, 2, 3, 3])
    _run(b, model, rng, [3, 2, 1, 3])
    ka = {id(h.kernel) for h in a.network.kernel_objects.values()}
    kb = {id(h.kernel) for h in b.network.kernel_objects.values()}
    assert ka and kb and not ka & kb
    assert a.network.queue is not b.network.queue


def test_a_gone_request_hands_its_kernels_on_without_its_arguments(rng):
    model = gpt_decoder(64, 2, 32, 2, 64)
    cm = compile_program(model, RUNTIME_DEVICE)
    a = cm.create_infer_request()
    _run(a, model, rng, [1, 2, 3, 3])
    kernels = {h.kernel.int_ptr for h in a.network.kernel_objects.values()}
    del a
    gc.collect()
    free = [h for lst in cm._free_kernels.values() for h in lst]
    assert {h.kernel.int_ptr for h in free} == kernels
    assert all(h.bufs is None and h.ints is None for h in free)
    c = cm.create_infer_request()
    _run(c, model, rng, [3, 1, 2])  # replays plans with the handed-on kernels
    assert {h.kernel.int_ptr for h in c.network.kernel_objects.values()} <= kernels


# (in a process of its own: before the fix, the next request's first clSetKernelArg ran on a
# released kernel object and the process died of a segmentation fault)
_CYCLE = """
import gc
import numpy as np
import netpass
from netpass.runtime import compile_program
from netpass.runtime.models import gpt_decoder
from netpass.testing import RUNTIME_DEVICE

model = gpt_decoder(64, 2, 32, 2, 64)
cm = compile_program(model, RUNTIME_DEVICE)
feeds = {"ids": np.random.default_rng(0).integers(0, 64, (1, 3)).astype(np.int64)}
want = netpass.reference.infer(model, feeds)["logits"]


def a_request():
    req = cm.create_infer_request()
    np.testing.assert_allclose(req.infer(feeds)["logits"], want, rtol=1e-4, atol=1e-5)
    req.set_callback(lambda userdata: req.results)  # (a cycle: request, callback, request)


for _ in range(4):
    a_request()
    gc.collect()
print("ok")
"""


def test_a_request_freed_by_the_cyclic_collector_hands_on_live_kernels():
    """A request in a reference cycle is closed inside a cyclic garbage collection, which also
    runs the finalizers of its kernel objects (a RawKernel releases its kernel): the kernels
    it hands on to the next requests must still be held (the gpt2 segfault of
    tests/models/test_decoding_scenarios.py)."""
    done = subprocess.run([sys.executable, "-X", "faulthandler", "-c", _CYCLE],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


def test_requests_share_the_reordered_weights(rng):
    x = opset.parameter([-1, 48], np.float32, name="x")
    w, bias = rng.standard_normal((40, 48)).astype(np.float32), np.zeros(40, np.float32)
    model = Model([opset.result(opset.relu(opset.fully_connected(x, w, bias)), name="y")], [x])
    cm = compile_program(model, RUNTIME_DEVICE)
    feeds = {"x": rng.standard_normal((300, 48)).astype(np.float32)}  # (rows past the GEMV)
    want = np.maximum(feeds["x"].astype(np.float64) @ w.T.astype(np.float64), 0.0)
    a, b = cm.create_infer_request(), cm.create_infer_request()
    np.testing.assert_allclose(a.infer(feeds)["y"], want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(b.infer(feeds)["y"], want, rtol=1e-4, atol=1e-4)
    # (a kernel that reads the weights [N, K] as given, Hopper's TMA GEMM, reorders nothing)
    as_given = any(i.impl.weights_as_given for i in a.network.insts if i.impl is not None)
    assert a.stats["weight_reorders"] == (0 if as_given else 1)
    assert b.stats["weight_reorders"] == 0
    ta = [i.weights_tensor for i in a.network.insts if i.weights_tensor is not None]
    tb = [i.weights_tensor for i in b.network.insts if i.weights_tensor is not None]
    assert len(ta) == len(tb) == a.stats["weight_reorders"]
    assert all(x is y for x, y in zip(ta, tb))
