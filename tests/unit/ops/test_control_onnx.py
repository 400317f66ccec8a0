"""ONNX If, Loop and Scan imported onto If, Loop and TensorIterator, against onnxruntime on
random data: captured outer values (one and two levels up), branches of different shapes,
conditions known at import (the other branch never converted), for-, while- and do-while loops,
zero iterations, loop-carried values whose shape grows, Scan with several states, axes (negative
too), reverse directions, and Scan-8's batch axis. rtol 1e-5, atol 1e-6; integer outputs exact.
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from opcheck import assert_close, expected

import netpass
from netpass.errors import ModelFormatError, NetpassError
from netpass.ops.control import If, Loop, TensorIterator

RNG = np.random.default_rng(15)
F = TensorProto.FLOAT
RTOL, ATOL = 1e-5, 1e-6


def vi(name: str, elem: int = F, shape=None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, opset: int = 17, inits=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    proto.ir_version = 8
    return proto


def check(proto: onnx.ModelProto, feeds: dict) -> netpass.Model:
    """netpass's reference equals onnxruntime; returns the imported model."""
    m = netpass.read_model(proto)
    got = netpass.reference.infer(m, feeds)
    ref = expected(proto, feeds, "ort")
    for vo, r in zip(proto.graph.output, ref):
        assert_close(got[vo.name], r, RTOL, ATOL, vo.name)
    return m


def ops_of(m: netpass.Model) -> list[str]:
    return [n.type_name for n in m.get_ordered_ops()]


# -- If ----------------------------------------------------------------------------------------
def _if_model(shape_a, shape_b) -> onnx.ModelProto:
    """If(c): then = x * y (captures x and y), else = Tile(x) of another shape (captures x)."""
    then = helper.make_graph([helper.make_node("Mul", ["x", "y"], ["t"])], "then", [], [vi("t")])
    reps = helper.make_tensor("reps", TensorProto.INT64, [len(shape_a)], [2] + [1] * (len(shape_a) - 1))
    els = helper.make_graph([helper.make_node("Tile", ["x", "reps"], ["e"])], "else", [],
                            [vi("e")], [reps])
    node = helper.make_node("If", ["c"], ["out"], then_branch=then, else_branch=els)
    return model([node], [vi("c", TensorProto.BOOL, []), vi("x", F, shape_a),
                          vi("y", F, shape_b)], [vi("out")])


@pytest.mark.parametrize("cond", [True, False])
@pytest.mark.parametrize("shape", [(3,), (2, 5), (2, 3, 4)])
def test_if_branches_match_onnxruntime(cond, shape):
    feeds = {"c": np.array(cond), "x": RNG.standard_normal(shape).astype(np.float32),
             "y": RNG.standard_normal(shape[-1:]).astype(np.float32)}
    m = check(_if_model(shape, shape[-1:]), feeds)
    node = next(n for n in m.get_ordered_ops() if isinstance(n, If))
    # both branches read x; one input each per outer value, shared
    assert node.get_input_size() == 3
    # then gives `shape`, else doubles axis 0: the output covers both
    ps = node.output(0).partial_shape
    assert ps[0].min == shape[0] and ps[0].max == 2 * shape[0]
    assert [d.min for d in ps][1:] == list(shape[1:])


def test_if_nested_captures_two_levels_up():
    inner_then = helper.make_graph([helper.make_node("Add", ["x", "z"], ["it"])], "it", [],
                                   [vi("it")])
    inner_else = helper.make_graph([helper.make_node("Sub", ["x", "z"], ["ie"])], "ie", [],
                                   [vi("ie")])
    outer_then = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["z"]),
         helper.make_node("If", ["d"], ["ot"], then_branch=inner_then, else_branch=inner_else)],
        "ot", [], [vi("ot")])
    outer_else = helper.make_graph([helper.make_node("Abs", ["x"], ["oe"])], "oe", [], [vi("oe")])
    node = helper.make_node("If", ["c"], ["out"], then_branch=outer_then, else_branch=outer_else)
    proto = model([node], [vi("c", TensorProto.BOOL, []), vi("d", TensorProto.BOOL, []),
                           vi("x", F, [4, 3])], [vi("out")])
    x = RNG.standard_normal((4, 3)).astype(np.float32)
    for c in (True, False):
        for d in (True, False):
            check(proto, {"c": np.array(c), "d": np.array(d), "x": x})


def test_if_known_at_import_keeps_only_the_chosen_branch():
    """The condition folds from shape math; the else branch would not even fit these shapes
    (a Split of 3 into 2), which ONNX allows: it is never converted."""
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [], [vi("t")])
    els = helper.make_graph([helper.make_node("Split", ["x"], ["e0", "e1"], axis=0,
                                              num_outputs=2)], "else", [], [vi("e0")])
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Size", ["s"], ["rank"]),
             helper.make_node("Constant", [], ["one"], value_int=1),
             helper.make_node("Equal", ["rank", "one"], ["c"]),
             helper.make_node("If", ["c"], ["out"], then_branch=then, else_branch=els)]
    proto = model(nodes, [vi("x", F, [3])], [vi("out")], opset=18)
    m = check(proto, {"x": RNG.standard_normal(3).astype(np.float32)})
    assert "If" not in ops_of(m) and "Relu" in ops_of(m)


def test_if_branches_with_different_output_counts_are_refused():
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [], [vi("t")])
    els = helper.make_graph([helper.make_node("Relu", ["x"], ["e"]),
                             helper.make_node("Neg", ["x"], ["f"])], "else", [],
                            [vi("e"), vi("f")])
    node = helper.make_node("If", ["c"], ["out"], then_branch=then, else_branch=els)
    proto = model([node], [vi("c", TensorProto.BOOL, []), vi("x", F, [3])], [vi("out")])
    with pytest.raises(ModelFormatError, match="then_branch has 1 outputs, else_branch 2"):
        netpass.read_model(proto)


# -- Loop --------------------------------------------------------------------------------------
def _loop_model(with_trip: bool = True, with_cond: bool = True, limit: float | None = None,
                opset: int = 17) -> onnx.ModelProto:
    """acc <- acc * a + i (a captured), scan out acc; with ``limit`` the body stops once
    sum(acc) passes it (a while loop)."""
    body_nodes = [
        helper.make_node("Cast", ["i"], ["fi"], to=F),
        helper.make_node("Mul", ["acc_in", "a"], ["m"]),
        helper.make_node("Add", ["m", "fi"], ["acc_out"]),
        helper.make_node("Identity", ["acc_out"], ["scan"]),
    ]
    if limit is None:
        body_nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"]))
    else:
        lim = helper.make_tensor("lim", F, [], [limit])
        body_nodes += [helper.make_node("ReduceSum", ["acc_out"], ["s"], keepdims=0),
                       helper.make_node("Constant", [], ["lim"], value=lim),
                       helper.make_node("Less", ["s", "lim"], ["cond_out"])]
    body = helper.make_graph(body_nodes, "body",
                             [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []),
                              vi("acc_in")],
                             [vi("cond_out", TensorProto.BOOL, []), vi("acc_out"), vi("scan")])
    node = helper.make_node("Loop", ["M" if with_trip else "", "cond" if with_cond else "",
                                     "acc0"], ["acc", "scans"], body=body)
    inputs = [vi("a", F, [2, 3]), vi("acc0", F, [2, 3])]
    if with_trip:
        inputs.append(vi("M", TensorProto.INT64, []))
    if with_cond:
        inputs.append(vi("cond", TensorProto.BOOL, []))
    return model([node], inputs, [vi("acc"), vi("scans")], opset=opset)


@pytest.mark.parametrize("trip", [0, 1, 4])
@pytest.mark.parametrize("cond", [True, False])
def test_loop_for_and_zero_iterations(trip, cond):
    feeds = {"a": RNG.uniform(0.5, 1.5, (2, 3)).astype(np.float32),
             "acc0": RNG.standard_normal((2, 3)).astype(np.float32),
             "M": np.array(trip, np.int64), "cond": np.array(cond)}
    if trip and cond:
        m = check(_loop_model(), feeds)
        assert "Loop" in ops_of(m)
        return
    # no iteration: the initial value, and no scan item (onnxruntime, which cannot see the
    # scan output's shape then, returns shape [0]; netpass keeps the item shape [0, 2, 3])
    got = netpass.reference.infer(netpass.read_model(_loop_model()), feeds)
    np.testing.assert_array_equal(got["acc"], feeds["acc0"])
    assert got["scans"].shape == (0, 2, 3) and got["scans"].dtype == np.float32


@pytest.mark.parametrize("opset", [11, 13, 16, 21])
def test_loop_while_stops_on_the_body_condition(opset):
    feeds = {"a": RNG.uniform(1.0, 1.3, (2, 3)).astype(np.float32),
             "acc0": RNG.uniform(0.1, 1.0, (2, 3)).astype(np.float32),
             "cond": np.array(True)}
    got = check(_loop_model(with_trip=False, limit=60.0, opset=opset), feeds)
    out = netpass.reference.infer(got, feeds)["scans"]
    assert 1 < out.shape[0] < 50


def test_loop_trip_count_without_condition():
    feeds = {"a": RNG.uniform(0.5, 1.0, (2, 3)).astype(np.float32),
             "acc0": RNG.standard_normal((2, 3)).astype(np.float32), "M": np.array(3, np.int64)}
    check(_loop_model(with_cond=False), feeds)


def test_loop_carried_value_that_grows():
    """A value concatenated to itself every iteration: its shape changes, so the body's
    Parameter is made dynamic along that axis."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Concat", ["v_in", "x"], ["v_out"], axis=0)], "body",
        [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []), vi("v_in")],
        [vi("cond_out", TensorProto.BOOL, []), vi("v_out")])
    node = helper.make_node("Loop", ["M", "", "v0"], ["v"], body=body)
    proto = model([node], [vi("M", TensorProto.INT64, []), vi("v0", F, [1, 4]),
                           vi("x", F, [2, 4])], [vi("v")])
    for trip in (0, 3):
        feeds = {"M": np.array(trip, np.int64), "v0": RNG.standard_normal((1, 4)).astype(np.float32),
                 "x": RNG.standard_normal((2, 4)).astype(np.float32)}
        m = check(proto, feeds)
    loop = next(n for n in m.get_ordered_ops() if isinstance(n, Loop))
    ps = loop.output(0).partial_shape
    assert not ps[0].is_static and ps[1].min == 4
    assert not loop.get_function().parameters[2].shape[0].is_static


def test_loop_known_trip_count_sizes_the_scan_output():
    proto = _loop_model(with_cond=False)
    proto.graph.input.pop()  # M becomes an initializer
    proto.graph.initializer.append(helper.make_tensor("M", TensorProto.INT64, [], [5]))
    m = netpass.read_model(proto)
    loop = next(n for n in m.get_ordered_ops() if isinstance(n, Loop))
    assert loop.output(1).partial_shape.to_shape() == (5, 2, 3)
    feeds = {"a": RNG.standard_normal((2, 3)).astype(np.float32),
             "acc0": RNG.standard_normal((2, 3)).astype(np.float32)}
    check(proto, feeds)


def test_loop_body_with_an_if_inside():
    then = helper.make_graph([helper.make_node("Add", ["v_in", "x"], ["t"])], "t", [], [vi("t")])
    els = helper.make_graph([helper.make_node("Sub", ["v_in", "x"], ["e"])], "e", [], [vi("e")])
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Constant", [], ["two"], value_int=2),
         helper.make_node("Mod", ["i", "two"], ["r"]),
         helper.make_node("Constant", [], ["zero"], value_int=0),
         helper.make_node("Equal", ["r", "zero"], ["even"]),
         helper.make_node("If", ["even"], ["v_out"], then_branch=then, else_branch=els)],
        "body", [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []),
                 vi("v_in")], [vi("cond_out", TensorProto.BOOL, []), vi("v_out")])
    node = helper.make_node("Loop", ["M", "", "v0"], ["v"], body=body)
    proto = model([node], [vi("M", TensorProto.INT64, []), vi("v0", F, [3]), vi("x", F, [3])],
                  [vi("v")])
    feeds = {"M": np.array(5, np.int64), "v0": RNG.standard_normal(3).astype(np.float32),
             "x": RNG.standard_normal(3).astype(np.float32)}
    check(proto, feeds)


def test_loop_body_error_names_the_loop():
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Reshape", ["v_in", "shape"], ["v_out"])], "body",
        [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []), vi("v_in")],
        [vi("cond_out", TensorProto.BOOL, []), vi("v_out")])
    node = helper.make_node("Loop", ["M", "", "v0"], ["v"], body=body, name="the_loop")
    proto = model([node], [vi("M", TensorProto.INT64, []), vi("v0", F, [6]),
                           vi("shape", TensorProto.INT64, [2])], [vi("v")])
    m = netpass.read_model(proto)
    with pytest.raises(NetpassError, match="Loop 'the_loop' body: Reshape"):
        netpass.reference.infer(m, {"M": np.array(2, np.int64),
                                    "v0": np.ones(6, np.float32),
                                    "shape": np.array([4, 4], np.int64)})


# -- Scan --------------------------------------------------------------------------------------
def _scan_model(shape, n_states: int, in_axis: int, in_rev: int, out_axis: int, out_rev: int,
                opset: int = 16) -> tuple[onnx.ModelProto, dict]:
    """States s_j <- s_j + x_t * w (w captured); scan outputs s_0 * 2 and x_t."""
    rank = len(shape)
    axis = in_axis % rank
    item = [d for i, d in enumerate(shape) if i != axis]
    nodes, b_in, b_out = [], [], []
    for j in range(n_states):
        nodes += [helper.make_node("Mul", ["x_t", "w"], [f"p{j}"]),
                  helper.make_node("Add", [f"s{j}_in", f"p{j}"], [f"s{j}_out"])]
        b_in.append(vi(f"s{j}_in"))
        b_out.append(vi(f"s{j}_out"))
    nodes += [helper.make_node("Constant", [], ["k"],
                               value=helper.make_tensor("two", F, [], [2.0])),
              helper.make_node("Mul", ["s0_out", "k"], ["y0"]),
              helper.make_node("Identity", ["x_t"], ["y1"])]
    body = helper.make_graph(nodes, "body", b_in + [vi("x_t")], b_out + [vi("y0"), vi("y1")])
    attrs = dict(num_scan_inputs=1, scan_input_axes=[in_axis], scan_input_directions=[in_rev],
                 scan_output_axes=[out_axis, out_axis], scan_output_directions=[out_rev, 0])
    node = helper.make_node("Scan", [f"init{j}" for j in range(n_states)] + ["x"],
                            [f"final{j}" for j in range(n_states)] + ["ys0", "ys1"],
                            body=body, **attrs)
    inputs = [vi(f"init{j}", F, item) for j in range(n_states)] + \
        [vi("x", F, list(shape)), vi("w", F, item)]
    outs = [vi(f"final{j}") for j in range(n_states)] + [vi("ys0"), vi("ys1")]
    feeds = {f"init{j}": RNG.standard_normal(item).astype(np.float32) for j in range(n_states)}
    feeds["x"] = RNG.standard_normal(shape).astype(np.float32)
    feeds["w"] = RNG.standard_normal(item).astype(np.float32)
    return model([node], inputs, outs, opset=opset), feeds


@pytest.mark.parametrize("shape,in_axis,out_axis", [
    ((5, 3), 0, 0), ((4, 3, 2), 1, 0), ((4, 3, 2), -1, -1), ((2, 6, 3), 1, 2)])
@pytest.mark.parametrize("in_rev,out_rev", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_scan_matches_onnxruntime(shape, in_axis, out_axis, in_rev, out_rev):
    proto, feeds = _scan_model(shape, 2, in_axis, in_rev, out_axis, out_rev)
    m = check(proto, feeds)
    ti = next(n for n in m.get_ordered_ops() if isinstance(n, TensorIterator))
    steps = shape[in_axis % len(shape)]
    out_rank = len(shape)
    assert ti.output(2).partial_shape[out_axis % out_rank].min == steps


@pytest.mark.parametrize("opset", [9, 11, 19])
def test_scan_versions(opset):
    proto, feeds = _scan_model((3, 4), 1, 0, 0, 0, 0, opset=opset)
    check(proto, feeds)


def test_scan8_iterates_every_batch_item():
    body = helper.make_graph([helper.make_node("Add", ["s_in", "x_t"], ["s_out"]),
                              helper.make_node("Mul", ["s_out", "x_t"], ["y"])], "body",
                             [vi("s_in"), vi("x_t")], [vi("s_out"), vi("y")])
    node = helper.make_node("Scan", ["", "s0", "x"], ["s", "ys"], body=body, num_scan_inputs=1,
                            directions=[1])
    proto = model([node], [vi("s0", F, [3, 2]), vi("x", F, [3, 4, 2])], [vi("s"), vi("ys")],
                  opset=8)
    feeds = {"s0": RNG.standard_normal((3, 2)).astype(np.float32),
             "x": RNG.standard_normal((3, 4, 2)).astype(np.float32)}
    m = netpass.read_model(proto)
    got = netpass.reference.infer(m, feeds)
    # neither onnxruntime nor onnx's reference runs Scan-8: the specification in numpy (one
    # scan per batch item, the input read backwards, outputs stacked in iteration order)
    s, ys = feeds["s0"].copy(), np.zeros((3, 4, 2), np.float32)
    for b in range(3):
        for t, x_t in enumerate(feeds["x"][b][::-1]):
            s[b] = s[b] + x_t
            ys[b, t] = s[b] * x_t
    assert_close(got["s"], s, RTOL, ATOL, "s")
    assert_close(got["ys"], ys, RTOL, ATOL, "ys")
    outer = next(n for n in m.get_ordered_ops() if isinstance(n, TensorIterator))
    assert any(isinstance(n, TensorIterator) for n in outer.get_body().get_ordered_ops())
