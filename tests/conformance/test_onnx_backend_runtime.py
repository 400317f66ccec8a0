"""ONNX backend node tests (the public conformance suite) on the OpenCL runtime.

Every backend node case is imported with ``netpass.read_model``, compiled with
``netpass.compile_model(model, device=netpass.testing.RUNTIME_DEVICE)`` (PoCL's OpenCL CPU
device unless ``NETPASS_TEST_DEVICE`` names another) and run with one infer request over all
of the case's data sets; outputs must equal the case's expected outputs within rtol 1e-3,
atol 1e-7 (floats) or exactly (ints, bools). Primitives the runtime runs as a host fallback
(``req.stats["host_fallbacks"]``) are held to the same tolerance. The cases in
``passing_runtime.txt`` must pass; the others are skipped with their status and reason, and
the counts are printed at the end of the run.
"""
from __future__ import annotations

import pytest
from _cases import CASES, check_case

pytest.importorskip("pyopencl")
from netpass.runtime import devices
from netpass.testing import RUNTIME_DEVICE

if not any(d["type"].endswith(RUNTIME_DEVICE) for d in devices()):
    pytest.skip(f"no OpenCL {RUNTIME_DEVICE} device", allow_module_level=True)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_node_runtime(case):
    check_case(case, "runtime")
