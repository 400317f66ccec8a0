"""ONNX backend node tests (the public conformance suite) on netpass's reference evaluator.

Every case whose nodes all have a netpass import rule runs; tolerance rtol 1e-3, atol 1e-7
(the suite's own). A case whose variant an import rule explicitly refuses (UnsupportedOpError)
or whose element type is unsupported (UnsupportedTypeError) is skipped with the reason; any
other failure fails the test. Case collection and comparison live in ``_cases.py`` (shared with
the runtime harness, ``test_onnx_backend_runtime.py``).
"""
from __future__ import annotations

import pytest
from _cases import CASES, assert_output, case_data, read_case_model

import netpass


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_node(case):
    model = read_case_model(case)
    for feeds, expected in case_data(case):
        outs = netpass.reference.infer(model, feeds)
        for name, ref in expected.items():
            assert_output(name, outs[name], ref)
