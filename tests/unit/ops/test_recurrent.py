"""LSTM / GRU / RNN cells and sequences.

Three independent references: OpenVINO itself (same op names, layouts and gate orders, built
through its Python opset), onnxruntime on ONNX models built inline (checks the import rules'
gate reordering and layout handling), and onnxruntime on the model netpass exports (checks
the export rules). Tolerances: rtol 1e-4, atol 1e-5.
"""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import netpass
from netpass import Model, opset
from netpass.core.dimension import Dimension, Symbol
from netpass.errors import ShapeInferenceError, UnsupportedOpError

RTOL, ATOL = 1e-4, 1e-5
GATES = {"lstm": 4, "gru": 3, "rnn": 1}
BATCH, SEQ, INPUT, HIDDEN = 3, 5, 4, 6


def _rand(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _ort_run(proto: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


# -- netpass ops vs OpenVINO ----------------------------------------------------------------
def _sequence_case(kind: str, direction: str, lbr: bool, seed: int):
    rng = np.random.default_rng(seed)
    nd = 2 if direction == "bidirectional" else 1
    g = GATES[kind]
    w = _rand(rng, nd, g * HIDDEN, INPUT)
    r = _rand(rng, nd, g * HIDDEN, HIDDEN)
    b = _rand(rng, nd, (g + int(lbr)) * HIDDEN)
    feeds = {"X": _rand(rng, BATCH, SEQ, INPUT), "H": _rand(rng, BATCH, nd, HIDDEN)}
    if kind == "lstm":
        feeds["C"] = _rand(rng, BATCH, nd, HIDDEN)
    feeds["L"] = np.array([SEQ, 3, 1], dtype=np.int32)
    return feeds, (w, r, b)


def _build_sequence(lib, kind, direction, lbr, feeds, weights):
    """The same sequence op through ``lib`` (netpass.opset or openvino's opset13)."""
    ps = {n: lib.parameter(list(a.shape), a.dtype, name=n) for n, a in feeds.items()}
    w, r, b = weights
    hs = HIDDEN
    if kind == "lstm":
        node = lib.lstm_sequence(ps["X"], ps["H"], ps["C"], ps["L"], w, r, b, hs, direction)
    elif kind == "gru":
        node = lib.gru_sequence(ps["X"], ps["H"], ps["L"], w, r, b, hs, direction,
                                linear_before_reset=lbr)
    else:
        node = lib.rnn_sequence(ps["X"], ps["H"], ps["L"], w, r, b, hs, direction)
    return node, list(ps.values())


SEQUENCE_CASES = [(k, d, False) for k in GATES for d in ("forward", "reverse", "bidirectional")]
SEQUENCE_CASES.append(("gru", "bidirectional", True))


@pytest.mark.parametrize("kind,direction,lbr", SEQUENCE_CASES)
def test_sequence_matches_openvino(kind, direction, lbr):
    ov = pytest.importorskip("openvino")
    ovops = pytest.importorskip("openvino.opset13")
    feeds, weights = _sequence_case(kind, direction, lbr, seed=1)
    node, params = _build_sequence(opset, kind, direction, lbr, feeds, weights)
    got = netpass.reference.infer(Model(node.outputs(), params), feeds)
    ov_node, ov_params = _build_sequence(ovops, kind, direction, lbr, feeds, weights)
    compiled = ov.Core().compile_model(ov.Model(ov_node.outputs(), ov_params), "CPU",
                                       {"INFERENCE_PRECISION_HINT": "f32"})
    expected = compiled(feeds)
    for i, ours in enumerate(got.values()):
        np.testing.assert_allclose(ours, expected[i], rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("kind", list(GATES))
def test_cell_matches_openvino(kind):
    ov = pytest.importorskip("openvino")
    ovops = pytest.importorskip("openvino.opset13")
    rng = np.random.default_rng(2)
    g = GATES[kind]
    feeds = {"X": _rand(rng, BATCH, INPUT), "H": _rand(rng, BATCH, HIDDEN)}
    if kind == "lstm":
        feeds["C"] = _rand(rng, BATCH, HIDDEN)
    w, r, b = _rand(rng, g * HIDDEN, INPUT), _rand(rng, g * HIDDEN, HIDDEN), _rand(rng, g * HIDDEN)

    def build(lib):
        ps = {n: lib.parameter(list(a.shape), np.float32, name=n) for n, a in feeds.items()}
        if kind == "lstm":
            node = lib.lstm_cell(ps["X"], ps["H"], ps["C"], w, r, b, HIDDEN, clip=1.5)
        elif kind == "gru":
            node = lib.gru_cell(ps["X"], ps["H"], w, r, b, HIDDEN)
        else:
            node = lib.rnn_cell(ps["X"], ps["H"], w, r, b, HIDDEN, ["relu"], [], [])
        return node, list(ps.values())

    node, params = build(opset)
    got = netpass.reference.infer(Model(node.outputs(), params), feeds)
    ov_node, ov_params = build(ovops)
    expected = ov.Core().compile_model(ov.Model(ov_node.outputs(), ov_params), "CPU",
                                       {"INFERENCE_PRECISION_HINT": "f32"})(feeds)
    for i, ours in enumerate(got.values()):
        np.testing.assert_allclose(ours, expected[i], rtol=RTOL, atol=ATOL)


# -- ONNX import vs onnxruntime -------------------------------------------------------------
def _onnx_recurrent(op: str, direction: str, layout: int, seed: int, *, with_bias=True,
                    with_lens=True, with_init=True, lbr=0, clip=None, activations=None,
                    dynamic=True):
    """A one-node ONNX LSTM/GRU/RNN model, its feeds, and its output names."""
    rng = np.random.default_rng(seed)
    nd = 2 if direction == "bidirectional" else 1
    g = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    hs = HIDDEN
    x_shape = [SEQ, BATCH, INPUT] if layout == 0 else [BATCH, SEQ, INPUT]
    st_shape = [nd, BATCH, hs] if layout == 0 else [BATCH, nd, hs]
    sym_x = (["seq", "batch", INPUT] if layout == 0 else ["batch", "seq", INPUT]) if dynamic \
        else x_shape
    inits = [helper.make_tensor("W", TensorProto.FLOAT, [nd, g * hs, INPUT],
                                _rand(rng, nd, g * hs, INPUT).ravel()),
             helper.make_tensor("R", TensorProto.FLOAT, [nd, g * hs, hs],
                                _rand(rng, nd, g * hs, hs).ravel())]
    ins = ["X", "W", "R"]
    graph_inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, sym_x)]
    feeds = {"X": _rand(rng, *x_shape)}
    if with_bias:
        inits.append(helper.make_tensor("B", TensorProto.FLOAT, [nd, 2 * g * hs],
                                        _rand(rng, nd, 2 * g * hs).ravel()))
    ins.append("B" if with_bias else "")
    if with_lens:
        graph_inputs.append(helper.make_tensor_value_info("lens", TensorProto.INT32, [BATCH]))
        feeds["lens"] = np.array([SEQ, 2, 4], dtype=np.int32)
    ins.append("lens" if with_lens else "")
    states = ["h0", "c0"] if op == "LSTM" else ["h0"]
    for s in states:
        if with_init:
            graph_inputs.append(helper.make_tensor_value_info(s, TensorProto.FLOAT, st_shape))
            feeds[s] = _rand(rng, *st_shape)
        ins.append(s if with_init else "")
    outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    attrs = {"hidden_size": hs, "direction": direction}
    if layout:
        attrs["layout"] = 1
    if lbr:
        attrs["linear_before_reset"] = 1
    if clip is not None:
        attrs["clip"] = clip
    if activations is not None:
        attrs["activations"] = activations * nd
    node = helper.make_node(op, ins, outs, name=f"my_{op.lower()}", **attrs)
    graph = helper.make_graph([node], "g", graph_inputs,
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
                               for o in outs], inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    return proto, feeds, outs


IMPORT_CASES = [(op, d, layout) for op in ("LSTM", "GRU", "RNN")
                for d in ("forward", "reverse", "bidirectional") for layout in (0, 1)]


@pytest.mark.parametrize("op,direction,layout", IMPORT_CASES)
def test_onnx_import_matches_onnxruntime(op, direction, layout):
    proto, feeds, outs = _onnx_recurrent(op, direction, 0, seed=3)
    expected = _ort_run(proto, feeds)
    if layout == 1:
        # onnxruntime refuses layout=1: compare with its layout-0 run of the same weights on
        # batch-first copies of the inputs.
        proto, _, _ = _onnx_recurrent(op, direction, 1, seed=3)
        feeds = {k: (v if k == "lens" else np.ascontiguousarray(v.transpose(1, 0, 2)))
                 for k, v in feeds.items()}
        expected = [expected[0].transpose(2, 0, 1, 3)] + [e.transpose(1, 0, 2)
                                                          for e in expected[1:]]
    got = netpass.reference.infer(netpass.read_model(proto), feeds)
    for name, exp in zip(outs, expected):
        np.testing.assert_allclose(got[name], exp, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_onnx_import_optional_inputs_omitted(op):
    proto, feeds, outs = _onnx_recurrent(op, "forward", 0, seed=4, with_bias=False,
                                         with_lens=False, with_init=False)
    got = netpass.reference.infer(netpass.read_model(proto), feeds)
    for name, expected in zip(outs, _ort_run(proto, feeds)):
        np.testing.assert_allclose(got[name], expected, rtol=RTOL, atol=ATOL)


def test_onnx_gru_linear_before_reset_clip_and_activations():
    proto, feeds, outs = _onnx_recurrent("GRU", "bidirectional", 0, seed=5, lbr=1, clip=0.7,
                                         activations=["Sigmoid", "Relu"])
    got = netpass.reference.infer(netpass.read_model(proto), feeds)
    for name, expected in zip(outs, _ort_run(proto, feeds)):
        np.testing.assert_allclose(got[name], expected, rtol=RTOL, atol=ATOL)


def test_onnx_lstm_dynamic_shapes_keep_symbols():
    proto, _, _ = _onnx_recurrent("LSTM", "bidirectional", 0, seed=6, with_lens=False,
                                  with_init=False)
    model = netpass.read_model(proto)
    x = model.parameters[0].output(0).partial_shape
    y = model.output("Y").partial_shape
    assert [str(d) for d in y] == ["?", "2", "?", str(HIDDEN)]
    assert y[0].symbol is x[0].symbol and y[2].symbol is x[1].symbol


def test_onnx_lstm_input_forget_refused():
    proto, _, _ = _onnx_recurrent("LSTM", "forward", 0, seed=8)
    proto.graph.node[0].attribute.append(helper.make_attribute("input_forget", 1))
    with pytest.raises(UnsupportedOpError, match="input_forget"):
        netpass.read_model(proto)


# -- export round trip ----------------------------------------------------------------------
@pytest.mark.parametrize("kind,direction,lbr", SEQUENCE_CASES)
def test_sequence_export_runs_in_onnxruntime(kind, direction, lbr, tmp_path):
    feeds, weights = _sequence_case(kind, direction, lbr, seed=9)
    node, params = _build_sequence(opset, kind, direction, lbr, feeds, weights)
    model = Model(node.outputs(), params)
    path = tmp_path / "seq.onnx"
    netpass.save_model(model, path)
    onnx.checker.check_model(str(path))
    expected = netpass.reference.infer(model, feeds)
    got = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    for ref, ours in zip(expected.values(), got):
        np.testing.assert_allclose(ours, ref, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("kind", list(GATES))
def test_cell_export_runs_in_onnxruntime(kind, tmp_path):
    rng = np.random.default_rng(10)
    g = GATES[kind]
    feeds = {"X": _rand(rng, BATCH, INPUT), "H": _rand(rng, BATCH, HIDDEN)}
    if kind == "lstm":
        feeds["C"] = _rand(rng, BATCH, HIDDEN)
    ps = {n: opset.parameter([-1, a.shape[1]], np.float32, name=n) for n, a in feeds.items()}
    w, r = _rand(rng, g * HIDDEN, INPUT), _rand(rng, g * HIDDEN, HIDDEN)
    if kind == "lstm":
        node = opset.lstm_cell(ps["X"], ps["H"], ps["C"], w, r, _rand(rng, 4 * HIDDEN), HIDDEN)
    elif kind == "gru":
        node = opset.gru_cell(ps["X"], ps["H"], w, r, _rand(rng, 4 * HIDDEN), HIDDEN,
                              linear_before_reset=True)
    else:
        node = opset.rnn_cell(ps["X"], ps["H"], w, r, _rand(rng, HIDDEN), HIDDEN)
    model = Model(node.outputs(), list(ps.values()))
    path = tmp_path / "cell.onnx"
    netpass.save_model(model, path)
    expected = netpass.reference.infer(model, feeds)
    got = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    for ref, ours in zip(expected.values(), got):
        np.testing.assert_allclose(ours, ref, rtol=RTOL, atol=ATOL)


# -- shape inference ------------------------------------------------------------------------
def test_sequence_partial_shapes_flow():
    batch, seq = Symbol("batch"), Symbol("seq")
    x = opset.parameter([Dimension(symbol=batch), Dimension(symbol=seq), INPUT], np.float32)
    h = opset.parameter([-1, 2, HIDDEN], np.float32)
    c = opset.parameter([-1, 2, HIDDEN], np.float32)
    lens = opset.parameter([-1], np.int64)
    w = np.zeros((2, 4 * HIDDEN, INPUT), np.float32)
    r = np.zeros((2, 4 * HIDDEN, HIDDEN), np.float32)
    b = np.zeros((2, 4 * HIDDEN), np.float32)
    node = opset.lstm_sequence(x, h, c, lens, w, r, b, HIDDEN, "bidirectional")
    y, ho = node.output(0).partial_shape, node.output(1).partial_shape
    assert str(y) == f"[?,2,?,{HIDDEN}]" and str(ho) == f"[?,2,{HIDDEN}]"
    assert y[0].symbol is batch and y[2].symbol is seq and ho[0].symbol is batch


def test_sequence_dynamic_rank_input():
    x = opset.parameter(None, np.float32)
    h = opset.parameter(None, np.float32)
    node = opset.gru_sequence(x, h, opset.parameter(None, np.int32),
                              np.zeros((1, 3 * HIDDEN, INPUT), np.float32),
                              np.zeros((1, 3 * HIDDEN, HIDDEN), np.float32),
                              np.zeros((1, 3 * HIDDEN), np.float32), HIDDEN, "forward")
    assert str(node.output(0).partial_shape) == f"[?,1,?,{HIDDEN}]"


def test_cell_weight_shape_mismatch_names_the_input():
    x = opset.parameter([2, INPUT], np.float32)
    h = opset.parameter([2, HIDDEN], np.float32)
    with pytest.raises(ShapeInferenceError, match="GRUCell.*W rows"):
        opset.gru_cell(x, h, np.zeros((4 * HIDDEN, INPUT), np.float32),
                       np.zeros((3 * HIDDEN, HIDDEN), np.float32),
                       np.zeros(3 * HIDDEN, np.float32), HIDDEN)


def test_sequence_batch_mismatch_raises():
    x = opset.parameter([2, SEQ, INPUT], np.float32)
    h = opset.parameter([3, 1, HIDDEN], np.float32)
    with pytest.raises(ShapeInferenceError, match="batch"):
        opset.rnn_sequence(x, h, opset.parameter([2], np.int32),
                           np.zeros((1, HIDDEN, INPUT), np.float32),
                           np.zeros((1, HIDDEN, HIDDEN), np.float32),
                           np.zeros((1, HIDDEN), np.float32), HIDDEN, "forward")


def test_unknown_activation_raises():
    x = opset.parameter([2, INPUT], np.float32)
    h = opset.parameter([2, HIDDEN], np.float32)
    with pytest.raises(ShapeInferenceError, match="activation 'gelu'"):
        opset.rnn_cell(x, h, np.zeros((HIDDEN, INPUT), np.float32),
                       np.zeros((HIDDEN, HIDDEN), np.float32), np.zeros(HIDDEN, np.float32),
                       HIDDEN, activations=["gelu"])


def _weights_as_inputs(proto: onnx.ModelProto, rng) -> dict:
    """Turn the W, R, B initializers into graph inputs; returns their feeds."""
    feeds = {}
    for init in list(proto.graph.initializer):
        arr = onnx.numpy_helper.to_array(init)
        feeds[init.name] = (rng.standard_normal(arr.shape) * 0.5).astype(np.float32)
        proto.graph.input.append(helper.make_tensor_value_info(init.name, TensorProto.FLOAT,
                                                               list(arr.shape)))
    del proto.graph.initializer[:]
    return feeds


@pytest.mark.parametrize("op", ["LSTM", "GRU"])
def test_onnx_import_non_constant_weights(op):
    proto, feeds, outs = _onnx_recurrent(op, "bidirectional", 0, seed=11)
    feeds.update(_weights_as_inputs(proto, np.random.default_rng(12)))
    got = netpass.reference.infer(netpass.read_model(proto), feeds)
    for name, expected in zip(outs, _ort_run(proto, feeds)):
        np.testing.assert_allclose(got[name], expected, rtol=RTOL, atol=ATOL)


def test_export_with_non_constant_weights_round_trips(tmp_path):
    proto, feeds, outs = _onnx_recurrent("LSTM", "forward", 0, seed=13)
    feeds.update(_weights_as_inputs(proto, np.random.default_rng(14)))
    path = tmp_path / "lstm.onnx"
    netpass.save_model(netpass.read_model(proto), path)
    got = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(outs, feeds)
    for ours, expected in zip(got, _ort_run(proto, feeds)):
        np.testing.assert_allclose(ours, expected, rtol=RTOL, atol=ATOL)


@settings(max_examples=20, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(op=st.sampled_from(["LSTM", "GRU", "RNN"]),
       direction=st.sampled_from(["forward", "reverse", "bidirectional"]),
       batch=st.integers(1, 4), seq=st.integers(1, 6), input_size=st.integers(1, 5),
       hidden=st.integers(1, 7), lbr=st.booleans(), clip=st.sampled_from([None, 0.5, 3.0]),
       seed=st.integers(0, 2**16))
def test_onnx_import_random_configurations(op, direction, batch, seq, input_size, hidden, lbr,
                                            clip, seed):
    rng = np.random.default_rng(seed)
    nd = 2 if direction == "bidirectional" else 1
    g = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    inits = [onnx.numpy_helper.from_array(_rand(rng, nd, g * hidden, input_size), "W"),
             onnx.numpy_helper.from_array(_rand(rng, nd, g * hidden, hidden), "R"),
             onnx.numpy_helper.from_array(_rand(rng, nd, 2 * g * hidden), "B")]
    feeds = {"X": _rand(rng, seq, batch, input_size),
             "lens": rng.integers(1, seq + 1, batch).astype(np.int32),
             "h0": _rand(rng, nd, batch, hidden)}
    ins = ["X", "W", "R", "B", "lens", "h0"]
    outs = ["Y", "Y_h"]
    if op == "LSTM":
        feeds["c0"] = _rand(rng, nd, batch, hidden)
        ins.append("c0")
        outs.append("Y_c")
    attrs = {"hidden_size": hidden, "direction": direction}
    if clip is not None:
        attrs["clip"] = clip
    if op == "GRU" and lbr:
        attrs["linear_before_reset"] = 1
    graph = helper.make_graph(
        [helper.make_node(op, ins, outs, **attrs)], "g",
        [helper.make_tensor_value_info(n, TensorProto.INT32 if n == "lens" else TensorProto.FLOAT,
                                       list(a.shape)) for n, a in feeds.items()],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs], inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    got = netpass.reference.infer(netpass.read_model(proto), feeds)
    for name, expected in zip(outs, _ort_run(proto, feeds)):
        np.testing.assert_allclose(got[name], expected, rtol=RTOL, atol=ATOL)
