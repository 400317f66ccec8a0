"""What the runtime's tests share: graph pieces built the way exporters write them, and the
one-line array helpers (random float32 data, int64 arrays, relative L2 error) every file used
to define again."""
from __future__ import annotations

import numpy as np

from netpass import Model, opset
from netpass.runtime import compile_program


def repeat_kv(x, kv_heads: int, group: int, head_size: int):
    """transformers' repeat_kv: [1, kv_heads, s, head_size] -> [1, kv_heads * group, s,
    head_size], each head repeated ``group`` times (Unsqueeze, Broadcast to a target read off
    x's shape, Reshape)."""
    seq = opset.gather(opset.shape_of(x), np.array([2], np.int64), np.int64(0))
    target = opset.concat([np.array([1, kv_heads, group], np.int64), seq,
                           np.array([head_size], np.int64)], 0)
    expanded = opset.broadcast(opset.unsqueeze(x, np.array([2], np.int64)), target,
                               "bidirectional")
    return opset.reshape(expanded, np.array([1, kv_heads * group, -1, head_size], np.int64),
                         False)


def randn_f32(rng: np.random.Generator, *shape: int, scale: float = 1.0) -> np.ndarray:
    """Standard normal float32 data of ``shape`` (times ``scale``) drawn from ``rng``."""
    return (scale * rng.standard_normal(shape)).astype(np.float32)


def ints64(v) -> np.ndarray:
    """``v`` as an int64 array (shape, axes and index operands)."""
    return np.array(v, dtype=np.int64)


def rel_l2(got, want) -> float:
    """Relative L2 error ``|got - want| / |want|`` in float64; a reference of zeros counts as
    1e-12 (zeros against zeros: 0)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-12))


def rel_l2_unfloored(got, want) -> float:
    """:func:`rel_l2` without the floor: NaN or inf where ``want`` is all zeros, so that a
    reference of zeros never passes a tolerance."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def check_fc_gelu_residual(device: str, rng: np.random.Generator, tol: float,
                           rows=(70, 17, 99), hint: str = "tf32", n: int = 36):
    """A FullyConnected [?, 72] x [n, 72]^T with bias, tanh GELU and a residual add at
    precision ``hint``, run over ``rows`` in one request against float64 (relative L2 <=
    ``tol``); the request, for the caller to ask which kernels it built."""
    x = opset.parameter([-1, 72], np.float32, name="x")
    r = opset.parameter([-1, n], np.float32, name="r")
    w, bias = randn_f32(rng, n, 72), randn_f32(rng, n)
    y = opset.add(opset.gelu(opset.fully_connected(x, w, bias), "tanh"), r)
    model = Model([opset.result(y, name="y")], [x, r])
    req = compile_program(model, device,
                          {"INFERENCE_PRECISION_HINT": hint}).create_infer_request()
    for m in rows:
        xv, rv = randn_f32(rng, m, 72), randn_f32(rng, m, n)
        z = xv.astype(np.float64) @ w.T.astype(np.float64) + bias
        want = 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z ** 3))) + rv
        assert rel_l2_unfloored(req.infer({"x": xv, "r": rv})["y"], want) <= tol, m
    return req
