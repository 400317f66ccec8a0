"""Ported from OpenVINO's GNA plugin (2023) ``gather_transpose_merge.cpp``: GatherSinkingTranspose
merges ``Transpose -> Reshape [1, N] -> Gather`` and ``Reshape [1, N] -> Gather -> Reshape ->
Transpose`` into one flat Gather whose indices combine both, for f16/f32 and 2-D to 4-D
(attributes compared)."""
from __future__ import annotations

import numpy as np
import pytest
from ov_port import check, model_of, transpose

from netpass import opset
from netpass.ngraph_passes.gna import GatherSinkingTranspose
from netpass.ngraph_passes.utils import transpose_gather_indexes

ORDERS = {2: [1, 0], 3: [0, 2, 1], 4: [0, 2, 3, 1]}


def reshape(x, shape):
    return opset.reshape(x, opset.constant(np.array(shape, np.int64)), False)


def flat_gather(x, ids):
    return opset.gather(x, opset.constant(np.asarray(ids, np.int64)), opset.constant(np.int64(1)))


def _ref(shape, et, ids, out_shape):
    x = opset.parameter(shape, et)
    return model_of([reshape(flat_gather(reshape(x, [1, int(np.prod(shape))]), ids), out_shape)], [x])


CASES = [pytest.param(et, shape, id=f"{np.dtype(et).name}-{shape}")
         for et in (np.float16, np.float32) for shape in ([16, 64], [1, 16, 64], [1, 8, 16, 64])]


@pytest.mark.parametrize("et, shape", CASES)
def test_transpose_gather(et, shape):
    n, order = int(np.prod(shape)), ORDERS[len(shape)]
    x = opset.parameter(shape, et)
    t = transpose(x, order, np.int8)
    g = flat_gather(reshape(t, [1, n]), np.arange(n)[::-1])
    out_shape = list(t.output(0).partial_shape.to_shape())
    model = model_of([reshape(g, out_shape)], [x])
    ids = np.arange(n)[::-1][transpose_gather_indexes(shape, order)]
    check(model, _ref(shape, et, ids, out_shape), GatherSinkingTranspose(), result_names=False)


@pytest.mark.parametrize("et, shape", CASES)
def test_gather_transpose(et, shape):
    n, order = int(np.prod(shape)), ORDERS[len(shape)]
    x = opset.parameter(shape, et)
    g = flat_gather(reshape(x, [1, n]), np.arange(n)[::-1])
    t = transpose(reshape(g, shape), order, np.int8)
    model = model_of([t], [x])
    ids = np.arange(n)[::-1][transpose_gather_indexes(shape, order)]
    out_shape = list(t.output(0).partial_shape.to_shape())
    check(model, _ref(shape, et, ids, out_shape), GatherSinkingTranspose(), result_names=False)
