"""BitCast (ONNX 26) vs onnx's reference evaluator (onnxruntime has no BitCast): every pair of
same-width types among the numpy and small types, scalar to 3-D; refusals; export, runtime."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from opcheck import check_export, check_import, check_runtime, one_node

from netpass import Model, opset
from netpass.core.types import Type
from netpass.errors import NetpassError

RNG = np.random.default_rng(26)
GROUPS = {8: ["u8", "i8", "f8e4m3", "f8e5m2", "boolean"], 16: ["f16", "bf16", "i16", "u16"],
          32: ["f32", "i32", "u32"], 64: ["f64", "i64", "u64"]}
PAIRS = [(a, b) for group in GROUPS.values() for a in group for b in group if a != b and
         "boolean" not in (a, b)]


@pytest.mark.parametrize("src,dst", PAIRS)
@pytest.mark.parametrize("shape", [(), (5,), (2, 3, 4)])
def test_matches_reference(src, dst, shape):
    s = Type.of(src)
    bits = RNG.integers(0, 256, size=shape + (s.size,), dtype=np.uint8)
    x = bits.view(s.dtype).reshape(shape)
    to = helper.np_dtype_to_tensor_dtype(Type.of(dst).dtype)
    check_import(one_node("BitCast", {"x": x}, opset=26, to=to), {"x": x}, rtol=0, atol=0,
                 engine="reference")


def test_width_must_match():
    with pytest.raises(NetpassError, match="bits"):
        opset.bitcast(opset.parameter([2], "f32"), "f16")
    with pytest.raises(NetpassError, match="strings"):
        opset.bitcast(opset.parameter([2], "string"), "i64")


def test_export_and_runtime():
    x = opset.parameter([3, 4], "f32", "x")
    model = Model([opset.bitcast(x, "i32")], [x])
    feeds = {"x": RNG.standard_normal((3, 4)).astype(np.float32)}
    check_export(model, feeds, engine="reference")
    check_runtime(model, feeds)
