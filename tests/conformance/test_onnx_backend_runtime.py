"""ONNX backend node tests (the public conformance suite) on the OpenCL runtime.

Every case the reference harness (``test_onnx_backend.py``) runs is imported with
``netpass.read_model``, compiled with ``netpass.runtime.compile_program`` for
``netpass.testing.RUNTIME_DEVICE`` (PoCL's OpenCL CPU device unless ``NETPASS_TEST_DEVICE``
names another) and run with one infer request over all of the case's data sets;
outputs must equal the case's expected outputs within rtol 1e-3, atol 1e-7 (floats) or
exactly (ints, bools). Cases an import rule or an element type refuses are skipped as there.
Primitives the runtime runs as a documented host fallback (``req.stats["host_fallbacks"]``) are
held to the same tolerance.

``KNOWN_FAILURES`` maps a case to the finding in ``docs/dev/runtime-findings.md`` that explains
it; those cases are ``xfail(strict=True)``, so a runtime fix turns them into failing XPASSes
until the entry is removed.

Run time on 2 shared cores: kernel compilation dominates. With cold PoCL and pyopencl kernel
caches (a fresh machine, CI) the whole set took 5 min 40 s (2 min of CPU), the default subset
2 min 15 s; with warm caches 55 s and 25 s. So by default a representative subset runs: the
first case (by name) of each new (ONNX op, graph element type) pair, which reaches every op
and every element type, plus every known failure (about 290 of 1270 cases).
``NETPASS_FULL_CONFORMANCE=1`` runs every case:

    NETPASS_FULL_CONFORMANCE=1 python -m pytest -q tests/conformance/test_onnx_backend_runtime.py
"""
from __future__ import annotations

import os

import pytest
from _cases import CASES, assert_output, case_data, case_ops, read_case_model

pytest.importorskip("pyopencl")
from netpass.runtime import compile_program, devices  # noqa: E402
from netpass.testing import RUNTIME_DEVICE  # noqa: E402

if not any(d["type"].endswith(RUNTIME_DEVICE) for d in devices()):
    pytest.skip(f"no OpenCL {RUNTIME_DEVICE} device", allow_module_level=True)

FULL = os.environ.get("NETPASS_FULL_CONFORMANCE", "") not in ("", "0")

# case name -> finding id in docs/dev/runtime-findings.md
KNOWN_FAILURES: dict[str, str] = {
    # R1-R7 are fixed (docs/dev/runtime-findings.md); none open
}

FINDINGS = {
    "R1": "float16 Transpose/Concat/Slice/Gather/Tile copy kernels use `half` without cl_khr_fp16",
    "R2": "Pad with no pad_value input reads input element 0 into the padding (index map)",
    "R3": "fused post-ops dropped when the fusion producer falls back to the host",
    "R4": "a multi-output primitive with one empty output is skipped and all outputs zeroed",
    "R5": "runtime shape inference uses OP_TYPES[kind] (v1 class): OneHot-16 / ScatterNDUpdate-15 "
          "attributes rejected",
    "R6": "float FloorMod `x - floor(x / y) * y` is NaN for y = +-inf",
    "R7": "bf16 parameters lowered as float32; bf16 feeds raise InputError",
}


def _graph_types(case) -> tuple[int, ...]:
    graph = case.model.graph
    return tuple(sorted({vi.type.tensor_type.elem_type for vi in list(graph.input) + list(graph.output)}))


def _representative(cases: list) -> list:
    """The first case of each new (op type, graph element type) pair, plus the known failures
    (so a fix is noticed by default runs too)."""
    seen: set = set()
    out = []
    for case in cases:
        pairs = {(op, et) for op in case_ops(case) for et in _graph_types(case)}
        if not pairs <= seen or case.name in KNOWN_FAILURES:
            seen |= pairs
            out.append(case)
    return out


SELECTED = CASES if FULL else _representative(CASES)


def _param(case):
    finding = KNOWN_FAILURES.get(case.name)
    if finding is None:
        return pytest.param(case, id=case.name)
    mark = pytest.mark.xfail(strict=True, reason=f"{finding}: {FINDINGS[finding]}")
    return pytest.param(case, id=case.name, marks=mark)


def test_known_failures_are_cases():
    """Every KNOWN_FAILURES entry names a collected case and a described finding."""
    names = {c.name for c in CASES}
    assert sorted(set(KNOWN_FAILURES) - names) == []
    assert sorted(set(KNOWN_FAILURES.values()) - set(FINDINGS)) == []


@pytest.mark.parametrize("case", [_param(c) for c in SELECTED])
def test_node_runtime(case):
    model = read_case_model(case)
    req = compile_program(model, device=RUNTIME_DEVICE).create_infer_request()
    for feeds, expected in case_data(case):
        outs = req.infer(feeds)
        fallbacks = req.stats["host_fallback_kinds"]
        for name, ref in expected.items():
            assert_output(f"{name} (host fallbacks: {fallbacks})" if fallbacks else name,
                          outs[name], ref)
