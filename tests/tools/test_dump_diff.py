"""tools/dump_diff.py on dump folders netpass writes: per-pass tracing of two pipelines that
differ by one pass, and CompiledModel.dump stages (IR v11 and the legacy layer graph)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import dump_diff
import numpy as np
import pytest

import netpass
from netpass import Model, opset
from netpass.ngraph_passes.common import ConstantFolding, ConvertDivide
from netpass.passes import Manager

ROOT = Path(__file__).resolve().parents[2]


def _model() -> Model:
    x = opset.parameter([2, 3], np.float32, name="x")
    d = opset.divide(x, opset.constant(np.array([[1.5, 2.0, 4.0]], np.float32),
                                       name="scale"), name="div")
    r = opset.relu(d, name="act")
    return Model([r], [x], "m")


def _trace(folder: Path, passes: list, monkeypatch) -> Path:
    """The model as read (``0_original.xml``, as ``netpass convert --dump-dir`` writes it) and
    after each of ``passes`` (NETPASS_SERIALIZE_TRACING)."""
    model = _model()
    folder.mkdir()
    netpass.save_model(model, folder / "0_original.xml")
    monkeypatch.setenv("NETPASS_SERIALIZE_TRACING", str(folder))
    manager = Manager()
    for p in passes:
        manager.register_pass(p)
    manager.run_passes(model)
    monkeypatch.delenv("NETPASS_SERIALIZE_TRACING")
    return folder


@pytest.fixture
def traced(tmp_path, monkeypatch):
    a = _trace(tmp_path / "a", [ConvertDivide(), ConstantFolding()], monkeypatch)
    b = _trace(tmp_path / "b", [ConstantFolding()], monkeypatch)
    return a, b


def test_steps_follow_the_passes_and_read_the_graph(traced):
    a, b = traced
    steps = dump_diff.find_steps(a)
    assert [s.label for s in steps] == ["original", "ConvertDivide", "ConstantFolding"]
    assert steps[0].layers["div"].type == "Divide"
    after = steps[1].layers
    assert after["div"].type == "Multiply" and after["div"].shapes == ("2,3",)
    assert after["act"].inputs == (("div", "0"),)
    assert dump_diff.find_steps(b)[1].layers["div"].type == "Divide"


def test_first_pass_that_changed_each_node(traced):
    a, b = traced
    first_a = dump_diff.first_changes(dump_diff.find_steps(a))
    first_b = dump_diff.first_changes(dump_diff.find_steps(b))
    assert first_a["div"] == ("ConvertDivide", "changed")
    assert "div" not in first_b and "act" not in first_a and "act" not in first_b


def test_side_by_side_counts_and_first_difference(traced, capsys):
    a, b = traced
    assert dump_diff.main([str(a), str(b), "--node", "div"]) == 0
    out = capsys.readouterr().out
    assert "ConvertDivide" in out and "only in A" in out
    row = next(line for line in out.splitlines() if line.startswith("ConstantFolding"))
    assert "Divide +1" in row and "Multiply -1" in row
    assert "first difference after 'ConstantFolding':" in out
    assert "div: A Multiply [2,3]" in out
    assert "history of div in A:\n  original: Divide [2,3] <- (x:0, scale:0)\n" \
           "  ConvertDivide: Multiply" in out


def test_compiled_model_dump_stages_in_both_formats(tmp_path):
    model = _model()
    cm = netpass.compile_model(model, "REFERENCE")
    cm.dump(tmp_path / "d")
    steps = dump_diff.find_steps(tmp_path / "d")
    assert [s.label for s in steps] == ["original", "transformed", "legacy", "executable"]
    assert len(steps[0].layers) == len(model.get_ordered_ops())
    legacy = steps[2].layers
    assert legacy["act"].type == "ReLU" and legacy["act"].shapes == ("[2,3]",)


def test_errors_name_the_folder(tmp_path):
    with pytest.raises(SystemExit, match="holds no netpass dumps"):
        dump_diff.find_steps(tmp_path)
    with pytest.raises(SystemExit, match="is not a folder"):
        dump_diff.find_steps(tmp_path / "missing")


@pytest.mark.parametrize("tool", sorted(p.name for p in (ROOT / "tools").glob("*.py")))
def test_every_tool_answers_help(tool):
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / tool), "--help"], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage:")
