"""Symbolic shapes in the runtime: substitution of the inputs' dims for shape sub-graphs,
the checks against full shape inference, the fallback, and the per-binding records."""
from __future__ import annotations

import numpy as np
from graph_blocks import ints64, randn_f32

import netpass
from netpass import Model, opset
from netpass.core.dimension import Dimension, Symbol
from netpass.core.shape import PartialShape
from netpass.runtime import Program, compile_program
from netpass.runtime.network import SYMBOLIC_CHECKS
from netpass.testing import RUNTIME_DEVICE


def _heads_model():
    """x [b, s, 8] -> Reshape(x, [b, s, 2, 4]) through ShapeOf/Gather/Concat -> Relu ->
    Reshape back with a -1: the shape sub-graphs torch.onnx.export writes."""
    x = opset.parameter(["b", "s", 8], np.float32, name="x")
    shape = opset.shape_of(x)
    bs = opset.gather(shape, ints64([0, 1]), ints64(0))
    split = opset.reshape(x, opset.concat([bs, ints64([2, 4])], 0), False)
    back = opset.reshape(opset.relu(split), opset.concat([bs, ints64([-1])], 0), False)
    return Model([opset.result(opset.multiply(back, np.float32(2.0)), name="y")], [x])


def _infer_all(model, feeds_list, config=None):
    cm = compile_program(model, RUNTIME_DEVICE, config)
    req = cm.create_infer_request()
    for feeds in feeds_list:
        out = req.infer(feeds)
        ref = netpass.reference.infer(model, feeds)
        np.testing.assert_allclose(out["y"], ref["y"], rtol=1e-5, atol=1e-6)
    return cm, req


def test_shape_of_subgraph_is_not_in_the_symbolic_order():
    prog = Program.from_model(_heads_model())
    assert prog.symbolic.active
    assert "ShapeOf" in {n.kind for n in prog.exec_order}
    assert not {"ShapeOf", "Gather", "Concat"} & {n.kind for n in prog.symbolic.order}


def test_reshape_targets_are_substituted_from_the_input_dims():
    prog = Program.from_model(_heads_model())
    reshape = next(n for n in prog.nodes if n.kind == "Reshape" and len(n.out_pshapes[0]) == 4)
    b, s = (d.symbol for d in prog.inputs[0].out_pshapes[0][:2])
    expr, shape, _ = reshape.sym_deps[1]
    assert expr == (b, s, 2, 4) and shape == (4,)
    assert reshape.sym_out == [(b, s, 2, 4)]


def test_first_bindings_run_the_full_path_then_symbolic(rng):
    feeds = [{"x": randn_f32(rng, 2, n, 8)} for n in (3, 5, 4, 7, 7)]
    cm, req = _infer_all(_heads_model(), feeds)
    assert req.stats["symbolic_infers"] == len(feeds) - SYMBOLIC_CHECKS
    assert len(cm.symbolic_checked) == SYMBOLIC_CHECKS


def test_unnamed_dynamic_dims_get_symbols(rng):
    x = opset.parameter([-1, -1, 8], np.float32, name="x")
    target = opset.concat([opset.gather(opset.shape_of(x), ints64([0, 1]), ints64(0)), ints64([2, 4])], 0)
    model = Model([opset.result(opset.relu(opset.reshape(x, target, False)), name="y")], [x])
    prog = Program.from_model(model)
    assert prog.symbolic.active and len(prog.symbolic.bindings) == 2
    assert x.get_output_partial_shape(0)[0].symbol is None  # the user's model is not changed
    _, req = _infer_all(model, [{"x": randn_f32(rng, 1, n, 8)} for n in (2, 3, 4, 5)])
    assert req.stats["symbolic_infers"] == 2


def test_inconsistent_binding_uses_the_full_path(rng):
    s = Symbol("s")
    x = opset.parameter(PartialShape([Dimension.dynamic(s), 4]), np.float32, name="x")
    y = opset.parameter(PartialShape([Dimension.dynamic(s), 4]), np.float32, name="y")
    model = Model([opset.result(opset.add(x, y), name="y")], [x, y])
    feeds = [{"x": randn_f32(rng, n, 4), "y": randn_f32(rng, n, 4)} for n in (2, 3, 4)]
    feeds.append({"x": randn_f32(rng, 3, 4), "y": randn_f32(rng, 1, 4)})  # s bound to 3 and 1: broadcast
    _, req = _infer_all(model, feeds)
    assert req.stats["symbolic_infers"] == 1  # the third infer only


def test_a_wrong_substitution_turns_the_symbolic_path_off(rng):
    model = _heads_model()
    cm = compile_program(model, RUNTIME_DEVICE)
    relu = next(n for n in cm.program.nodes if n.kind == "Relu")
    b, s = (d.symbol for d in cm.program.inputs[0].out_pshapes[0][:2])
    relu.sym_out = [(b, s, 4, 2)]  # what a wrong symbol propagation would claim
    req = cm.create_infer_request()
    for n in (3, 4, 5):
        feeds = {"x": randn_f32(rng, 2, n, 8)}
        out = req.infer(feeds)
        np.testing.assert_allclose(out["y"], netpass.reference.infer(model, feeds)["y"], rtol=1e-5)
    assert cm.symbolic_ok is False
    assert req.stats["symbolic_mismatches"] >= 1
    assert req.stats["symbolic_infers"] == 0


def test_symbolic_shapes_can_be_disabled(rng):
    feeds = [{"x": randn_f32(rng, 2, n, 8)} for n in (3, 5, 4, 6)]
    _, req = _infer_all(_heads_model(), feeds, {"SYMBOLIC_SHAPES": False})
    assert req.stats["symbolic_infers"] == 0


def test_known_bindings_reuse_shapes_and_implementations_across_requests(rng):
    model = _heads_model()
    feeds = [{"x": randn_f32(rng, 2, n, 8)} for n in (3, 5, 4, 6, 7)]
    cm, first = _infer_all(model, feeds + feeds)
    req = cm.create_infer_request()
    for f in feeds:
        out = req.infer(f)
        np.testing.assert_allclose(out["y"], netpass.reference.infer(model, f)["y"], rtol=1e-5)
    assert req.stats["symbolic_infers"] == len(feeds)
    assert req.stats["shape_updates"] == 0
    assert req.stats["impl_cache_misses"] == 0


def test_a_repeated_binding_then_a_new_one(rng):
    # the repeat finds the Transpose's record with nothing changed (no update_impl); the
    # next binding must not take that record's implementation
    x = opset.parameter(["b", "s", 8], np.float32, name="x")
    t = opset.transpose(x, ints64([0, 2, 1]))  # runtime-skippable, runs a kernel here
    model = Model([opset.result(opset.relu(t), name="y")], [x])
    feeds = [{"x": randn_f32(rng, 2, n, 8)} for n in (3, 5, 4, 4, 6, 2)]
    _, req = _infer_all(model, feeds)
    assert req.stats["symbolic_infers"] == 4


def test_a_binding_met_thrice_then_a_new_one_on_the_full_path(rng):
    # the third infer replays the Transpose's record (no update_impl: its impl stays pending);
    # the next binding is not checked yet and runs the full path, which must not take that
    # record's implementation (t5 by TorchScript: batch 1 thrice, then batch 2 gave NaNs)
    x = opset.parameter(["b", "s", 8], np.float32, name="x")
    t = opset.transpose(x, ints64([0, 2, 1]))
    model = Model([opset.result(opset.relu(t), name="y")], [x])
    feeds = [{"x": randn_f32(rng, 1, 3, 8)} for _ in range(3)] + [{"x": randn_f32(rng, 2, 3, 8)}]
    _, req = _infer_all(model, feeds)
    assert req.stats["symbolic_infers"] == 2


def _grown_cache_model():
    """A decoder layer's shape math on its grown cache: Concat(past, new) along the sequence,
    then a Reshape whose target is computed from ShapeOf of the concat (as torch exports
    ``k.view(b, h, -1, d)`` after ``torch.cat``) and a Reshape to [-1, 8] (a Conv1D)."""
    past = opset.parameter([1, 2, "past", 4], np.float32, name="past")
    new = opset.parameter([1, 2, "seq", 4], np.float32, name="new")
    grown = opset.concat([past, new], 2)
    shape = opset.shape_of(grown)
    length = opset.gather(shape, ints64([2]), ints64(0))
    target = opset.concat([ints64([1]), length, ints64([2, 4])], 0)
    y = opset.reshape(opset.transpose(grown, ints64([0, 2, 1, 3])), target, False)
    z = opset.reshape(opset.relu(y), ints64([-1, 8]), False)
    return Model([opset.result(z, name="y")], [past, new])


def test_past_plus_new_length_is_a_derived_symbol_and_its_shape_math_is_substituted(rng):
    prog = Program.from_model(_grown_cache_model())
    assert not {"ShapeOf", "Gather"} & {n.kind for n in prog.symbolic.order}
    reshape = next(n for n in prog.nodes if n.kind == "Reshape" and len(n.out_pshapes[0]) == 4)
    (expr, _, _) = reshape.sym_deps[1]
    assert expr[1].is_derived and expr[1].name.count("+") == 1
    feeds = [{"past": randn_f32(rng, 1, 2, p, 4), "new": randn_f32(rng, 1, 2, 1, 4)} for p in range(2, 9)]
    cm, req = _infer_all(_grown_cache_model(), feeds)
    assert req.stats["symbolic_infers"] == len(feeds) - SYMBOLIC_CHECKS
    assert cm.symbolic_ok
