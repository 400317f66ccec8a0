"""Sums of row gathers (netpass.runtime.gather_sum): token + position (+ token type)
embeddings as one GatherSum launch, against the reference and onnxruntime on random data."""
from __future__ import annotations

import numpy as np
import pytest
from graph_blocks import randn_f32

import netpass
from netpass import Model, opset
from netpass.runtime import Program, compile_program
from netpass.testing import RUNTIME_DEVICE

TOL = 1e-6  # a sum of two or three float32 rows, in the reference's order


def _embeddings(rng, tables, idx_shapes, row=(37,), nested_right=False):
    """sum_j Gather(T_j [rows_j, *row], I_j, 0) with I_j parameters of ``idx_shapes``."""
    params = [opset.parameter(list(s), np.int64, name=f"i{j}") for j, s in enumerate(idx_shapes)]
    gathered = [opset.gather(randn_f32(rng, n, *row), p, np.array(0, np.int64))
                for n, p in zip(tables, params)]
    if nested_right:  # a + (b + c)
        y = opset.add(gathered[0], opset.add(gathered[1], gathered[2]))
    else:
        y = gathered[0]
        for g in gathered[1:]:
            y = opset.add(y, g)
    return Model([opset.result(y, name="y")], params)


def _kinds(model):
    return [n.kind for n in Program.from_model(model).nodes if n.kind in ("Gather", "GatherSum")]


def _run(model, feeds_list):
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    for feeds in feeds_list:
        got = req.infer(feeds)["y"]
        np.testing.assert_allclose(got, netpass.reference.infer(model, feeds)["y"], rtol=TOL,
                                   atol=TOL)
    return req


def test_token_and_position_embeddings_are_one_launch(rng):
    model = _embeddings(rng, [53, 19], [(-1, -1), (-1, -1)])
    assert _kinds(model) == ["GatherSum"]
    shapes = [(1, 7), (3, 1), (2, 13)]
    req = _run(model, [{"i0": rng.integers(0, 53, s), "i1": rng.integers(0, 19, s)}
                       for s in shapes])
    assert req.stats["kernels_enqueued"] == len(shapes)


@pytest.mark.parametrize("nested_right", [False, True])
def test_three_tables_broadcast_indices_and_rows(rng, nested_right):
    """Three tables of [5, 3] rows; indices [b, s], [1, s] and [s] broadcast; negative
    indices count from the end."""
    model = _embeddings(rng, [41, 11, 2], [(-1, -1), (1, -1), (-1,)], row=(5, 3),
                        nested_right=nested_right)
    assert _kinds(model) == ["GatherSum"]
    _run(model, [{"i0": rng.integers(-41, 41, (3, 9)), "i1": rng.integers(0, 11, (1, 9)),
                  "i2": rng.integers(0, 2, (9,))}])


def test_matches_onnxruntime(rng):
    ort = pytest.importorskip("onnxruntime")
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    t0, t1 = randn_f32(rng, 61, 29), randn_f32(rng, 23, 29)
    graph = helper.make_graph(
        [helper.make_node("Gather", ["t0", "i0"], ["g0"], axis=0),
         helper.make_node("Gather", ["t1", "i1"], ["g1"], axis=0),
         helper.make_node("Add", ["g0", "g1"], ["y"])], "emb",
        [helper.make_tensor_value_info("i0", TensorProto.INT64, ["b", "s"]),
         helper.make_tensor_value_info("i1", TensorProto.INT64, ["b", "s"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", "s", 29])],
        [numpy_helper.from_array(t0, "t0"), numpy_helper.from_array(t1, "t1")])
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    onnx.checker.check_model(onnx.load_from_string(data))
    feeds = {"i0": rng.integers(0, 61, (2, 11)), "i1": rng.integers(0, 23, (2, 11))}
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    cm = netpass.compile_model(netpass.read_model(data), RUNTIME_DEVICE)
    assert any(n.kind == "GatherSum" for n in cm.runtime.program.nodes)
    np.testing.assert_allclose(cm.create_infer_request().infer(feeds)["y"], want, rtol=TOL,
                               atol=TOL)


def test_gathered_rows_read_elsewhere_or_other_axes_are_not_fused(rng):
    i = opset.parameter([-1], np.int64, name="i0")
    g0 = opset.gather(randn_f32(rng, 9, 4), i, np.array(0, np.int64))
    g1 = opset.gather(randn_f32(rng, 9, 4), i, np.array(0, np.int64))
    model = Model([opset.result(opset.add(g0, g1), name="y"), opset.result(g1, name="z")], [i])
    assert "GatherSum" not in _kinds(model)
    g2 = opset.gather(randn_f32(rng, 4, 9), i, np.array(1, np.int64))
    g3 = opset.gather(randn_f32(rng, 4, 9), i, np.array(1, np.int64))
    model = Model([opset.result(opset.add(g2, g3), name="y")], [i])
    assert "GatherSum" not in _kinds(model)


def test_reference_device_and_host_fallback(rng):
    """The REFERENCE device evaluates the absorbed gathers (GatherSumDesc.evaluate)."""
    model = _embeddings(rng, [13, 7], [(-1, -1), (-1, -1)])
    feeds = {"i0": rng.integers(0, 13, (2, 3)), "i1": rng.integers(0, 7, (2, 3))}
    out = compile_program(model, "REFERENCE").create_infer_request().infer(feeds)["y"]
    np.testing.assert_allclose(out, netpass.reference.infer(model, feeds)["y"], rtol=TOL, atol=TOL)
