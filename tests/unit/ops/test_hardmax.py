"""Hardmax: import vs onnxruntime at opset 11 (the 2-D view from ``axis``) and 13 (one axis)
over random shapes, every axis, with ties (the first maximum wins); ONNX export of both forms,
IR round trip, runtime. Exact."""
from __future__ import annotations

import numpy as np
import pytest
from opcheck import check_export, check_import, check_ir_round_trip, check_runtime, one_node

from netpass import Model, opset

RNG = np.random.default_rng(11)


@pytest.mark.parametrize("opset_version", [11, 13])
@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_matches_onnxruntime(opset_version, axis):
    x = RNG.integers(-2, 3, (2, 3, 4)).astype(np.float32)  # ties
    model = check_import(one_node("Hardmax", {"x": x}, opset=opset_version, axis=axis), {"x": x})
    check_export(model, {"x": x})


def test_ir_and_runtime(tmp_path):
    x = opset.parameter([3, 5], "f32", "x")
    model = Model([opset.hardmax(x, 0)], [x])
    feeds = {"x": RNG.standard_normal((3, 5)).astype(np.float32)}
    check_ir_round_trip(model, feeds, tmp_path)
    check_runtime(model, feeds)
