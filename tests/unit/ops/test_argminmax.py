"""ONNX ArgMax/ArgMin (TopK compositions) vs onnxruntime: random data with many ties (small
integers), every axis, keepdims, select_last_index, float and integer types. Exact."""
from __future__ import annotations

import numpy as np
import pytest
from opcheck import check_import, check_runtime, one_node

RNG = np.random.default_rng(13)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("last", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_matches_onnxruntime(op, axis, keepdims, last, dtype):
    x = RNG.integers(-2, 3, size=(3, 4, 5)).astype(dtype)  # many ties
    proto = one_node(op, {"x": x}, opset=13, axis=axis, keepdims=keepdims,
                     select_last_index=last)
    check_import(proto, {"x": x})


def test_last_index_on_the_runtime():
    x = RNG.integers(0, 2, size=(4, 6)).astype(np.float32)
    model = check_import(one_node("ArgMax", {"x": x}, opset=13, axis=1, select_last_index=1),
                         {"x": x})
    check_runtime(model, {"x": x})
