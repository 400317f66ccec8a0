"""Static checks as tests, so that CI's ``pytest -q`` runs them: ruff over the repository and
mypy over the package, both as configured in ``pyproject.toml`` (docs/dev-conventions.md,
"Static checks"). A finding fails the test with the tool's own report."""
from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# mypy's incremental cache lives in the temp dir, one per checkout (never in the repo): a warm
# run takes under a second, a cold one about 5 s of CPU.
MYPY_CACHE = Path(tempfile.gettempdir()) / (
    "netpass-mypy-" + hashlib.sha1(str(ROOT).encode()).hexdigest()[:12])


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True,
                          text=True, check=False)


def test_ruff_finds_nothing():
    # No cache: ruff checks the whole tree in about a second, and a cache would land in the repo.
    done = _run("ruff", "check", "--no-cache", "--output-format", "concise", ".")
    assert done.returncode == 0, f"ruff check:\n{done.stdout}{done.stderr}"


def test_mypy_finds_nothing():
    # The packages, the strict modules and the modules not clean yet are in pyproject.toml.
    done = _run("mypy", "--cache-dir", str(MYPY_CACHE), "--no-error-summary",
                "--hide-error-context")
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert done.returncode == 0 and not errors, f"mypy:\n{done.stdout}{done.stderr}"
