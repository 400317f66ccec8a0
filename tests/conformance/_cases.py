"""ONNX backend node cases shared by the conformance harnesses (reference evaluator, runtime).

``CASES`` holds every backend *node* case whose nodes all have a netpass import rule, sorted by
name; ``read_case_model`` imports a case (skipping it when an import rule or an element type is
refused); ``case_feeds`` / ``case_outputs`` decode a data set; ``assert_output`` compares one
output at the suite's tolerance (rtol 1e-3, atol 1e-7 for floats, exact otherwise).
"""
from __future__ import annotations

import warnings
from typing import Any, Iterator

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

RTOL = 1e-3
ATOL = 1e-7


def case_opset(case) -> int:
    """The case's default-domain opset version (1 when it names none)."""
    return max((o.version for o in case.model.opset_import if o.domain in ("", "ai.onnx")), default=1)


def is_imported(case) -> bool:
    """True when every node has a netpass import rule at the case's opset and the graph's
    inputs/outputs are plain tensors (no sequences, no optionals, no custom domains)."""
    graph = case.model.graph
    if any(n.domain not in ("", "ai.onnx") for n in graph.node):
        return False
    if any(vi.type.HasField("sequence_type") or vi.type.HasField("optional_type")
           for vi in list(graph.input) + list(graph.output)):
        return False
    return all(find_onnx_rule(n.op_type, case_opset(case)) is not None for n in graph.node)


def _collect() -> list:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    return sorted((c for c in cases if c.kind == "node" and is_imported(c)), key=lambda c: c.name)


CASES = _collect()


def case_ops(case) -> tuple[str, ...]:
    """The ONNX op types of the case's graph, in node order, without repeats."""
    return tuple(dict.fromkeys(n.op_type for n in case.model.graph.node))


def to_array(value: Any) -> np.ndarray:
    """A data-set entry as an ndarray (the suite stores TensorProtos or arrays)."""
    return numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else np.asarray(value)


def read_case_model(case) -> netpass.Model:
    """Import the case's model; an explicit refusal (op variant or element type) skips the test."""
    try:
        return netpass.read_model(case.model)
    except (UnsupportedOpError, UnsupportedTypeError) as e:
        pytest.skip(f"refused: {e}")


def case_data(case) -> Iterator[tuple[dict[str, np.ndarray], dict[str, np.ndarray]]]:
    """``(feeds, expected)`` per data set, keyed by the ONNX graph input / output names."""
    in_names = [vi.name for vi in case.model.graph.input]
    out_names = [vo.name for vo in case.model.graph.output]
    for inputs, expected in case.data_sets:
        yield ({n: to_array(v) for n, v in zip(in_names, inputs)},
               {n: to_array(v) for n, v in zip(out_names, expected)})


def assert_output(name: str, got: np.ndarray, ref: np.ndarray) -> None:
    """Same shape; floats within rtol 1e-3 / atol 1e-7 after a cast to the expected dtype,
    everything else exactly equal."""
    got = np.asarray(got)
    assert got.shape == ref.shape, f"{name}: shape {got.shape} != {ref.shape}"
    if ref.dtype.kind in "fc":
        np.testing.assert_allclose(got.astype(ref.dtype), ref, rtol=RTOL, atol=ATOL, err_msg=name)
    else:
        np.testing.assert_array_equal(got.astype(ref.dtype), ref, err_msg=name)
