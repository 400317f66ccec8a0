"""ScatterNDUpdate and ScatterElementsUpdate (reduction none) on the ``scatter_nd`` and
``scatter_elements`` kernels after a copy of the data (``runtime.kinds.indexing``), against
the reference on random data: DeepSeek-V3's key heads put together from two slices
(``key[..., :nope] = k_nope``, the TorchScript export's ScatterND over every index of the
last axis), slices of rows, negative indices, an axis in the middle."""
from __future__ import annotations

import numpy as np
import pytest

import netpass
from netpass import Model, opset
from netpass.runtime import compile_program
from netpass.testing import RUNTIME_DEVICE


def _run(model, feeds):
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    got = req.infer(feeds)["y"]
    np.testing.assert_array_equal(got, netpass.reference.infer(model, feeds)["y"])
    assert req.stats["host_fallbacks"] == 0 and req.stats["kernels_enqueued"] == 2


def test_scatter_nd_of_a_slice_of_the_last_axis(rng):
    """y[b, h, s, :8] = u: index tuples of all four dims (what torch's slice assignment
    exports), as DeepSeek-V3's keys [b, heads, s, nope + rope]."""
    data = rng.standard_normal((2, 4, 5, 16)).astype(np.float32)
    upd = rng.standard_normal((2, 4, 5, 8)).astype(np.float32)
    grid = np.stack(np.meshgrid(*[np.arange(d) for d in (2, 4, 5, 8)], indexing="ij"), -1)
    x = opset.parameter([-1, 4, -1, 16], np.float32, name="x")
    i = opset.parameter([-1, 4, -1, 8, 4], np.int64, name="i")
    u = opset.parameter([-1, 4, -1, 8], np.float32, name="u")
    model = Model([opset.result(opset.scatter_nd_update(x, i, u), name="y")], [x, i, u])
    _run(model, {"x": data, "i": grid.astype(np.int64), "u": upd})


@pytest.mark.parametrize("idx_dtype", [np.int64, np.int32])
def test_scatter_nd_of_rows_with_negative_indices(rng, idx_dtype):
    data = rng.standard_normal((7, 3, 5)).astype(np.float32)
    idx = np.array([[0, 2], [-1, 0], [3, -2]], idx_dtype)
    upd = rng.standard_normal((3, 5)).astype(np.float32)
    x = opset.parameter([7, 3, 5], np.float32, name="x")
    i = opset.parameter([3, 2], idx_dtype, name="i")
    u = opset.parameter([3, 5], np.float32, name="u")
    model = Model([opset.result(opset.scatter_nd_update(x, i, u), name="y")], [x, i, u])
    _run(model, {"x": data, "i": idx, "u": upd})


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scatter_elements_along_an_axis(rng, axis):
    data = rng.standard_normal((4, 6, 5)).astype(np.float32)
    shape = list(data.shape)
    shape[axis] = 3
    d = data.shape[axis]
    # distinct indices along the axis (repeats leave one of their updates: undefined)
    idx = np.argsort(rng.random(data.shape), axis=axis).take(range(3), axis=axis) - d // 2
    upd = rng.standard_normal(shape).astype(np.float32)
    x = opset.parameter(list(data.shape), np.float32, name="x")
    i = opset.parameter(shape, np.int64, name="i")
    u = opset.parameter(shape, np.float32, name="u")
    y = opset.scatter_elements_update(x, i, u, np.int64(axis))
    model = Model([opset.result(y, name="y")], [x, i, u])
    _run(model, {"x": data, "i": idx.astype(np.int64), "u": upd})
