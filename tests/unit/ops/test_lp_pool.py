"""LpPool against onnxruntime on random data: 1-3 spatial axes, p 1, 2, 3, pads, strides,
dilations, ceil rounding and auto_pad; the export read back by onnxruntime; the runtime.
rtol 1e-4, atol 1e-5."""
from __future__ import annotations

import numpy as np
import pytest
from opcheck import check_export, check_import, check_runtime, one_node

RNG = np.random.default_rng(22)


@pytest.mark.parametrize("shape,attrs", [
    ((2, 3, 9), {"kernel_shape": [3], "p": 1}),
    ((1, 2, 7, 6), {"kernel_shape": [3, 2], "p": 2, "pads": [1, 0, 1, 1]}),
    ((1, 2, 8, 8), {"kernel_shape": [2, 3], "p": 3, "strides": [2, 2], "ceil_mode": 1}),
    ((1, 1, 9, 9), {"kernel_shape": [2, 2], "p": 2, "dilations": [2, 3]}),
    ((1, 2, 6, 7), {"kernel_shape": [3, 3], "p": 2, "auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((1, 2, 4, 5, 6), {"kernel_shape": [2, 2, 3], "p": 2}),
])
def test_lp_pool_matches_onnxruntime(shape, attrs):
    x = RNG.standard_normal(shape).astype(np.float32)
    model = check_import(one_node("LpPool", {"x": x}, opset=18, **attrs), {"x": x})
    check_export(model, {"x": x})
    check_runtime(model, {"x": x})
