"""Fewer launches per decode step (issue 17): the general rules that take the kernels of a
transformers decoder's attention mask and rotary tables out of a step, each checked against
the reference on random data and by the launches it saves.

- a Broadcast the build proves to be to its input's own shape is bypassed (its readers, an
  elementwise region among them, read its input);
"""
from __future__ import annotations

import numpy as np

import netpass
from netpass import Model, opset
from netpass.runtime import Program, compile_program
from netpass.testing import RUNTIME_DEVICE


def _f(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _i64(v):
    return np.array(v, dtype=np.int64)


def _run(model, feeds_list):
    """(request, kernels per infer) after each feeds, outputs checked against the reference."""
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    launches = []
    for feeds in feeds_list:
        k0 = req.stats["kernels_enqueued"]
        out = req.infer(feeds)
        launches.append(req.stats["kernels_enqueued"] - k0)
        ref = netpass.reference.infer(model, feeds)
        for name, want in ref.items():
            assert out[name].dtype == want.dtype, name
            np.testing.assert_allclose(out[name], want, rtol=1e-6, atol=1e-6)
    return req, launches


# -- a Broadcast to its own shape ------------------------------------------------------------------
def test_broadcast_to_its_own_shape_is_bypassed(rng):
    x = opset.parameter([-1, -1], np.float32, name="x")
    b = opset.broadcast(opset.relu(x), opset.shape_of(x))
    model = Model([opset.result(opset.exp(b), name="y")], [x])
    prog = Program.from_model(model)
    assert not any(n.kind == "Broadcast" for n in prog.nodes)
    relu = next(n for n in prog.nodes if n.kind == "Relu")
    assert [f.row.name for f in relu.fused] == ["Exp"]
    _, launches = _run(model, [{"x": _f(rng, 3, 4)}, {"x": _f(rng, 1, 6)}])
    assert launches == [1, 1]
