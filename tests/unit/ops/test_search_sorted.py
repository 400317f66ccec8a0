"""OpenVINO Bucketize-3 (``torch.bucketize``) and SearchSorted-15 (``torch.searchsorted``):
netpass's reference against OpenVINO's CPU plugin on the IR netpass writes (both bound
modes, values equal to boundaries, below and above every one, float and integer data, i32 and
i64 outputs; SearchSorted over a 1-D and a batched sequence), against torch, on IR OpenVINO
writes (its builders and the torch functions converted), the IR round trip, the runtime (host
fallback), and the errors. Indices exact."""
from __future__ import annotations

import numpy as np
import pytest
from opcheck import (
    check_ir_round_trip,
    check_openvino,
    check_reads_openvino_ir,
    check_runtime,
    check_torch_ir,
)

import netpass
from netpass import Model, opset
from netpass.core.shape import PartialShape
from netpass.errors import NetpassError
from netpass.ops.search_sorted import Bucketize, SearchSorted

RNG = np.random.default_rng(3)


def _values(shape, boundaries, dtype=np.float32):
    """Random values around the boundaries, a third of them exactly on one."""
    lo, hi = float(np.min(boundaries)) - 2, float(np.max(boundaries)) + 2
    v = RNG.uniform(lo, hi, shape)
    on = RNG.random(shape) < 0.33
    v[on] = RNG.choice(np.asarray(boundaries).reshape(-1), int(on.sum()))
    return (np.round(v) if np.dtype(dtype).kind == "i" else v).astype(dtype)


def _sorted(shape, dtype=np.float32):
    s = np.sort(RNG.uniform(-5, 5, shape), axis=-1)
    return (np.round(s) if np.dtype(dtype).kind == "i" else s).astype(dtype)


def _bucketize_model(shape, buckets, right, out="i64", dtype="f32"):
    x = opset.parameter(list(shape), dtype, "x")
    node = opset.bucketize(x, buckets, out, with_right_bound=right)
    return Model([node.output(0)], [x])


def _search_model(seq_shape, values_shape, right, out="i64", dtype="f32"):
    s = opset.parameter(list(seq_shape), dtype, "s")
    v = opset.parameter(list(values_shape), dtype, "v")
    return Model([opset.search_sorted(s, v, right, out).output(0)], [s, v])


@pytest.mark.parametrize("right", [True, False])
@pytest.mark.parametrize("dtype,out", [(np.float32, "i64"), (np.float32, "i32"),
                                       (np.int32, "i64")])
def test_bucketize_matches_openvino(right, dtype, out, tmp_path):
    buckets = _sorted((7,), dtype)
    model = _bucketize_model((3, 5, 4), buckets, right, out, np.dtype(dtype).name)
    check_openvino(model, {"x": _values((3, 5, 4), buckets, dtype)}, tmp_path, 0, 0)


@pytest.mark.parametrize("right", [True, False])
def test_bucketize_matches_torch(right):
    torch = pytest.importorskip("torch")
    buckets = _sorted((6,))
    x = _values((4, 9), buckets)
    model = _bucketize_model(x.shape, buckets, right)
    got = netpass.reference.infer(model, {"x": x})[model.output_names[0]]
    want = torch.bucketize(torch.from_numpy(x), torch.from_numpy(buckets), right=not right)
    np.testing.assert_array_equal(got, want.numpy())


def test_bucketize_without_buckets_gives_zeros():
    model = _bucketize_model((5,), np.zeros((0,), np.float32), True)
    got = netpass.reference.infer(model, {"x": _values((5,), [0.0])})[model.output_names[0]]
    np.testing.assert_array_equal(got, np.zeros(5, np.int64))


SEARCH_CASES = {
    "one_d_sequence": ((9,), (3, 4)),
    "batched": ((2, 3, 8), (2, 3, 5)),
    "batched_one_value": ((4, 6), (4, 1)),
}


@pytest.mark.parametrize("right", [True, False])
@pytest.mark.parametrize("name", sorted(SEARCH_CASES))
def test_search_sorted_matches_openvino(name, right, tmp_path):
    seq_shape, values_shape = SEARCH_CASES[name]
    seq = _sorted(seq_shape)
    model = _search_model(seq_shape, values_shape, right)
    check_openvino(model, {"s": seq, "v": _values(values_shape, seq)}, tmp_path, 0, 0)


def test_search_sorted_integer_i32_matches_openvino(tmp_path):
    seq = _sorted((3, 7), np.int32)
    model = _search_model((3, 7), (3, 5), True, "i32", "i32")
    check_openvino(model, {"s": seq, "v": _values((3, 5), seq, np.int32)}, tmp_path, 0, 0)


@pytest.mark.parametrize("right", [True, False])
def test_search_sorted_matches_torch(right):
    torch = pytest.importorskip("torch")
    seq = _sorted((2, 3, 8))
    v = _values((2, 3, 5), seq)
    got = netpass.reference.infer(_search_model(seq.shape, v.shape, right), {"s": seq, "v": v})
    want = torch.searchsorted(torch.from_numpy(seq), torch.from_numpy(v), right=right)
    np.testing.assert_array_equal(next(iter(got.values())), want.numpy())


def test_ir_round_trip(tmp_path):
    buckets = _sorted((5,))
    back = check_ir_round_trip(_bucketize_model((4, 3), buckets, False, "i32"),
                               {"x": _values((4, 3), buckets)}, tmp_path)
    assert [n.with_right_bound for n in back.get_ordered_ops() if isinstance(n, Bucketize)] \
        == [False]
    seq = _sorted((3, 6))
    back = check_ir_round_trip(_search_model((3, 6), (3, 4), True),
                               {"s": seq, "v": _values((3, 4), seq)}, tmp_path)
    assert [n.right_mode for n in back.get_ordered_ops() if isinstance(n, SearchSorted)] == [True]


def test_reads_the_ir_openvino_writes(tmp_path):
    ov = pytest.importorskip("openvino")
    from openvino import opset1, opset3, opset15
    seq = _sorted((2, 7))
    s = opset1.parameter([2, 7], ov.Type.f32, name="s")
    v = opset1.parameter([2, 4], ov.Type.f32, name="v")
    model = ov.Model([opset15.search_sorted(s, v, True).output(0),
                      opset3.bucketize(v, opset1.constant(seq[0]), "i32", False).output(0)],
                     [s, v])
    check_reads_openvino_ir(model, {"s": seq, "v": _values((2, 4), seq)}, tmp_path, 0, 0)


@pytest.mark.parametrize("right", [True, False])
def test_reads_torch_functions_converted_by_openvino(right, tmp_path):
    torch = pytest.importorskip("torch")
    buckets = torch.from_numpy(_sorted((5,)))
    seq = _sorted((3, 6))
    model = check_torch_ir(
        lambda s, v: (torch.searchsorted(s, v, right=right),
                      torch.bucketize(v, buckets, right=right)),
        [seq, _values((3, 4), seq)], tmp_path, 0, 0)
    assert {Bucketize, SearchSorted} <= {type(n) for n in model.get_ordered_ops()}


def test_runtime_matches_reference():
    seq = _sorted((3, 6))
    check_runtime(_search_model((3, 6), (3, 4), False), {"s": seq, "v": _values((3, 4), seq)})
    buckets = _sorted((5,))
    check_runtime(_bucketize_model((4, 3), buckets, True), {"x": _values((4, 3), buckets)})


def test_shapes_follow_the_values():
    s = opset.parameter(PartialShape([-1, 8]), "f32", "s")
    v = opset.parameter(PartialShape([3, -1]), "f32", "v")
    assert opset.search_sorted(s, v).get_output_partial_shape(0) == PartialShape([3, -1])
    x = opset.parameter(PartialShape([-1, (2, 5)]), "f32", "x")
    node = opset.bucketize(x, [0.5, 1.0], "i32")
    assert node.get_output_partial_shape(0) == PartialShape([-1, (2, 5)])
    assert node.get_output_element_type(0).name == "i32"


def test_bad_inputs_name_the_op():
    x = opset.parameter([3, 4], "f32", "x")
    with pytest.raises(NetpassError, match="Bucketize.*buckets must be 1-D"):
        opset.bucketize(x, np.zeros((2, 2), np.float32))
    with pytest.raises(NetpassError, match="Bucketize.*output_type must be i32 or i64"):
        opset.bucketize(x, [1.0], "f32")
    with pytest.raises(NetpassError, match="SearchSorted.*same rank and leading dims"):
        opset.search_sorted(opset.parameter([2, 5], "f32", "s"), x)
    with pytest.raises(NetpassError, match="SearchSorted.*rank 1 or more"):
        opset.search_sorted(np.float32(1), x)
