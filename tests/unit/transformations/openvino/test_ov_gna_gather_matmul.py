"""Ported from OpenVINO's GNA plugin (2023) ``gather_sinking_matmul_test.cpp``: a Gather on the
contracted axis of a MatMul input moves into the constant weights (forward), a Gather on a
MatMul output's columns moves through two MatMuls into the constant weights (backward)."""
from __future__ import annotations

import numpy as np
from ov_port import check, model_of

from netpass import opset
from netpass.ngraph_passes.gna import (
    GatherSinkingMatmulBackward,
    GatherSinkingMatmulForward,
)


def gather(x, indices, axis):
    return opset.gather(x, opset.constant(np.asarray(indices, np.int64)), opset.constant(np.int64(axis)))


def ones():
    return opset.constant(np.ones([20, 20], np.float32))


FORWARD, BACKWARD = np.roll(np.arange(20), -2), np.roll(np.arange(20), 2)


def test_forward():
    x = opset.parameter([20, 20], np.float32)
    mm1 = opset.matmul(gather(x, FORWARD, 1), ones(), False, False)
    model = model_of([opset.matmul(ones(), mm1, False, False)], [x])
    x2 = opset.parameter([20, 20], np.float32)
    mm1 = opset.matmul(x2, gather(ones(), BACKWARD, 0), False, False)
    ref = model_of([opset.matmul(ones(), mm1, False, False)], [x2])
    check(model, ref, GatherSinkingMatmulForward())


def test_backward():
    x = opset.parameter([20, 20], np.float32)
    mm2 = opset.matmul(ones(), opset.matmul(x, ones(), False, False), False, False)
    model = model_of([gather(mm2, FORWARD, 1)], [x])
    x2 = opset.parameter([20, 20], np.float32)
    mm1 = opset.matmul(x2, gather(ones(), FORWARD, 1), False, False)
    ref = model_of([opset.matmul(ones(), mm1, False, False)], [x2])
    check(model, ref, GatherSinkingMatmulBackward())
