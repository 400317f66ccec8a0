"""Ported from OpenVINO's GNA plugin (2023) ``gather_sinking_split_test.cpp``: a Gather on another
axis than the split axis, below two Splits, moves above them (attributes compared)."""
from __future__ import annotations

import numpy as np
from ov_port import check, model_of

from netpass import opset
from netpass.ngraph_passes.gna import GatherSinkingSplitBackward


def gather(x, axis):
    n = x.partial_shape.to_shape()[axis] if hasattr(x, "partial_shape") else x.output(0).partial_shape.to_shape()[axis]
    return opset.gather(x, opset.constant(np.roll(np.arange(n), -2).astype(np.int64)),
                        opset.constant(np.int64(axis)))


def split(x):
    return opset.split(x, opset.constant(np.int64(0)), 2)


def test_backward():
    x = opset.parameter([20, 20], np.float32)
    model = model_of([gather(split(split(x).output(0)).output(0), 1)], [x])
    x2 = opset.parameter([20, 20], np.float32)
    ref = model_of([split(split(gather(x2, 1)).output(0)).output(0)], [x2])
    check(model, ref, GatherSinkingSplitBackward(), result_names=False)   # a plain TEST: no name checks
