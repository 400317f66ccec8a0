"""Every value a primitive reads was produced in the same infer (netpass.runtime.invariants).

The regression graph is the smallest form of what transformers' T5 and BART exports do (issue
14): data computed on the host from a shape (a ``Range``), reshaped to a target that a ShapeOf
sub-graph computes. In symbolic mode (from the third distinct shape of a request) the target
is substituted, so its ``Concat`` does not run; the host evaluation of the ``Reshape`` used to
read that target anyway and failed with "Concat '...': no value for output 0".
"""
from __future__ import annotations

import numpy as np
import pytest
from graph_blocks import ints64

import netpass
from netpass import Model, opset
from netpass.errors import RuntimeInvariantError
from netpass.runtime import compile_program
from netpass.runtime.invariants import debug_checks
from netpass.runtime.network import SYMBOLIC_CHECKS
from netpass.testing import RUNTIME_DEVICE


def _range_reshape_model() -> Model:
    """y = x + Convert(Reshape(Range(0, s), Concat([1], Unsqueeze(s)))) with s = x.shape[1]:
    the Reshape runs on the host (shape_of sub-graph) and feeds real data; its target's
    producers are dead in symbolic mode."""
    x = opset.parameter([1, -1], np.float32, name="x")
    s = opset.gather(opset.shape_of(x), ints64(1), ints64(0))
    row = opset.range(ints64(0), s, ints64(1), "i64")
    target = opset.concat([ints64([1]), opset.unsqueeze(s, ints64([0]))], 0)
    y = opset.add(x, opset.convert(opset.reshape(row, target, False), "f32"))
    return Model([opset.result(y, name="y")], [x], "range_reshape")


LENGTHS = [1, 2, 3, 4, 3, 1, 5, 5, 2]


@pytest.mark.parametrize("config", [{}, {"STEP_PLANS": False}, {"DEBUG_CHECKS": True}])
def test_a_host_reshape_of_shape_data_runs_in_symbolic_mode(config, rng):
    model = _range_reshape_model()
    req = compile_program(model, RUNTIME_DEVICE, config).create_infer_request()
    for n in LENGTHS:
        x = rng.standard_normal((1, n)).astype(np.float32)
        out = req.infer({"x": x})["y"]
        np.testing.assert_allclose(out, netpass.reference.infer(model, {"x": x})["y"], rtol=1e-6)
        np.testing.assert_allclose(out, x + np.arange(n, dtype=np.float32), rtol=1e-6)
    assert req.stats["symbolic_infers"] >= len(LENGTHS) - SYMBOLIC_CHECKS - 1


def test_the_reshape_reads_only_its_data_input():
    prog = compile_program(_range_reshape_model(), "REFERENCE").program
    reshape = next(n for n in prog.nodes if n.kind == "Reshape")
    assert reshape.in_shape_of_subgraph and reshape.data_inputs() == (0,)
    assert 1 in reshape.sym_deps  # its target is substituted ...
    live = {id(n) for n in prog.symbolic.order}
    assert id(reshape) in live and id(reshape.inputs[1][0]) not in live  # ... and not computed


def test_debug_mode_names_the_reader_and_the_missing_producer(rng):
    """A reader whose dead producer is not handed its value (the class of the bug above):
    debug mode raises naming the primitive, its op and the producer."""
    req = compile_program(_range_reshape_model(), RUNTIME_DEVICE,
                          {"DEBUG_CHECKS": True}).create_infer_request()
    for inst in req.network.insts:
        inst.sym_feeds.clear()  # break the hand-over of substituted values
    for n in range(1, SYMBOLIC_CHECKS + 1):  # full path: every producer runs
        req.infer({"x": rng.standard_normal((1, n)).astype(np.float32)})
    with pytest.raises(RuntimeInvariantError) as err:
        req.infer({"x": rng.standard_normal((1, SYMBOLIC_CHECKS + 1)).astype(np.float32)})
    msg = str(err.value)
    assert "Range '" in msg and "reads output 0 of Gather '" in msg, msg
    assert "not in this infer's exec order" in msg


def test_debug_mode_catches_a_stale_value(rng):
    """A value left from an earlier infer is a stale read, not a silently reused number."""
    req = compile_program(_range_reshape_model(), RUNTIME_DEVICE,
                          {"DEBUG_CHECKS": True, "SYMBOLIC_SHAPES": False}).create_infer_request()
    req.infer({"x": rng.standard_normal((1, 2)).astype(np.float32)})
    net = req.network
    add = next(i for i in net.insts if i.node.kind == "Add")
    convert = next(i for i in net.insts if i.node.kind == "Convert")
    net.epoch += 1  # a new infer in which nothing has run yet
    net.reader = add
    with pytest.raises(RuntimeInvariantError, match=r"Add '.*' reads output 0 of Convert '.*'.*"
                                                    r"from infer 1 of this request, this is infer 2"):
        net.host_values([(convert, 0)])


def test_debug_mode_switches(monkeypatch):
    monkeypatch.delenv("NETPASS_DEBUG", raising=False)
    assert not debug_checks({})
    assert debug_checks({"DEBUG_CHECKS": True})
    monkeypatch.setenv("NETPASS_DEBUG", "1")
    assert debug_checks({})
    assert not debug_checks({"DEBUG_CHECKS": False})
    monkeypatch.setenv("NETPASS_DEBUG", "0")
    assert not debug_checks({})
