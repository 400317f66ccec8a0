"""Session fixture of the transformers-zoo tests: every model exported once per session.
The tools the tests share with users (``tools/export_zoo.py``, ``tools/zoo_gna_table.py``)
are imported from ``tools/``."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))


@pytest.fixture(scope="session")
def zoo(tmp_path_factory):
    """A ``zoo_cases.Zoo`` over a session folder (skips without onnxruntime)."""
    pytest.importorskip("onnxruntime")
    import zoo_cases
    return zoo_cases.Zoo(tmp_path_factory.mktemp("transformers_zoo"))


@pytest.fixture
def zoo_case(zoo, request):
    """``(name, exporter)`` of the test's parameter ``case``, skipped where what exporting it
    needs is not installed (torch and transformers; onnxscript for the dynamo exporter)."""
    name, exporter = request.param
    if exporter != "example":
        pytest.importorskip("torch")
        pytest.importorskip("transformers")
    if exporter == "dynamo":
        pytest.importorskip("onnxscript")
    return name, exporter
