"""ONNX backend node cases shared by the conformance harnesses (reference, runtime, round trip).

The logic lives in ``tools/conformance.py`` (the standalone tool that prints the counts and
rewrites the passing lists); this module loads it and holds what the tests share: ``CASES``
(all backend node cases, sorted by name), ``OUTCOMES`` (what this run saw, per target, printed
by ``tests/conftest.py`` at the end) and :func:`check_case`.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_TOOL_PATH = Path(__file__).resolve().parents[2] / "tools" / "conformance.py"
_spec = importlib.util.spec_from_file_location("netpass_conformance_tool", _TOOL_PATH)
tool = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = tool  # dataclasses resolve their module by name
_spec.loader.exec_module(tool)

CASES = tool.collect_cases()
RTOL, ATOL = tool.RTOL, tool.ATOL
case_data = tool.case_data
case_ops = tool.case_ops
OUTCOMES: dict[str, dict] = {target: {} for target in tool.TARGETS}
# target -> listed case -> its note (tool.RANDOM for a case passing on shape and dtype only)
PASSING = {target: tool.read_notes(tool.list_path(target)) for target in tool.TARGETS}


def check_case(case, target: str) -> None:
    """Run ``case`` on ``target`` and record the outcome. A case in the target's passing list
    must pass, by value unless listed with the note ``tool.RANDOM`` (the failure shows the full
    message); any other case that does not pass is skipped with its status and reason."""
    outcome = tool.RUNNERS[target](case)
    OUTCOMES[target][case.name] = outcome
    if outcome.passed:
        if outcome.reason and case.name in PASSING[target] and not PASSING[target][case.name]:
            pytest.fail(f"{case.name} passed by value before ({target}) and now only on shape "
                        f"and dtype: {outcome.detail or outcome.reason}")
        return
    if case.name in PASSING[target]:
        pytest.fail(f"{case.name} passed before ({target}) and now ends in {outcome.status}: "
                    f"{outcome.detail or outcome.reason}")
    pytest.skip(f"{outcome.status}: {outcome.reason}")
