"""Split / VariadicSplit run as ONE kernel writing every output (kernels.split), on PoCL
against the numpy reference, with the axis sizes as scalar arguments."""
from __future__ import annotations

import numpy as np
from graph_blocks import randn_f32

from netpass import Model, opset
from netpass.ops import VariadicSplit
from netpass.runtime import compile_program
from netpass.runtime.impls import Params
from netpass.runtime.kinds import TABLE, movement
from netpass.testing import RUNTIME_DEVICE

F32 = np.dtype(np.float32)


def _split_launches(in_shape, axis: int, sizes) -> list:
    outs = [tuple(s if k == axis else d for k, d in enumerate(in_shape)) for s in sizes]
    p = Params(row=TABLE[VariadicSplit], attrs={}, in_shapes=[in_shape, (), (len(sizes),)],
               in_dtypes=[F32, np.dtype(np.int64), np.dtype(np.int64)], out_shapes=outs,
               out_dtypes=[F32] * len(sizes), values={1: np.int64(axis), 2: np.array(sizes)},
               fused=[], extra_shapes=[], extra_dtypes=[], engine=None)
    return movement.split_impl(p, None).launches


def test_qkv_split_is_one_launch():
    (ln,) = _split_launches((1, 5, 768), 2, [256, 256, 256])
    assert ln.source.name == "split"
    assert ln.spec == [("i", 0), ("o", 0), ("o", 1), ("o", 2), 5 * 768, 768, 1, 256, 512]


def test_sequence_length_changes_only_arguments():
    a = _split_launches((1, 3, 768), 2, [256, 256, 256])[0]
    b = _split_launches((1, 117, 768), 2, [256, 256, 256])[0]
    assert a.source is b.source


def test_variadic_split_matches_reference(run_shapes, rng):
    """Three outputs along the last axis (QKV) and an inner axis with an empty part."""
    x = opset.parameter([1, -1, 12], np.float32, name="x")
    qkv = opset.variadic_split(x, np.int64(2), np.array([4, 4, 4], np.int64))
    y = opset.parameter([2, -1, 3], np.float32, name="y")
    parts = opset.variadic_split(y, np.int64(1), np.array([2, 0, -1], np.int64))
    results = [opset.result(qkv.output(j), name=f"q{j}") for j in range(3)]
    results += [opset.result(parts.output(j), name=f"p{j}") for j in (0, 2)]
    model = Model(results, [x, y])
    req = run_shapes(model, [{"x": randn_f32(rng, 1, 1, 12), "y": randn_f32(rng, 2, 3, 3)},
                             {"x": randn_f32(rng, 1, 7, 12), "y": randn_f32(rng, 2, 6, 3)}])
    assert req.stats["host_fallbacks"] == 0


def test_split_runs_one_kernel_per_call(rng):
    x = opset.parameter([1, -1, 768], np.float32, name="x")
    qkv = opset.split(opset.relu(x), np.int64(2), 3)
    model = Model([opset.result(opset.add(qkv.output(j), np.float32(j)), name=f"o{j}") for j in range(3)], [x])
    cm = compile_program(model, RUNTIME_DEVICE)
    req = cm.create_infer_request()
    for s in (1, 4):
        xv = randn_f32(rng, 1, s, 768)
        out = req.infer({"x": xv})
        for j in range(3):
            np.testing.assert_array_equal(out[f"o{j}"], np.maximum(xv[..., 256 * j:256 * (j + 1)], 0) + j)
    assert sum("void split(" in key[2] for key in req.network.kernel_objects) == 1
