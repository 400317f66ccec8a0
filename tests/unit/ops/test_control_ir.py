"""If, Loop and TensorIterator built with OpenVINO's builder API: numpy semantics, partial
shapes, IR v11 out and back in and run by OpenVINO, errors naming the op, and the graph
machinery around bodies (clone, compare, lint, GraphRewrite and ConstantFolding inside bodies,
per-pass validation, VisualizeTree, the runtime's host fallback). Exact unless said.
"""
from __future__ import annotations

import numpy as np
import pytest
from opcheck import check_ir_round_trip, check_openvino

import netpass
from netpass import Model, opset
from netpass.core import lint_problems
from netpass.core.dimension import Dimension
from netpass.core.shape import PartialShape
from netpass.errors import HostFallbackError, ShapeInferenceError
from netpass.ngraph_passes.common import ConstantFolding, ConvertDivide
from netpass.ops import Divide, Loop, TensorIterator
from netpass.passes import Manager, VisualizeTree
from netpass.testing import RUNTIME_DEVICE, compare_models

RNG = np.random.default_rng(51)


def accumulate_loop(trip, x_shape=(2, 3), divide: bool = False):
    """acc <- acc + x * i (or acc + x / (i + 1)) for i in range(trip); outputs the final acc
    and every iteration's acc stacked on axis 0."""
    x = opset.parameter(x_shape, "f32", "x")
    bi = opset.parameter([], "i64", "i")
    bx = opset.parameter(x_shape, "f32", "bx")
    bacc = opset.parameter(x_shape, "f32", "acc")
    fi = opset.convert(bi, "f32")
    step = opset.divide(bx, opset.add(fi, np.float32(1))) if divide else opset.multiply(bx, fi)
    acc = opset.add(bacc, step)
    body = Model([opset.constant(True), acc, opset.unsqueeze(acc, [0])], [bi, bx, bacc], "body")
    loop = opset.loop(trip, opset.constant(True))
    loop.set_function(body)
    loop.set_special_body_ports([0, 0])
    loop.set_invariant_input(bx, x.output(0))
    loop.set_merged_input(bacc, x.output(0), acc.output(0))
    final = loop.get_iter_value(acc.output(0), -1)
    stacked = loop.get_concatenated_slices(body.outputs[2], 0, 1, 1, -1, 0)
    params = [x] + ([trip] if isinstance(trip, netpass.ops.Parameter) else [])
    return Model([final, stacked], params, "accumulate"), loop


def accumulate_numpy(x, trip, divide=False):
    acc, stacked = x.copy(), []
    for i in range(trip):
        acc = acc + (x / np.float32(i + 1) if divide else x * np.float32(i))
        stacked.append(acc)
    return acc, np.stack(stacked) if stacked else np.zeros((0, *x.shape), np.float32)


def test_loop_builder_matches_numpy_and_openvino(tmp_path):
    model, loop = accumulate_loop(opset.constant(np.int64(4)))
    assert loop.output(1).partial_shape.to_shape() == (4, 2, 3)
    feeds = {"x": RNG.standard_normal((2, 3)).astype(np.float32)}
    got = netpass.reference.infer(model, feeds)
    ref = accumulate_numpy(feeds["x"], 4)
    for name, r in zip(model.output_names, ref):
        np.testing.assert_allclose(got[name], r, rtol=1e-6)
    back = check_ir_round_trip(model, feeds, tmp_path)
    assert compare_models(back, model).valid
    check_openvino(model, feeds, tmp_path, rtol=1e-6, atol=0)


def test_loop_with_a_runtime_trip_count():
    trip = opset.parameter([], "i64", "trip")
    model, loop = accumulate_loop(trip)
    ps = loop.output(1).partial_shape
    assert not ps[0].is_static and ps[1:] == PartialShape([2, 3])
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    req = netpass.compile_model(model, device=RUNTIME_DEVICE).create_infer_request()
    for n in (3, 0, 5):
        got = req.infer({"x": x, "trip": np.array(n, np.int64)})
        ref = accumulate_numpy(x, n)
        np.testing.assert_allclose(got[model.output_names[0]], ref[0], rtol=1e-6)
        assert got[model.output_names[1]].shape == ref[1].shape
        np.testing.assert_allclose(got[model.output_names[1]], ref[1], rtol=1e-6)
    assert req.stats["host_fallback_kinds"] == {"Loop": 3}


def test_if_builder_matches_numpy_and_openvino(tmp_path):
    x = opset.parameter([2, 3], "f32", "x")
    c = opset.parameter([], "boolean", "c")
    tx = opset.parameter([2, 3], "f32", "tx")
    then = Model([opset.relu(tx)], [tx], "then")
    ex = opset.parameter([2, 3], "f32", "ex")
    els = Model([opset.multiply(ex, np.float32(-2))], [ex], "else")
    node = opset.if_op(c)
    node.set_then_body(then)
    node.set_else_body(els)
    node.set_input(x.output(0), tx, ex)
    out = node.set_output(then.results[0], els.results[0])
    model = Model([out], [x, c], "branch")
    for cond in (True, False):
        feeds = {"x": RNG.standard_normal((2, 3)).astype(np.float32), "c": np.array(cond)}
        got = next(iter(netpass.reference.infer(model, feeds).values()))
        ref = np.maximum(feeds["x"], 0) if cond else feeds["x"] * np.float32(-2)
        np.testing.assert_allclose(got, ref, rtol=1e-6)
        check_ir_round_trip(model, feeds, tmp_path)
        check_openvino(model, feeds, tmp_path, rtol=1e-6, atol=0)


def test_if_output_shape_covers_both_branches():
    c = opset.parameter([], "boolean", "c")
    x = opset.parameter([Dimension(2, 4), 3], "f32", "x")
    tx = opset.parameter([Dimension(2, 4), 3], "f32", "tx")
    then = Model([opset.concat([tx, tx], 0)], [tx])
    ex = opset.parameter([Dimension(2, 4), 3], "f32", "ex")
    els = Model([ex], [ex])
    node = opset.if_op(c)
    node.set_then_body(then)
    node.set_else_body(els)
    node.set_input(x.output(0), tx, ex)
    out = node.set_output(then.results[0], els.results[0])
    assert out.partial_shape == PartialShape([Dimension(2, 8), 3])


def test_if_condition_must_be_boolean():
    f = opset.parameter([], "f32", "f")
    with pytest.raises(ShapeInferenceError, match="If .*condition must be boolean"):
        opset.if_op(f)


def test_tensor_iterator_reverse_slices(tmp_path):
    """Reads the sequence backwards and writes its outputs backwards (start -1, end 0,
    stride -1), as a reverse ONNX Scan does."""
    y = opset.parameter([5, 2, 3], "f32", "y")
    h0 = opset.parameter([2, 3], "f32", "h0")
    sx = opset.parameter([1, 2, 3], "f32", "sx")
    sh = opset.parameter([2, 3], "f32", "sh")
    h = opset.tanh(opset.add(sh, opset.squeeze(sx, [0])))
    body = Model([h, opset.unsqueeze(h, [0])], [sx, sh])
    ti = opset.tensor_iterator()
    ti.set_body(body)
    ti.set_sliced_input(sx, y.output(0), -1, -1, 1, 0, 0)
    ti.set_merged_input(sh, h0.output(0), h.output(0))
    last = ti.get_iter_value(h.output(0), -1)
    seq = ti.get_concatenated_slices(body.outputs[1], -1, -1, 1, 0, 0)
    model = Model([last, seq], [y, h0], "rnn")
    assert seq.partial_shape.to_shape() == (5, 2, 3)
    feeds = {"y": RNG.standard_normal((5, 2, 3)).astype(np.float32),
             "h0": RNG.standard_normal((2, 3)).astype(np.float32)}
    got = netpass.reference.infer(model, feeds)
    hs, state = [], feeds["h0"]
    for t in range(4, -1, -1):
        state = np.tanh(state + feeds["y"][t])
        hs.append(state)
    np.testing.assert_allclose(got[model.output_names[0]], state, rtol=1e-6)
    np.testing.assert_allclose(got[model.output_names[1]], np.stack(hs[::-1]), rtol=1e-6)
    check_ir_round_trip(model, feeds, tmp_path)
    check_openvino(model, feeds, tmp_path, rtol=1e-5, atol=1e-6)


def test_tensor_iterator_with_dynamic_sequence_length():
    y = opset.parameter([-1, 4], "f32", "y")
    sx = opset.parameter([1, 4], "f32", "sx")
    body = Model([opset.multiply(sx, np.float32(3))], [sx])
    ti = opset.tensor_iterator()
    ti.set_body(body)
    ti.set_sliced_input(sx, y.output(0), 0, 1, 1, -1, 0)
    out = ti.get_concatenated_slices(body.outputs[0], 0, 1, 1, -1, 0)
    assert not out.partial_shape[0].is_static and out.partial_shape[1].min == 4
    feeds = {"y": RNG.standard_normal((7, 4)).astype(np.float32)}
    got = next(iter(netpass.reference.infer(Model([out], [y]), feeds).values()))
    np.testing.assert_allclose(got, feeds["y"] * 3, rtol=1e-6)


def test_loop_carried_type_mismatch_is_refused():
    x = opset.parameter([3], "f32", "x")
    bp = opset.parameter([3], "f32", "bp")
    body = Model([opset.constant(True), opset.convert(bp, "i32")], [bp])
    loop = opset.loop(opset.constant(np.int64(2)), opset.constant(True))
    loop.set_function(body)
    loop.set_special_body_ports([-1, 0])
    with pytest.raises(ShapeInferenceError, match="Loop .*back edge.*i32"):
        loop.set_merged_input(bp, x.output(0), body.outputs[1])


def test_clone_copies_bodies_and_compares_equal():
    model, loop = accumulate_loop(opset.constant(np.int64(3)))
    copy = model.clone()
    assert compare_models(copy, model).valid
    cloned = next(n for n in copy.get_ordered_ops() if isinstance(n, Loop))
    assert cloned.get_function() is not loop.get_function()
    # a change to the copy's body leaves the original alone, and the comparison sees it
    add = next(n for n in cloned.get_function().get_ordered_ops() if n.type_name == "Add")
    add.output(0).replace(opset.subtract(add.input_value(0), add.input_value(1)).output(0))
    assert not compare_models(copy, model).valid
    assert any(n.type_name == "Add" for n in loop.get_function().get_ordered_ops())


def test_lint_reports_problems_inside_bodies():
    model, loop = accumulate_loop(opset.constant(np.int64(3)))
    assert lint_problems(model) == []
    loop.get_function().add_parameters([opset.parameter([1], "f32", "stray")])
    problems = lint_problems(model)
    assert any("body Parameters [3] are fed by no input" in p for p in problems)


def test_graph_rewrite_reaches_into_bodies_with_validation():
    model, loop = accumulate_loop(opset.constant(np.int64(3)), divide=True)
    feeds = {"x": RNG.standard_normal((2, 3)).astype(np.float32)}
    before = netpass.reference.infer(model, feeds)
    manager = Manager()
    manager.register_pass(ConvertDivide())
    assert manager.run_passes(model)
    body_ops = list(loop.get_function().get_ordered_ops())
    assert not any(isinstance(n, Divide) for n in body_ops)
    after = netpass.reference.infer(model, feeds)
    for name in before:
        np.testing.assert_allclose(after[name], before[name], rtol=1e-6)


def test_constant_folding_inside_bodies_and_of_whole_loops():
    # a body's constant sub-graph folds; the Loop itself stays (its input is a Parameter)
    x_in = opset.parameter([2, 3], "f32", "x")
    bx = opset.parameter([2, 3], "f32", "bx")
    scale = opset.add(opset.constant(np.float32(2)), opset.constant(np.float32(3)))
    body = Model([opset.constant(True), opset.multiply(bx, scale)], [bx])
    loop = opset.loop(opset.constant(np.int64(2)), opset.constant(True))
    loop.set_function(body)
    loop.set_special_body_ports([-1, 0])
    loop.set_invariant_input(bx, x_in.output(0))
    model = Model([loop.get_iter_value(body.outputs[1])], [x_in])
    assert ConstantFolding().run_on_model(model)
    assert "Add" not in [n.type_name for n in loop.get_function().get_ordered_ops()]
    assert "Loop" in [n.type_name for n in model.get_ordered_ops()]
    feed = RNG.standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(next(iter(netpass.reference.infer(model, {"x": feed}).values())),
                               feed * 5, rtol=1e-6)
    # every input constant and a bounded trip count: the whole Loop folds
    x = opset.constant(RNG.standard_normal((2, 3)).astype(np.float32))
    bp = opset.parameter([2, 3], "f32", "bp")
    doubled = opset.add(bp, bp)
    body = Model([opset.constant(True), doubled], [bp])
    folded = opset.loop(opset.constant(np.int64(3)), opset.constant(True))
    folded.set_function(body)
    folded.set_special_body_ports([-1, 0])
    folded.set_merged_input(bp, x.output(0), doubled.output(0))
    out = folded.get_iter_value(doubled.output(0))
    m = Model([opset.relu(out)], [])
    assert ConstantFolding().run_on_model(m)
    kinds = [n.type_name for n in m.get_ordered_ops()]
    assert "Loop" not in kinds
    np.testing.assert_allclose(next(iter(netpass.reference.infer(m, {}).values())),
                               np.maximum(x.value * 8, 0), rtol=1e-6)


def test_loops_that_cannot_be_folded_stay():
    # no trip count: folding could spin forever on a constant condition
    bp = opset.parameter([2], "f32", "bp")
    body = Model([opset.constant(False), bp], [bp])
    loop = opset.loop(opset.constant(np.int64(-1)), opset.constant(True))
    loop.set_function(body)
    loop.set_special_body_ports([-1, 0])
    loop.set_merged_input(bp, opset.constant(np.ones(2, np.float32)).output(0), bp.output(0))
    m = Model([loop.get_iter_value(bp.output(0))], [])
    assert not ConstantFolding().run_on_model(m)
    # a random draw in the body: not a value known at compile time
    seed = opset.parameter([2], "f32", "s")
    drawn = netpass.ops.RandomUniformLike([seed.output(0)], seed=3.0)
    body2 = Model([opset.constant(True), drawn], [seed])
    loop2 = opset.loop(opset.constant(np.int64(2)), opset.constant(True))
    loop2.set_function(body2)
    loop2.set_special_body_ports([-1, 0])
    loop2.set_merged_input(seed, opset.constant(np.ones(2, np.float32)).output(0),
                           drawn.output(0))
    m2 = Model([loop2.get_iter_value(drawn.output(0))], [])
    assert not ConstantFolding().run_on_model(m2)


def test_host_fallback_switch_names_the_loop():
    model, _ = accumulate_loop(opset.parameter([], "i64", "trip"))
    with pytest.raises(HostFallbackError) as info:
        netpass.compile_model(model, device=RUNTIME_DEVICE, config={"HOST_FALLBACK": False})
    assert "Loop" in {k for k, _, _ in info.value.ops}


def test_visualize_tree_draws_a_model_with_bodies(tmp_path):
    model, _ = accumulate_loop(opset.constant(np.int64(2)))
    VisualizeTree(str(tmp_path / "g.dot")).run_on_model(model)
    assert "Loop" in (tmp_path / "g.dot").read_text()


def test_openvino_written_bodies_are_read(tmp_path):
    ov = pytest.importorskip("openvino")
    import openvino.opset13 as ops
    x = ops.parameter([3, 2], np.float32, name="x")
    sx = ops.parameter([1, 2], np.float32)
    sacc = ops.parameter([1, 2], np.float32)
    s = ops.add(sacc, sx)
    body = ov.Model([s, s], [sx, sacc])
    ti = ops.tensor_iterator()
    ti.set_body(body)
    ti.set_sliced_input(sx, x.output(0), 0, 1, 1, -1, 0)
    ti.set_merged_input(sacc, ops.constant(np.zeros((1, 2), np.float32)).output(0),
                        s.output(0))
    outs = [ti.get_iter_value(s.output(0), -1), ti.get_concatenated_slices(body.outputs[1],
                                                                           0, 1, 1, -1, 0)]
    ov.save_model(ov.Model(outs, [x], "cumsum"), str(tmp_path / "ov.xml"))
    model = netpass.read_model(str(tmp_path / "ov.xml"))
    ti_node = next(n for n in model.get_ordered_ops() if isinstance(n, TensorIterator))
    assert len(ti_node.get_body().get_ordered_ops()) >= 4
    feeds = {"x": RNG.standard_normal((3, 2)).astype(np.float32)}
    got = netpass.reference.infer(model, feeds)
    np.testing.assert_allclose(got[model.output_names[1]], np.cumsum(feeds["x"], 0), rtol=1e-6)
