"""Ported from OpenVINO's GNA plugin (2023) ``gather_sinking_fuse_test.cpp``: two Gathers on one
axis that cancel are removed, on different axes they stay, otherwise they become one Gather
(comparator with attributes, so the fused indices are compared)."""
from __future__ import annotations

import numpy as np
from ov_port import check, model_of

from netpass import opset
from netpass.ngraph_passes.gna import GatherSinkingFuse


def gather(x, indices, axis):
    return opset.gather(x, opset.constant(np.array(indices, np.int64)), opset.constant(np.int64(axis)))


def _model(i2, axis2):
    x = opset.parameter([1, 3, 80], np.float32)
    g = gather(gather(opset.tanh(x), [2, 0, 1], 1), i2, axis2)
    return model_of([opset.tanh(g)], [x])


def test_remove():
    x = opset.parameter([1, 3, 80], np.float32)
    check(_model([1, 2, 0], 1), model_of([opset.tanh(opset.tanh(x))], [x]), GatherSinkingFuse())


def test_different_axis():
    check(_model([1, 2, 0], 2), None, GatherSinkingFuse())


def test_combine():
    x = opset.parameter([1, 3, 80], np.float32)
    ref = model_of([opset.tanh(gather(opset.tanh(x), [0, 2, 1], 1))], [x])
    check(_model([1, 0, 2], 1), ref, GatherSinkingFuse())
