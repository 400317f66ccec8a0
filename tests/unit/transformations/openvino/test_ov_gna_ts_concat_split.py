"""Ported from OpenVINO's GNA plugin (2023) ``gather_sinking_ts_split_test.cpp`` (the graph the GNA
TSSplitBackward builds) and ``ts_concat_tests.cpp`` (GNA TSConcatForward / TSSplitBackward
keep the values: inputs 0, 0.1, 0.2, ..., absolute tolerance 1e-6, as there). netpass also
checks that the rewrite happened (no Transpose left)."""
from __future__ import annotations

import numpy as np
from ov_port import check, model_of, transpose

from netpass import opset
from netpass.ngraph_passes.gna import TSConcatForward, TSSplitBackward
from netpass.passes import Manager
from netpass.reference import infer


def test_ts_split_backward_graph():
    x = opset.parameter([1, 4, 1, 2], np.float32)
    split = opset.split(x, opset.constant(np.int64(1)), 1)
    model = model_of([transpose(split.output(0), [0, 2, 3, 1], np.int64)], [x])
    x2 = opset.parameter([1, 4, 1, 2], np.float32)
    flat = opset.reshape(x2, opset.constant(np.array([1, 8], np.int64)), False)
    g = opset.gather(flat, opset.constant(np.array([0, 2, 4, 6, 1, 3, 5, 7], np.int64)),
                     opset.constant(np.int64(1)))
    parts = opset.variadic_split(g, opset.constant(np.int64(1)), opset.constant(np.array([8], np.int64)))
    ref = model_of([opset.reshape(parts.output(0), opset.constant(np.array([1, 1, 2, 4], np.int64)), False)], [x2])
    check(model, ref, TSSplitBackward(), result_names=False)


def _split_transpose_concat(shape, split_axis):
    x = opset.parameter(shape, np.float32, "x")
    split = opset.split(x, opset.constant(np.int64(split_axis)), 2)
    ts = [transpose(o, [0, 3, 1, 2], np.int64) for o in split.outputs()]
    return model_of([opset.concat(ts, 1)], [x])


def _numeric(model, pass_):
    original = model.clone()
    manager = Manager()
    manager.register_pass(pass_)
    manager.run_passes(model)
    shape = model.parameters[0].output(0).partial_shape.to_shape()
    x = (np.arange(int(np.prod(shape)), dtype=np.float32) * 0.1).reshape(shape)
    got, want = infer(model, {"x": x}), infer(original, {"x": x})
    for a, b in zip(got.values(), want.values()):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)
    assert not any(n.type_name == "Transpose" for n in model.get_ordered_ops())


def test_ts_concat_forward_values():
    _numeric(_split_transpose_concat([1, 1, 9, 22], 3), TSConcatForward())


def test_ts_split_backward_values():
    _numeric(_split_transpose_concat([1, 1, 22, 9], 2), TSSplitBackward())
