"""The docs' code runs: the "write your first pass" tutorial block by block, and the worked
example of docs/testing.md as the pytest module it describes."""
from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"

pytest_plugins = ["pytester"]


def python_blocks(name: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (DOCS / name).read_text(), re.S)


def test_first_pass_tutorial_runs(capsys):
    blocks = python_blocks("first-pass.md")
    assert len(blocks) >= 7
    namespace: dict = {"__name__": "tutorial"}
    for i, block in enumerate(blocks):
        exec(compile(block, f"docs/first-pass.md block {i}", "exec"), namespace)
    out = capsys.readouterr().out
    assert "'Swish'" in out and "pass 'Broken' failed on Sigmoid" in out


def test_testing_page_example_passes_as_a_test_module(pytester):
    pytester.makepyfile(test_my_pass="\n\n".join(python_blocks("testing.md")))
    result = pytester.runpytest("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
