"""ONNX LSTM with peephole weights (input P) against onnx's reference implementation
(``onnx.reference.ReferenceEvaluator``), through netpass's reference evaluator and the OpenCL
runtime, on random data (weights, peepholes, inputs and states all non-zero).

onnx's reference ignores ``clip`` and ``sequence_lens``; the cases that use them compare with
onnxruntime instead. Tolerance: rtol 1e-4, atol 1e-5 (float32 throughout).
"""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import netpass
from netpass.testing import RUNTIME_DEVICE

RTOL, ATOL = 1e-4, 1e-5
OUTS = ["Y", "Y_h", "Y_c"]


def _model(direction: str, batch: int, seq: int, input_size: int, hidden: int, *, init: bool,
           layout: int = 0, lens: bool = False, clip: float | None = None,
           p_as_input: bool = False, seed: int = 0) -> tuple[onnx.ModelProto, dict]:
    """A one-node ONNX LSTM with random W, R, B and P, and random feeds."""
    rng = np.random.default_rng(seed)
    nd = 2 if direction == "bidirectional" else 1

    def rand(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    inits = [onnx.numpy_helper.from_array(rand(nd, 4 * hidden, input_size), "W"),
             onnx.numpy_helper.from_array(rand(nd, 4 * hidden, hidden), "R"),
             onnx.numpy_helper.from_array(rand(nd, 8 * hidden), "B")]
    feeds = {"X": rand(seq, batch, input_size) if layout == 0 else rand(batch, seq, input_size)}
    ins = ["X", "W", "R", "B", ""]
    if lens:
        feeds["lens"] = rng.integers(1, seq + 1, batch).astype(np.int32)
        ins[4] = "lens"
    for s in ("h0", "c0"):
        if init:
            feeds[s] = rand(nd, batch, hidden) if layout == 0 else rand(batch, nd, hidden)
        ins.append(s if init else "")
    p = rand(nd, 3 * hidden)
    if p_as_input:
        feeds["P"] = p
    else:
        inits.append(onnx.numpy_helper.from_array(p, "P"))
    ins.append("P")
    attrs: dict = {"hidden_size": hidden, "direction": direction}
    if layout:
        attrs["layout"] = 1
    if clip is not None:
        attrs["clip"] = clip
    graph = helper.make_graph(
        [helper.make_node("LSTM", ins, OUTS, name="peephole_lstm", **attrs)], "g",
        [helper.make_tensor_value_info(n, TensorProto.INT32 if n == "lens" else TensorProto.FLOAT,
                                       list(a.shape)) for n, a in feeds.items()],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in OUTS], inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    proto.ir_version = 8
    return proto, feeds


def _check(proto: onnx.ModelProto, feeds: dict, expected: list) -> None:
    model = netpass.read_model(proto)
    assert [n.get_input_size() for n in model.get_ordered_ops()
            if n.type_name == "LSTMSequence"] == [8]  # P kept as the op's input
    got = netpass.reference.infer(model, feeds)
    req = netpass.compile_model(model, device=RUNTIME_DEVICE).create_infer_request()
    on_device = req.infer(feeds)
    assert req.stats["host_fallbacks"] == 0  # the recurrent kernel ran it
    for name, exp in zip(OUTS, expected):
        np.testing.assert_allclose(got[name], exp, rtol=RTOL, atol=ATOL, err_msg=name)
        np.testing.assert_allclose(on_device[name], exp, rtol=RTOL, atol=ATOL, err_msg=name)


CASES = [  # direction, batch, seq, input, hidden, initial states, layout
    ("forward", 1, 4, 3, 5, False, 0),
    ("forward", 3, 5, 4, 6, True, 0),
    ("reverse", 2, 3, 2, 4, True, 0),
    ("bidirectional", 3, 4, 5, 3, True, 0),
    ("bidirectional", 4, 2, 3, 7, False, 0),
    ("bidirectional", 2, 3, 4, 5, True, 1),
]


@pytest.mark.parametrize("direction,batch,seq,input_size,hidden,init,layout", CASES)
def test_matches_onnx_reference(direction, batch, seq, input_size, hidden, init, layout):
    proto, feeds = _model(direction, batch, seq, input_size, hidden, init=init, layout=layout,
                          seed=batch * 10 + seq)
    _check(proto, feeds, ReferenceEvaluator(proto).run(None, feeds))


def test_peepholes_as_graph_input_match_onnx_reference():
    proto, feeds = _model("bidirectional", 2, 3, 4, 5, init=True, p_as_input=True, seed=7)
    _check(proto, feeds, ReferenceEvaluator(proto).run(None, feeds))


@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_clip_and_sequence_lengths_match_onnxruntime(direction):
    proto, feeds = _model(direction, 3, 5, 4, 6, init=True, lens=True, clip=0.8, seed=11)
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    _check(proto, feeds, sess.run(None, feeds))


def test_export_keeps_peepholes(tmp_path):
    proto, feeds = _model("bidirectional", 2, 3, 4, 5, init=True, seed=13)
    path = tmp_path / "lstm.onnx"
    netpass.save_model(netpass.read_model(proto), path)
    exported = onnx.load(str(path))
    lstm = next(n for n in exported.graph.node if n.op_type == "LSTM")
    assert len(lstm.input) == 8 and lstm.input[7]
    expected = ReferenceEvaluator(proto).run(None, feeds)
    for got, exp in zip(ReferenceEvaluator(exported).run(None, feeds), expected):
        np.testing.assert_allclose(got, exp, rtol=RTOL, atol=ATOL)


def test_zero_peepholes_leave_the_plain_op():
    proto, _ = _model("forward", 2, 3, 4, 5, init=False, seed=17)
    p = next(i for i in proto.graph.initializer if i.name == "P")
    p.CopyFrom(onnx.numpy_helper.from_array(np.zeros((1, 15), np.float32), "P"))
    ops = netpass.read_model(proto).get_ordered_ops()
    assert [n.get_input_size() for n in ops if n.type_name == "LSTMSequence"] == [7]


def test_peephole_length_mismatch_names_p():
    proto, _ = _model("forward", 2, 3, 4, 5, init=False, seed=19)
    p = next(i for i in proto.graph.initializer if i.name == "P")
    p.CopyFrom(onnx.numpy_helper.from_array(np.ones((1, 12), np.float32), "P"))
    with pytest.raises(netpass.errors.NetpassError, match="P length"):
        netpass.read_model(proto)
