"""OpenVINO BatchToSpace-2 and SpaceToBatch-2: netpass's reference against OpenVINO's CPU
plugin on the IR netpass writes (ranks 3 to 5, blocks of 1 to 3, crops and pads on either
side, integer data), the two as inverses, IR that OpenVINO writes, the IR round trip, the
runtime (host fallback), shape inference with dynamic dims, and the errors. Exact (moved
elements)."""
from __future__ import annotations

import numpy as np
import pytest
from opcheck import check_ir_round_trip, check_openvino, check_reads_openvino_ir, check_runtime

import netpass
from netpass import Model, opset
from netpass.core.shape import PartialShape
from netpass.errors import NetpassError
from netpass.ops.movement import BatchToSpace, SpaceToBatch

RNG = np.random.default_rng(2)


def _x(shape, dtype=np.float32):
    if np.dtype(dtype).kind == "i":
        return RNG.integers(-50, 50, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def _model(factory, shape, block, begin, end, dtype="f32"):
    x = opset.parameter(list(shape), dtype, "x")
    return Model([factory(x, block, begin, end).output(0)], [x])


B2S = {
    "rank3": ((6, 2, 5), [1, 3, 1], [0, 1, 0], [0, 1, 2]),
    "rank4": ((12, 3, 4, 2), [1, 1, 2, 3], [0, 0, 1, 2], [0, 0, 0, 1]),
    "rank5": ((8, 2, 3, 2, 3), [1, 2, 1, 2, 2], [0, 1, 0, 0, 1], [0, 0, 2, 1, 0]),
    "no_crops": ((4, 3, 5, 5), [1, 2, 2, 1], [0, 0, 0, 0], [0, 0, 0, 0]),
}
S2B = {
    "rank3": ((2, 4, 5), [1, 3, 2], [0, 1, 0], [0, 1, 1]),
    "rank4": ((2, 3, 4, 5), [1, 1, 2, 3], [0, 0, 1, 0], [0, 0, 1, 1]),
    "rank5": ((1, 2, 3, 2, 3), [1, 2, 2, 1, 2], [0, 1, 0, 0, 1], [0, 1, 1, 1, 0]),
}


@pytest.mark.parametrize("name", sorted(B2S))
def test_batch_to_space_matches_openvino(name, tmp_path):
    shape, block, begin, end = B2S[name]
    check_openvino(_model(opset.batch_to_space, shape, block, begin, end), {"x": _x(shape)},
                   tmp_path, 0, 0)


@pytest.mark.parametrize("name", sorted(S2B))
def test_space_to_batch_matches_openvino(name, tmp_path):
    shape, block, begin, end = S2B[name]
    check_openvino(_model(opset.space_to_batch, shape, block, begin, end), {"x": _x(shape)},
                   tmp_path, 0, 0)


def test_integer_data_matches_openvino(tmp_path):
    shape, block, begin, end = S2B["rank4"]
    model = _model(opset.space_to_batch, shape, block, begin, end, "i32")
    check_openvino(model, {"x": _x(shape, np.int32)}, tmp_path, 0, 0)


@pytest.mark.parametrize("name", sorted(S2B))
def test_batch_to_space_undoes_space_to_batch(name):
    shape, block, begin, end = S2B[name]
    x = opset.parameter(list(shape), "f32", "x")
    back = opset.batch_to_space(opset.space_to_batch(x, block, begin, end), block, begin, end)
    model = Model([back.output(0)], [x])
    feed = _x(shape)
    np.testing.assert_array_equal(netpass.reference.infer(model, {"x": feed})[
        model.output_names[0]], feed)


def test_ir_round_trip(tmp_path):
    shape, block, begin, end = S2B["rank4"]
    x = opset.parameter(list(shape), "f32", "x")
    s2b = opset.space_to_batch(x, block, begin, end)
    model = Model([opset.batch_to_space(s2b, block, [0, 0, 1, 2], [0, 0, 0, 1]).output(0)], [x])
    back = check_ir_round_trip(model, {"x": _x(shape)}, tmp_path)
    assert {type(n) for n in back.get_ordered_ops()} >= {BatchToSpace, SpaceToBatch}


def test_reads_the_ir_openvino_writes(tmp_path):
    ov = pytest.importorskip("openvino")
    from openvino import opset1, opset2

    def c(v):
        return opset1.constant(np.array(v, np.int32))
    x = opset1.parameter([2, 3, 4, 5], ov.Type.f32, name="x")
    s2b = opset2.space_to_batch(x, c([1, 1, 2, 3]), c([0, 0, 1, 0]), c([0, 0, 1, 1]))
    b2s = opset2.batch_to_space(s2b, c([1, 1, 2, 2]), c([0, 0, 1, 0]), c([0, 0, 0, 3]))
    check_reads_openvino_ir(ov.Model([s2b.output(0), b2s.output(0)], [x]),
                            {"x": _x((2, 3, 4, 5))}, tmp_path, 0, 0)


def test_runtime_matches_reference():
    shape, block, begin, end = B2S["rank4"]
    check_runtime(_model(opset.batch_to_space, shape, block, begin, end), {"x": _x(shape)})
    shape, block, begin, end = S2B["rank4"]
    check_runtime(_model(opset.space_to_batch, shape, block, begin, end), {"x": _x(shape)})


def test_shape_inference():
    x = opset.parameter(PartialShape([12, -1, 4, 3]), "f32", "x")
    assert opset.batch_to_space(x, [1, 2, 3, 1], [0, 0, 1, 0], [0, 0, 2, 0]) \
        .get_output_partial_shape(0) == PartialShape([2, -1, 9, 3])
    assert opset.space_to_batch(x, [1, 2, 2, 1], [0, 0, 1, 0], [0, 0, 1, 0]) \
        .get_output_partial_shape(0) == PartialShape([48, -1, 3, 3])
    block = opset.parameter([4], "i64", "block")
    assert opset.batch_to_space(x, block, [0] * 4, [0] * 4).get_output_partial_shape(0) == \
        PartialShape.dynamic(4)


@pytest.mark.parametrize("factory,block,begin,end,match", [
    (opset.batch_to_space, [1, 2, 2], [0, 0, 0], [0, 0, 0], "one element per dim"),
    (opset.batch_to_space, [2, 1, 1, 1], [0] * 4, [0] * 4, "1 for the batch"),
    (opset.batch_to_space, [1, 5, 1, 1], [0] * 4, [0] * 4, "not a multiple of the block"),
    (opset.batch_to_space, [1, 2, 1, 1], [0, 5, 0, 0], [0, 2, 0, 0], "crops 5 \\+ 2 exceed"),
    (opset.space_to_batch, [1, 1, 3, 1], [0] * 4, [0] * 4, "not a multiple of block 3"),
    (opset.space_to_batch, [1, 1, 1, 1], [0, 0, -1, 0], [0] * 4, "must be >= 0"),
])
def test_bad_inputs_name_the_op(factory, block, begin, end, match):
    x = opset.parameter([6, 3, 4, 5], "f32", "x")
    with pytest.raises(NetpassError, match=match) as err:
        factory(x, block, begin, end)
    assert ("BatchToSpace" if factory is opset.batch_to_space else "SpaceToBatch") \
        in str(err.value)
