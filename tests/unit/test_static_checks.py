"""Static checks as tests, so that CI's ``pytest -q`` runs them: ruff over the repository and
mypy over the package, both as configured in ``pyproject.toml`` (docs/dev-conventions.md,
"Static checks"). A finding fails the test with the tool's own report."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True,
                          text=True, check=False)


def test_ruff_finds_nothing():
    # No cache: ruff checks the whole tree in about a second, and a cache would land in the repo.
    done = _run("ruff", "check", "--no-cache", "--output-format", "concise", ".")
    assert done.returncode == 0, f"ruff check:\n{done.stdout}{done.stderr}"
