"""CumProd (ONNX 26): import vs onnx's reference evaluator (onnxruntime has no CumProd-26)
over random shapes, every axis (negative too), exclusive/reverse, float and integer types;
partial shapes; ONNX export, IR round trip, runtime. rtol 1e-5 (floats), exact otherwise."""
from __future__ import annotations

import numpy as np
import pytest
from opcheck import check_export, check_import, check_ir_round_trip, check_runtime, one_node

from netpass import Model, opset
from netpass.core.shape import PartialShape

RNG = np.random.default_rng(26)


@pytest.mark.parametrize("shape,axis", [((6,), 0), ((3, 4), 1), ((2, 3, 4), -2),
                                        ((2, 3, 4), 0)])
@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_matches_reference(shape, axis, exclusive, reverse, dtype):
    x = (RNG.uniform(0.5, 1.5, shape) if np.dtype(dtype).kind == "f" else
         RNG.integers(-3, 4, shape)).astype(dtype)
    feeds = {"x": x, "axis": np.array(axis, np.int64)}
    check_import(one_node("CumProd", feeds, opset=26, exclusive=exclusive, reverse=reverse),
                 feeds, rtol=1e-5, engine="reference")


def _built():
    x = opset.parameter([3, -1], "f32", "x")
    y = opset.cumprod(x, 1, exclusive=True, reverse=True)
    assert y.output(0).partial_shape == PartialShape([3, -1])
    return Model([y], [x]), {"x": RNG.uniform(0.5, 2, (3, 5)).astype(np.float32)}


def test_export_ir_and_runtime(tmp_path):
    model, feeds = _built()
    check_export(model, feeds, engine="reference")
    check_ir_round_trip(model, feeds, tmp_path)
    check_runtime(model, feeds)
