"""The transformers zoo (``tools/export_zoo.py``: tiny random-weight configs of 16
architectures, each exported by the TorchScript and the dynamo exporter with dynamic axes)
through the whole flow, checked against onnxruntime:

- ``read_model`` + the reference evaluator at three different input shapes and a repeat;
- ``compile_model`` on ``RUNTIME_DEVICE`` with ``transformations`` NONE, COMMON and GNA: one
  infer request over the shapes, back in reverse and forward again (the runtime's checked
  full path, its symbolic mode and step-plan replay all run), every step within 1e-4
  relative L2 of onnxruntime;
- the GNA pipeline at the export shapes keeps the outputs (1e-5 relative L2) and leaves inside
  the graph exactly what ``docs/zoo-gna.md`` says.
"""
from __future__ import annotations

import export_zoo
import numpy as np
import pytest
import zoo_gna_table
from zoo_cases import ROOT, ZOO_PAIRS, assert_close, case_id

import netpass
from netpass.testing import RUNTIME_DEVICE

PIPELINE_REL_L2 = 1e-5
GNA_DOC = ROOT / "docs" / "zoo-gna.md"

# (case id, check) -> the bug it meets (xfail, strict: the fix makes it pass)
KNOWN: dict[tuple[str, str], str] = {}


def _params(check: str, pairs=ZOO_PAIRS):
    out = []
    for name, exporter in pairs:
        reason = KNOWN.get((case_id(name, exporter), check))
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        out.append(pytest.param((name, exporter), id=case_id(name, exporter), marks=marks))
    return out


@pytest.mark.parametrize("zoo_case", _params("reference"), indirect=True)
def test_reference_matches_onnxruntime(zoo, zoo_case):
    name, exporter = zoo_case
    spec = export_zoo.SPECS[name]
    model = zoo.model(name, exporter)
    rng = np.random.default_rng(0)
    for step, sizes in enumerate(export_zoo.default_sequence(spec)):
        feeds = export_zoo.feeds(spec.domain, sizes, rng)
        assert_close(netpass.reference.infer(model, feeds), zoo.expected(name, exporter, feeds),
                     f"step {step} {sizes}")


@pytest.mark.parametrize("transformations", ["NONE", "COMMON", "GNA"])
@pytest.mark.parametrize("zoo_case", _params("runtime"), indirect=True)
def test_runtime_matches_onnxruntime(zoo, zoo_case, transformations):
    name, exporter = zoo_case
    spec = export_zoo.SPECS[name]
    compiled = netpass.compile_model(zoo.model(name, exporter), device=RUNTIME_DEVICE,
                                     config={"TRANSFORMATIONS": transformations})
    req = compiled.create_infer_request()
    sizes = export_zoo.default_sequence(spec)
    rng = np.random.default_rng(1)
    for step, case in enumerate(sizes + sizes[::-1] + sizes):
        feeds = export_zoo.feeds(spec.domain, case, rng)
        assert_close(req.infer(feeds), zoo.expected(name, exporter, feeds), f"step {step} {case}")


def test_default_sequences_have_three_different_shapes():
    for spec in export_zoo.SPECS.values():
        assert len({tuple(s.items()) for s in export_zoo.default_sequence(spec)}) >= 3, spec.name


@pytest.mark.parametrize("zoo_case", _params("gna"), indirect=True)
def test_gna_pipeline_keeps_outputs_and_leaves_what_the_doc_says(zoo, zoo_case):
    """The op counts are compared where the exporters are the doc's versions (others write
    other graphs); the outputs always."""
    name, exporter = zoo_case
    row = zoo_gna_table.analyse(export_zoo.SPECS[name], exporter, zoo.path(name, exporter))
    assert row.rel_l2 <= PIPELINE_REL_L2
    versions, rows = zoo_gna_table.parse(GNA_DOC.read_text())
    assert (name, exporter) in rows, f"docs/zoo-gna.md has no row for {name} {exporter}"
    if versions == zoo_gna_table.exporter_versions():
        assert rows[name, exporter] == (row.ops, row.left_text()), \
            "docs/zoo-gna.md is out of date: python tools/zoo_gna_table.py --out docs/zoo-gna.md"
