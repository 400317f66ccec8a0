"""OpenVINO CTCGreedyDecoder-1, CTCGreedyDecoderSeqLen-6 and GatherTree-1: netpass's
reference against OpenVINO's CPU plugin on the IR netpass writes (merged and kept repeats,
full, partial and empty sequences, a given blank index, i32/i64 outputs; beams cut by
max_seq_len and by the end token, float and integer ids), against direct decodings, on IR
OpenVINO writes, the IR round trip, the runtime (host fallback), shape inference, and the
errors. Exact (class indices)."""
from __future__ import annotations

import numpy as np
import pytest
from opcheck import check_ir_round_trip, check_openvino, check_reads_openvino_ir, check_runtime

import netpass
from netpass import Model, opset
from netpass.core.shape import PartialShape
from netpass.errors import NetpassError
from netpass.ops.decoding import CTCGreedyDecoder, CTCGreedyDecoderSeqLen, GatherTree

RNG = np.random.default_rng(6)


def _scores(*shape):
    """Random scores, a few steps copied from the previous one (repeats to merge)."""
    x = RNG.standard_normal(shape).astype(np.float32)
    axis = 0 if len(shape) == 3 and shape[0] > shape[1] else 1
    for t in RNG.choice(np.arange(1, shape[axis]), 2, replace=False):
        idx = [slice(None)] * 3
        prev = list(idx)
        idx[axis], prev[axis] = t, t - 1
        x[tuple(idx)] = x[tuple(prev)]
    return x


def _mask(t, lengths):
    m = np.zeros((t, len(lengths)), np.float32)
    for b, n in enumerate(lengths):
        m[:n, b] = 1
    return m


def _ctc_model(t, n, c, merge):
    d = opset.parameter([t, n, c], "f32", "d")
    m = opset.parameter([t, n], "f32", "m")
    return Model([opset.ctc_greedy_decoder(d, m, merge).output(0)], [d, m])


def _seq_len_model(n, t, c, merge, blank=None, types=("i32", "i32")):
    d = opset.parameter([n, t, c], "f32", "d")
    lens = opset.parameter([n], "i32", "l")
    node = opset.ctc_greedy_decoder_seq_len(d, lens, None if blank is None else np.int32(blank),
                                            merge, *types)
    return Model([node.output(0), node.output(1)], [d, lens])


@pytest.mark.parametrize("merge", [True, False])
@pytest.mark.parametrize("t,c,lengths", [(9, 5, [9, 4, 0]), (6, 3, [1, 6]), (12, 8, [7])])
def test_ctc_greedy_decoder_matches_openvino(t, c, lengths, merge, tmp_path):
    model = _ctc_model(t, len(lengths), c, merge)
    check_openvino(model, {"d": _scores(t, len(lengths), c), "m": _mask(t, lengths)},
                   tmp_path, 0, 0)


@pytest.mark.parametrize("merge", [True, False])
@pytest.mark.parametrize("blank,types", [(None, ("i32", "i32")), (1, ("i64", "i32")),
                                         (0, ("i32", "i64"))])
def test_ctc_greedy_decoder_seq_len_matches_openvino(blank, types, merge, tmp_path):
    n, t, c = 3, 8, 5
    feeds = {"d": _scores(n, t, c), "l": np.array([8, 3, 0], np.int32)}
    check_openvino(_seq_len_model(n, t, c, merge, blank, types), feeds, tmp_path, 0, 0)


def test_ctc_decoding_by_hand():
    """Classes 2 2 blank 2 1 1 -> merged: 2 2 1; kept: 2 2 2 1 1 (blank is class 3)."""
    path = [2, 2, 3, 2, 1, 1]
    scores = np.eye(4, dtype=np.float32)[path][:, None, :]
    for merge, want in ((True, [2, 2, 1]), (False, [2, 2, 2, 1, 1])):
        model = _ctc_model(6, 1, 4, merge)
        got = netpass.reference.infer(model, {"d": scores, "m": np.ones((6, 1), np.float32)})
        flat = got[model.output_names[0]].reshape(-1)
        np.testing.assert_array_equal(flat, want + [-1] * (6 - len(want)))


def _tree_model(t, b, w, dtype="i32"):
    s = opset.parameter([t, b, w], dtype, "s")
    p = opset.parameter([t, b, w], "i32" if dtype != "f32" else "f32", "p")
    m = opset.parameter([b], "i32" if dtype != "f32" else "f32", "m")
    end = np.asarray(7, np.dtype(netpass.core.types.Type.of(dtype).dtype))
    return Model([opset.gather_tree(s, p, m, end).output(0)], [s, p, m])


def _tree_feeds(t, b, w, lengths, dtype=np.int32):
    steps = RNG.integers(0, 10, (t, b, w))
    steps[RNG.random((t, b, w)) < 0.1] = 7  # some end tokens
    parents = RNG.integers(0, w, (t, b, w))
    return {"s": steps.astype(dtype), "p": parents.astype(dtype),
            "m": np.asarray(lengths, dtype)}


@pytest.mark.parametrize("t,b,w,lengths", [(6, 2, 3, [6, 4]), (5, 3, 1, [5, 1, 3]),
                                           (8, 1, 4, [3])])
def test_gather_tree_matches_openvino(t, b, w, lengths, tmp_path):
    check_openvino(_tree_model(t, b, w), _tree_feeds(t, b, w, lengths), tmp_path, 0, 0)


def test_gather_tree_float_matches_openvino(tmp_path):
    check_openvino(_tree_model(5, 2, 3, "f32"), _tree_feeds(5, 2, 3, [5, 3], np.float32),
                   tmp_path, 0, 0)


def test_gather_tree_by_hand():
    """Beam 0 at the last step came from beam 1, which came from beam 0."""
    steps = np.array([[[1, 2]], [[3, 4]], [[5, 6]]], np.int32)
    parents = np.array([[[0, 0]], [[0, 0]], [[1, 0]]], np.int32)
    model = _tree_model(3, 1, 2)
    got = netpass.reference.infer(model, {"s": steps, "p": parents, "m": np.array([3],
                                                                                  np.int32)})
    np.testing.assert_array_equal(got[model.output_names[0]][:, 0, 0], [1, 4, 5])


def test_reads_the_ir_openvino_writes(tmp_path):
    ov = pytest.importorskip("openvino")
    from openvino import opset1, opset6
    d = opset1.parameter([6, 2, 4], ov.Type.f32, name="d")
    m = opset1.parameter([6, 2], ov.Type.f32, name="m")
    seq = opset6.ctc_greedy_decoder_seq_len(opset1.transpose(d, [1, 0, 2]),
                                            opset1.constant(np.array([6, 2], np.int32)),
                                            None, False, "i64", "i32")
    outs = [opset1.ctc_greedy_decoder(d, m, True).output(0), seq.output(0), seq.output(1)]
    check_reads_openvino_ir(ov.Model(outs, [d, m]), {"d": _scores(6, 2, 4),
                                                     "m": _mask(6, [6, 2])}, tmp_path, 0, 0)
    s, p = (opset1.parameter([5, 2, 3], ov.Type.i32, name=n) for n in ("s", "p"))
    node = opset1.gather_tree(s, p, opset1.constant(np.array([5, 3], np.int32)),
                              opset1.constant(np.int32(7)))
    feeds = _tree_feeds(5, 2, 3, [5, 3])
    check_reads_openvino_ir(ov.Model([node], [s, p]), {"s": feeds["s"], "p": feeds["p"]},
                            tmp_path, 0, 0)


def test_ir_round_trip_and_runtime(tmp_path):
    cases = [(_ctc_model(6, 2, 4, False), {"d": _scores(6, 2, 4), "m": _mask(6, [6, 2])},
              CTCGreedyDecoder),
             (_seq_len_model(2, 6, 4, True, 2, ("i64", "i64")),
              {"d": _scores(2, 6, 4), "l": np.array([5, 6], np.int32)}, CTCGreedyDecoderSeqLen),
             (_tree_model(5, 2, 3), _tree_feeds(5, 2, 3, [5, 2]), GatherTree)]
    for model, feeds, cls in cases:
        back = check_ir_round_trip(model, feeds, tmp_path)
        assert sum(isinstance(n, cls) for n in back.get_ordered_ops()) == 1
        check_runtime(model, feeds)


def test_shape_inference():
    d = opset.parameter(PartialShape([-1, 3, 5]), "f32", "d")
    m = opset.parameter(PartialShape([9, -1]), "f32", "m")
    assert opset.ctc_greedy_decoder(d, m).get_output_partial_shape(0) == \
        PartialShape([3, 9, 1, 1])
    lens = opset.parameter(PartialShape([-1]), "i32", "l")
    node = opset.ctc_greedy_decoder_seq_len(opset.parameter(PartialShape([2, -1, 5]), "f32",
                                                            "x"), lens)
    assert node.get_output_partial_shape(0) == PartialShape([2, -1])
    assert node.get_output_partial_shape(1) == PartialShape([2])


def test_errors_name_the_op():
    with pytest.raises(NetpassError, match="CTCGreedyDecoder.*N of data and sequence_mask"):
        opset.ctc_greedy_decoder(opset.parameter([4, 2, 3], "f32", "d"),
                                 opset.parameter([4, 3], "f32", "m"))
    with pytest.raises(NetpassError, match="CTCGreedyDecoderSeqLen.*classes_index_type"):
        opset.ctc_greedy_decoder_seq_len(opset.parameter([2, 4, 3], "f32", "d"),
                                         opset.parameter([2], "i32", "l"), None, True, "f32")
    with pytest.raises(NetpassError, match="GatherTree.*parent_idx .* differs"):
        opset.gather_tree(opset.parameter([4, 2, 3], "i32", "s"),
                          opset.parameter([4, 2, 2], "i32", "p"), np.array([4, 4], np.int32),
                          np.int32(1))
    model = _seq_len_model(1, 4, 3, True)
    with pytest.raises(NetpassError, match="sequence_length \\[5\\] must lie in \\[0, 4\\]"):
        netpass.reference.infer(model, {"d": _scores(1, 4, 3), "l": np.array([5], np.int32)})
