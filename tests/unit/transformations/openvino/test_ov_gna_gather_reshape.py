"""Ported from OpenVINO's GNA plugin (2023) ``gather_sinking_reshape_test.cpp``: a Gather below
two Reshapes that only add 1s moves above them (attributes compared)."""
from __future__ import annotations

import numpy as np
from ov_port import check, model_of

from netpass import opset
from netpass.ngraph_passes.gna import GatherSinkingReshapeBackward


def gather(x, axis):
    n = x.output(0).partial_shape.to_shape()[axis]
    return opset.gather(x, opset.constant(np.roll(np.arange(n), -2).astype(np.int64)),
                        opset.constant(np.int64(axis)))


def reshape(x, shape):
    return opset.reshape(x, opset.constant(np.array(shape, np.int64)), False)


def test_backward():
    x = opset.parameter([1, 168], np.float32)
    model = model_of([gather(reshape(reshape(x, [1, 168, 1, 1]), [1, 168, 1, 1, 1]), 1)], [x])
    x2 = opset.parameter([1, 168], np.float32)
    ref = model_of([reshape(reshape(gather(x2, 1), [1, 168, 1, 1]), [1, 168, 1, 1, 1])], [x2])
    check(model, ref, GatherSinkingReshapeBackward())
