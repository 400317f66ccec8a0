"""Ported from OpenVINO's GNA plugin (2023) ``gather_sinking_test.cpp`` (TransposeNCHW cases):
SubstituteGNAConvolution / SubstituteGNAMaxPool wrap the NHWC GNA op in Transposes, the filters
transposed by the same order. That test file builds the order Constants as i64; the
``transpose_nchw.cpp`` of the final GNA pipeline (what netpass follows) creates them as i32, so
the expected graphs here use i32 orders; everything else, attributes included, is compared."""
from __future__ import annotations

import numpy as np
from ov_port import check, model_of, transpose

from netpass import opset
from netpass.ngraph_passes.gna import SubstituteGNAConvolution, SubstituteGNAMaxPool
from netpass.ops.gna import gna_convolution, gna_max_pool


def kernel():
    return opset.constant(np.ones([4, 1, 3, 1], np.float32))


def test_convolution():
    x = opset.parameter([1, 1, 41, 1], np.float32)
    model = model_of([opset.convolution(x, kernel(), [2, 1], [0, 0], [0, 0], [1, 1])], [x])
    x2 = opset.parameter([1, 1, 41, 1], np.float32)
    conv = gna_convolution(transpose(x2, [0, 2, 3, 1], np.int32), transpose(kernel(), [0, 2, 3, 1], np.int32),
                           [2, 1], [0, 0], [0, 0], [1, 1])
    ref = model_of([transpose(conv, [0, 3, 1, 2], np.int32)], [x2])
    check(model, ref, SubstituteGNAConvolution())


def test_max_pool():
    x = opset.parameter([1, 1, 41, 1], np.float32)
    model = model_of([opset.max_pool(x, [2, 1], [1, 1], [0, 0], [0, 0], [4, 1]).output(0)], [x])
    x2 = opset.parameter([1, 1, 41, 1], np.float32)
    pool = gna_max_pool(transpose(x2, [0, 2, 3, 1], np.int32), [2, 1], [0, 0], [0, 0], [4, 1])
    ref = model_of([transpose(pool, [0, 3, 1, 2], np.int32)], [x2])
    check(model, ref, SubstituteGNAMaxPool())
