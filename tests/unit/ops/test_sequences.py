"""Sequences and optionals as IR values: every sequence op against onnxruntime on random shapes
(positions negative and at the ends, uneven splits, new axes), SequenceMap over sequences and a
tensor, Loops carrying sequences, optional inputs and outputs (onnx's reference evaluator,
which takes None for an empty optional), opset gating, partial shapes, errors naming the op or
input, and the runtime (sequence inputs and outputs through the host fallback). Exact unless
said (floats: rtol 1e-5).
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from opcheck import assert_close, expected

import netpass
from netpass import Model, opset
from netpass.core.dimension import Dimension
from netpass.core.shape import PartialShape
from netpass.core.types import Type, f32, optional_of, sequence_of
from netpass.errors import InputError, ModelFormatError, NetpassError, UnsupportedOpError
from netpass.testing import RUNTIME_DEVICE

RNG = np.random.default_rng(2)
F, I64 = TensorProto.FLOAT, TensorProto.INT64
SEQ_F = helper.make_sequence_type_proto(helper.make_tensor_type_proto(F, None))


def tvi(name, elem=F, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def svi(name):
    return helper.make_value_info(name, SEQ_F)


def model(nodes, inputs, outputs, opset_version=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset_version)])
    proto.ir_version = 8 if opset_version <= 17 else 10
    return proto


def same(got, ref, what="out"):
    """Equal values; sequences element by element."""
    if isinstance(ref, list):
        assert isinstance(got, list) and len(got) == len(ref), what
        for i, (g, r) in enumerate(zip(got, ref)):
            same(g, r, f"{what}[{i}]")
        return
    assert_close(got, ref, 1e-5, 0, what)


def check(proto, feeds, engine="ort"):
    m = netpass.read_model(proto)
    got = netpass.reference.infer(m, feeds)
    for vo, r in zip(proto.graph.output, expected(proto, feeds, engine)):
        same(got[vo.name], r, vo.name)
    return m


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("pos", [0, 2, -1, -3])
def test_construct_at_insert_erase_length(pos):
    nodes = [helper.make_node("SequenceConstruct", ["a", "b", "c"], ["s"]),
             helper.make_node("SequenceAt", ["s", "p"], ["at"]),
             helper.make_node("SequenceInsert", ["s", "a", "p"], ["ins"]),
             helper.make_node("SequenceErase", ["s", "p"], ["erased"]),
             helper.make_node("SequenceErase", ["s"], ["erased_last"]),
             helper.make_node("SequenceLength", ["ins"], ["n"])]
    proto = model(nodes, [tvi("a", F, [2, 3]), tvi("b", F, [4, 3]), tvi("c", F, [1, 3]),
                          tvi("p", I64, [])],
                  [tvi("at"), svi("ins"), svi("erased"), svi("erased_last"), tvi("n", I64)])
    check(proto, {"a": rand(2, 3), "b": rand(4, 3), "c": rand(1, 3), "p": np.array(pos)})


def test_sequence_shapes_cover_every_element():
    a = opset.parameter([2, 3], "f32", "a")
    b = opset.parameter([4, 3], "f32", "b")
    s = opset.sequence_construct([a, b])
    assert s.output(0).element_type is sequence_of(f32)
    assert s.output(0).partial_shape == PartialShape([Dimension(2, 4), 3])
    at = opset.sequence_at(s, 1)
    assert at.output(0).element_type is f32
    assert at.output(0).partial_shape == PartialShape([Dimension(2, 4), 3])
    cat = opset.concat_from_sequence(s, 0)
    assert cat.output(0).partial_shape.rank.min == 2
    stacked = opset.concat_from_sequence(s, -1, new_axis=True)
    assert len(stacked.output(0).partial_shape) == 3
    assert Type.of("opt<seq<f32>>") is optional_of(sequence_of(f32))


@pytest.mark.parametrize("split,keepdims,axis", [
    (None, 1, 0), (None, 0, 1), (None, 0, -1), (2, 1, 1), (4, 1, -1), ([1, 4, 1], 1, 1)])
def test_split_to_sequence(split, keepdims, axis):
    x = rand(3, 6)
    inits, names = [], ["x"]
    if split is not None:
        inits = [onnx.numpy_helper.from_array(np.asarray(split, np.int64), "split")]
        names.append("split")
    node = helper.make_node("SplitToSequence", names, ["s"], axis=axis, keepdims=keepdims)
    graph = helper.make_graph([node], "g", [tvi("x", F, [3, 6])], [svi("s")], inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    check(proto, {"x": x})


@pytest.mark.parametrize("axis,new_axis", [(0, 0), (1, 0), (-1, 0), (0, 1), (2, 1), (-1, 1)])
def test_concat_from_sequence(axis, new_axis):
    nodes = [helper.make_node("SequenceConstruct", ["a", "b"], ["s"]),
             helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=axis, new_axis=new_axis)]
    check(model(nodes, [tvi("a", F, [2, 3]), tvi("b", F, [2, 3])], [tvi("y")]),
          {"a": rand(2, 3), "b": rand(2, 3)})


def test_sequence_inputs_and_outputs_through_the_runtime():
    nodes = [helper.make_node("SequenceInsert", ["s", "x"], ["s2"]),
             helper.make_node("ConcatFromSequence", ["s2"], ["cat"], axis=0),
             helper.make_node("Relu", ["cat"], ["y"])]
    proto = model(nodes, [svi("s"), tvi("x", F, [1, 4])], [svi("s2"), tvi("y")])
    m = check(proto, {"s": [rand(2, 4), rand(3, 4)], "x": rand(1, 4)})
    req = netpass.compile_model(m, device=RUNTIME_DEVICE).create_infer_request()
    for n in (2, 0, 5):
        feeds = {"s": [rand(1, 4) for _ in range(n)], "x": rand(1, 4)}
        got = req.infer(feeds)
        ref = netpass.reference.infer(m, feeds)
        same(got["s2"], ref["s2"], "s2")
        same(got["y"], ref["y"], "y")
    kinds = req.stats["host_fallback_kinds"]
    assert kinds["SequenceInsert"] == 3 and kinds["ConcatFromSequence"] == 3


def test_sequence_feeds_are_checked():
    m = netpass.read_model(model([helper.make_node("SequenceLength", ["s"], ["n"])], [svi("s")],
                                 [tvi("n", I64)]))
    assert netpass.reference.infer(m, {"s": [rand(2), rand(3)]})["n"] == 2
    with pytest.raises(InputError, match="'s'.*expected a sequence"):
        netpass.reference.infer(m, {"s": rand(2)})
    with pytest.raises(InputError, match="'s'.*element\\[1\\] has dtype int64"):
        netpass.reference.infer(m, {"s": [rand(2), np.arange(2)]})


def test_position_out_of_range_names_the_op():
    nodes = [helper.make_node("SequenceAt", ["s", "p"], ["y"], name="pick")]
    m = netpass.read_model(model(nodes, [svi("s"), tvi("p", I64, [])], [tvi("y")]))
    with pytest.raises(NetpassError, match="SequenceAt 'pick'.*position 2 is out of range"):
        netpass.reference.infer(m, {"s": [rand(2), rand(2)], "p": np.array(2)})


def test_sequence_map_over_two_sequences_and_a_tensor():
    body = helper.make_graph([helper.make_node("Add", ["a", "b"], ["ab"]),
                              helper.make_node("Mul", ["ab", "t"], ["y"]),
                              helper.make_node("Shape", ["a"], ["shape"])], "body",
                             [tvi("a"), tvi("b"), tvi("t")], [tvi("y"), tvi("shape", I64)])
    node = helper.make_node("SequenceMap", ["s1", "s2", "t"], ["ys", "shapes"], body=body)
    shape_seq = helper.make_value_info(
        "shapes", helper.make_sequence_type_proto(helper.make_tensor_type_proto(I64, None)))
    proto = model([node], [svi("s1"), svi("s2"), tvi("t", F, [3])], [svi("ys"), shape_seq])
    sizes = [1, 4, 2]
    feeds = {"s1": [rand(n, 3) for n in sizes], "s2": [rand(n, 3) for n in sizes],
             "t": rand(3)}
    m = check(proto, feeds, engine="auto")
    req = netpass.compile_model(m, device=RUNTIME_DEVICE).create_infer_request()
    got, ref = req.infer(feeds), netpass.reference.infer(m, feeds)
    same(got["ys"], ref["ys"])
    same(got["shapes"], ref["shapes"])


def test_loop_carrying_a_sequence():
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Cast", ["i"], ["fi"], to=F),
         helper.make_node("Mul", ["x", "fi"], ["xi"]),
         helper.make_node("SequenceInsert", ["seq_in", "xi"], ["seq_out"])], "body",
        [tvi("i", I64, []), tvi("cond_in", TensorProto.BOOL, []), svi("seq_in")],
        [tvi("cond_out", TensorProto.BOOL, []), svi("seq_out")])
    nodes = [helper.make_node("SequenceEmpty", [], ["empty"], dtype=F),
             helper.make_node("Loop", ["M", "", "empty"], ["seq"], body=body),
             helper.make_node("ConcatFromSequence", ["seq"], ["y"], axis=0, new_axis=1)]
    proto = model(nodes, [tvi("M", I64, []), tvi("x", F, [2])], [tvi("y")])
    check(proto, {"M": np.array(4, np.int64), "x": rand(2)})


def _optional_model(opset_version, inner_input: bool):
    opt_t = helper.make_optional_type_proto(helper.make_tensor_type_proto(F, [3]))
    x = helper.make_value_info("x", opt_t) if inner_input else tvi("x", F, [3])
    nodes = [helper.make_node("OptionalHasElement", ["x"], ["has"])]
    outs = [tvi("has", TensorProto.BOOL, [])]
    return model(nodes, [x], outs, opset_version)


def test_optional_values():
    opt_t = helper.make_optional_type_proto(helper.make_tensor_type_proto(F, [3]))
    nodes = [helper.make_node("OptionalHasElement", ["x"], ["has"]),
             helper.make_node("If", ["has"], ["y"],
                              then_branch=helper.make_graph(
                                  [helper.make_node("OptionalGetElement", ["x"], ["v"])],
                                  "then", [], [tvi("v")]),
                              else_branch=helper.make_graph(
                                  [helper.make_node("Constant", [], ["z"],
                                                    value=onnx.numpy_helper.from_array(
                                                        np.zeros(3, np.float32)))],
                                  "else", [], [tvi("z")])),
             helper.make_node("Optional", ["y"], ["wrapped"])]
    proto = model(nodes, [helper.make_value_info("x", opt_t)],
                  [tvi("has", TensorProto.BOOL, []), tvi("y"),
                   helper.make_value_info("wrapped", opt_t)], 18)
    m = netpass.read_model(proto)
    req = netpass.compile_model(m, device=RUNTIME_DEVICE).create_infer_request()
    for x in (rand(3), None):
        # the specification, by hand (onnx's reference wraps optionals in lists of its own)
        y = x if x is not None else np.zeros(3, np.float32)
        for run in (netpass.reference.infer(m, {"x": x}), req.infer({"x": x})):
            assert bool(run["has"]) is (x is not None)
            same(run["y"], y)
            same(run["wrapped"], y)


def test_optional_opset_gating_and_empty_get():
    with pytest.raises(UnsupportedOpError, match="takes an optional before opset 18"):
        netpass.read_model(_optional_model(15, inner_input=False))
    m = netpass.read_model(_optional_model(18, inner_input=False))
    assert "OptionalHasElement" not in [n.type_name for n in m.get_ordered_ops()]
    assert netpass.reference.infer(m, {"x": rand(3)})["has"]
    empty = opset.optional(element_type="f32")
    got = opset.optional_get_element(empty)
    got.friendly_name = "get"
    with pytest.raises(NetpassError, match="OptionalGetElement 'get': the optional is empty"):
        netpass.reference.infer(Model([got], []), {})


def test_ir_writer_refuses_sequences(tmp_path):
    a = opset.parameter([2], "f32", "a")
    m = Model([opset.sequence_at(opset.sequence_construct([a, a]), 0)], [a])
    with pytest.raises(ModelFormatError, match="SequenceConstruct .*seq<f32>.*IR v11"):
        netpass.save_model(m, str(tmp_path / "m.xml"))
