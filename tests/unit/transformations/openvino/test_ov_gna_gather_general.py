"""Ported from OpenVINO's GNA plugin (2023) ``gather_sinking_general_test.cpp``: GatherSinkingGeneral
moves a Gather forward through a Multiply (the other branch gets the inverse, which backward
sinking then moves above its Tanh) and a Sinh to the Result (attributes compared)."""
from __future__ import annotations

import numpy as np
from ov_port import check, model_of

from netpass import opset
from netpass.ngraph_passes.gna import GatherSinkingGeneral


def gather(x, indices):
    return opset.gather(x, opset.constant(np.asarray(indices, np.int64)), opset.constant(np.int64(1)))


FORWARD, BACKWARD = np.roll(np.arange(20), -2), np.roll(np.arange(20), 2)


def test_general():
    a, b = opset.parameter([20, 20], np.float32), opset.parameter([20, 20], np.float32)
    model = model_of([opset.sinh(opset.multiply(gather(a, FORWARD), opset.tanh(b)))], [a, b])
    a2, b2 = opset.parameter([20, 20], np.float32), opset.parameter([20, 20], np.float32)
    ref = model_of([gather(opset.sinh(opset.multiply(a2, opset.tanh(gather(b2, BACKWARD)))), FORWARD)], [a2, b2])
    check(model, ref, GatherSinkingGeneral())
