"""ONNX backend node tests (the public conformance suite) on netpass's reference evaluator.

Every backend node case runs (tolerance rtol 1e-3, atol 1e-7, the suite's own). The cases in
``passing_reference.txt`` must pass; the others are skipped with their status and reason
(unsupported op, load error, run error, mismatch). The counts by reason are printed at the end
of the run (``conftest.py``); ``python tools/conformance.py`` prints them alone and ``--update``
rewrites the list.
"""
from __future__ import annotations

import pytest
from _cases import CASES, check_case


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_node(case):
    check_case(case, "reference")
