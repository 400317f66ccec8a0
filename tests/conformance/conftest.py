"""Prints the conformance counts (by status and reason, per target) after a run that ran
conformance cases; names passing cases the lists lack."""
from __future__ import annotations


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    from _cases import OUTCOMES, PASSING, tool
    for target, outcomes in OUTCOMES.items():
        if not outcomes:
            continue
        terminalreporter.write_sep("-", f"ONNX backend conformance: {target}")
        terminalreporter.write_line(tool.summary(outcomes, target))
        _, new = tool.compare_to_list(outcomes, PASSING[target] & set(outcomes))
        if new:
            terminalreporter.write_line(
                f"  {len(new)} passing cases are not in {tool.list_path(target).name}: "
                "run `python tools/conformance.py --update`")
