"""Helpers of the CLI tests: run ``python -m netpass.cli`` as a user would, in a subprocess."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def netpass_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``netpass ARGS...`` in the repository root; NETPASS_DEVICE and NETPASS_DEBUG are cleared
    unless ``env`` sets them, so that the defaults are what is tested."""
    full = {k: v for k, v in os.environ.items() if k not in ("NETPASS_DEVICE", "NETPASS_DEBUG")}
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "netpass.cli", *map(str, args)], cwd=ROOT,
                          env=full, capture_output=True, text=True)


def printed_values(stdout: str, output: str) -> np.ndarray:
    """The first values ``netpass run`` printed for ``output``."""
    match = re.search(rf"^output {re.escape(output)}: shape .*? \[([^\]]*)\]$", stdout, re.M)
    assert match, stdout
    return np.array([float(v) for v in match.group(1).split(",") if v.strip() != "..."])

