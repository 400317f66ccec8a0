"""The tools' tests import them from ``tools/`` (as the zoo's tests do)."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
