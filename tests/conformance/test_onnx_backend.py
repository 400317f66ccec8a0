"""ONNX backend node tests (the public conformance suite) on netpass's reference evaluator.

Every case whose nodes all have a netpass import rule runs; tolerance rtol 1e-3, atol 1e-7
(the suite's own). A case whose variant an import rule explicitly refuses (UnsupportedOpError)
is skipped with the rule's reason; any other failure fails the test.
"""
from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from onnx.backend.test.case.node import collect_testcases

import netpass
from netpass.errors import UnsupportedOpError, UnsupportedTypeError
from netpass.ops.registry import find_onnx_rule


def _opset(case) -> int:
    return max((o.version for o in case.model.opset_import if o.domain in ("", "ai.onnx")), default=1)


def _imported(case) -> bool:
    graph = case.model.graph
    if any(n.domain not in ("", "ai.onnx") for n in graph.node):
        return False
    if any(vi.type.HasField("sequence_type") or vi.type.HasField("optional_type")
           for vi in list(graph.input) + list(graph.output)):
        return False
    return all(find_onnx_rule(n.op_type, _opset(case)) is not None for n in graph.node)


def _cases():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    return sorted((c for c in cases if c.kind == "node" and _imported(c)), key=lambda c: c.name)


CASES = _cases()


def _array(value) -> np.ndarray:
    return numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else np.asarray(value)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_node(case):
    try:
        model = netpass.read_model(case.model)
    except (UnsupportedOpError, UnsupportedTypeError) as e:
        pytest.skip(f"refused: {e}")
    in_names = [vi.name for vi in case.model.graph.input]
    for inputs, expected in case.data_sets:
        feeds = {n: _array(v) for n, v in zip(in_names, inputs)}
        outs = netpass.reference.infer(model, feeds)
        for vo, ref in zip(case.model.graph.output, expected):
            got = outs[vo.name]
            ref = _array(ref)
            assert got.shape == ref.shape, f"{vo.name}: shape {got.shape} != {ref.shape}"
            if ref.dtype.kind in "fc":
                np.testing.assert_allclose(got.astype(ref.dtype), ref, rtol=1e-3, atol=1e-7,
                                           err_msg=vo.name)
            else:
                np.testing.assert_array_equal(got.astype(ref.dtype), ref, err_msg=vo.name)
