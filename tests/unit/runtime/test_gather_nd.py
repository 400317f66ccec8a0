"""GatherND on the ``gather_nd`` kernel (``runtime.kinds.indexing``), against the reference on
random data: batch dims, index tuples of every length, negative indices, int32 and int64
indices, boolean data (the dynamo exporter's padding-mask lookup of a decoder)."""
from __future__ import annotations

import numpy as np
import pytest

import netpass
from netpass import Model, opset
from netpass.runtime import compile_program
from netpass.testing import RUNTIME_DEVICE


def _case(rng, data_shape, idx_lead, m, batch_dims, idx_dtype, data_dtype):
    data = rng.standard_normal(data_shape).astype(np.float32)
    if data_dtype == np.bool_:
        data = data > 0
    dims = data_shape[batch_dims:batch_dims + m]
    idx = np.stack([rng.integers(-d, d, size=idx_lead) for d in dims], -1).astype(idx_dtype)
    return data, idx


@pytest.mark.parametrize("data_shape,idx_lead,m,batch_dims", [
    ((5, 7), (3,), 1, 0),
    ((5, 7), (2, 3), 2, 0),
    ((4, 5, 6), (4, 3), 1, 1),         # one batch dim, slices of 6
    ((2, 3, 5, 7), (2, 3, 4), 2, 2),   # two batch dims, scalars
    ((3, 4, 5, 2), (6,), 3, 0),
])
@pytest.mark.parametrize("idx_dtype", [np.int64, np.int32])
@pytest.mark.parametrize("data_dtype", [np.float32, np.bool_])
def test_gather_nd_runs_a_kernel(rng, data_shape, idx_lead, m, batch_dims, idx_dtype, data_dtype):
    data, idx = _case(rng, data_shape, idx_lead, m, batch_dims, idx_dtype, data_dtype)
    x = opset.parameter(list(data.shape), data.dtype, name="x")
    i = opset.parameter(list(idx.shape), idx.dtype, name="i")
    model = Model([opset.result(opset.gather_nd(x, i, batch_dims), name="y")], [x, i])
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    feeds = {"x": data, "i": idx}
    np.testing.assert_array_equal(req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"])
    assert req.stats["host_fallbacks"] == 0 and req.stats["kernels_enqueued"] == 1
