"""OpenVINO ConvertPromoteTypes-14: the promotion rule against OpenVINO's own type inference
for every pair of its numeric types (tensors and scalars, both attribute switches, both u64
targets), netpass's reference against OpenVINO's CPU plugin on the IR netpass writes and on
IR OpenVINO writes, the IR round trip, the runtime (host fallback), and the error. Values
exact (conversions of exactly representable data)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from opcheck import check_ir_round_trip, check_openvino, check_reads_openvino_ir, check_runtime

import netpass
from netpass import Model, opset
from netpass.core.types import Type
from netpass.errors import NetpassError
from netpass.ops.elementwise import ConvertPromoteTypes
from netpass.ops.elementwise.promote import promote

RNG = np.random.default_rng(14)
TYPES = ["boolean", "u8", "i8", "u16", "i16", "u32", "i32", "u64", "i64", "f16", "bf16", "f32",
         "f64"]


def test_rule_matches_openvino_type_inference():
    ov = pytest.importorskip("openvino")
    from openvino import opset1, opset14
    mismatches = []
    for (ra, rb), unsafe, pts, target in itertools.product(
            ((1, 1), (1, 0), (0, 1), (0, 0)), (False, True), (False, True), ("f32", "i64")):
        for a, b in itertools.product(TYPES, TYPES):
            pa = opset1.parameter([2] * ra, getattr(ov.Type, a))
            pb = opset1.parameter([2] * rb, getattr(ov.Type, b))
            try:
                want = opset14.convert_promote_types(pa, pb, unsafe, pts, target) \
                    .get_output_element_type(0).get_type_name()
            except RuntimeError:
                want = None
            got = promote(Type.of(a), Type.of(b), ra == 0, rb == 0, unsafe, pts,
                          Type.of(target))
            if (got.name if got is not None else None) != want:
                mismatches.append((a, b, ra, rb, unsafe, pts, target, want, got))
    assert not mismatches, mismatches[:10]


def _data(dtype, shape):
    if dtype == "boolean":
        return RNG.random(shape) > 0.5
    np_dtype = np.dtype(Type.of(dtype).dtype)
    if np_dtype.kind == "f":
        return (RNG.integers(-60, 60, shape) / 4).astype(np_dtype)
    info = np.iinfo(np_dtype)
    return RNG.integers(max(info.min, -100), min(info.max, 100), shape).astype(np_dtype)


def _model(a, b, shape_b=(3, 4), **attrs):
    pa = opset.parameter([3, 4], a, "a")
    pb = opset.parameter(list(shape_b), b, "b")
    node = opset.convert_promote_types(pa, pb, **attrs)
    return Model([node.output(0), node.output(1)], [pa, pb])


@pytest.mark.parametrize("a,b,shape_b,attrs", [
    ("i32", "f32", (3, 4), {"promote_unsafe": True}),
    ("u8", "i16", (3, 4), {}),
    ("i8", "u8", (3, 4), {"promote_unsafe": True}),
    ("boolean", "i32", (3, 4), {}),
    ("f16", "f32", (), {}),
    ("i32", "i64", (), {"pytorch_scalar_promotion": True, "promote_unsafe": True}),
    ("i32", "u16", (), {"pytorch_scalar_promotion": True}),
    ("f32", "f64", (), {"pytorch_scalar_promotion": True, "promote_unsafe": True}),
    ("f64", "f16", (), {"pytorch_scalar_promotion": True}),
    ("u8", "f32", (), {"pytorch_scalar_promotion": True, "promote_unsafe": True}),
])
def test_reference_matches_openvino(a, b, shape_b, attrs, tmp_path):
    model = _model(a, b, shape_b, **attrs)
    check_openvino(model, {"a": _data(a, (3, 4)), "b": _data(b, shape_b)}, tmp_path, 0, 0)


def test_outputs_share_the_promoted_type():
    model = _model("i8", "u8", promote_unsafe=True)
    assert [o.element_type.name for o in model.outputs] == ["i16", "i16"]
    got = netpass.reference.infer(model, {"a": _data("i8", (3, 4)),
                                          "b": np.full((3, 4), 200, np.uint8)})
    np.testing.assert_array_equal(got[model.output_names[1]], np.full((3, 4), 200, np.int16))


def test_reads_the_ir_openvino_writes(tmp_path):
    ov = pytest.importorskip("openvino")
    from openvino import opset1, opset14
    a = opset1.parameter([3, 4], ov.Type.i32, name="a")
    b = opset1.parameter([], ov.Type.f16, name="b")
    node = opset14.convert_promote_types(a, b, True, False, "f32")
    model = check_reads_openvino_ir(ov.Model([node.output(0), node.output(1)], [a, b]),
                                    {"a": _data("i32", (3, 4)), "b": _data("f16", ())},
                                    tmp_path, 0, 0)
    assert [o.element_type.name for o in model.outputs] == ["f16", "f16"]


def test_ir_round_trip_and_runtime(tmp_path):
    model = _model("u16", "i8", promote_unsafe=True, u64_integer_promotion_target="i64")
    feeds = {"a": _data("u16", (3, 4)), "b": _data("i8", (3, 4))}
    back = check_ir_round_trip(model, feeds, tmp_path)
    node = next(n for n in back.get_ordered_ops() if isinstance(n, ConvertPromoteTypes))
    assert node.promote_unsafe and node.u64_integer_promotion_target.name == "i64"
    check_runtime(model, feeds)


def test_unsafe_pair_is_refused_naming_the_op():
    with pytest.raises(NetpassError, match="ConvertPromoteTypes.*u8 and i8 have no common type"):
        _model("u8", "i8")
