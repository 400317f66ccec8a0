"""``tools/conformance.py``: its command line, its counts and its passing lists."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from _cases import CASES, tool
from onnx import helper

from netpass.errors import ModelFormatError, UnsupportedOpError, UnsupportedTypeError

Outcome = tool.Outcome


def test_help_runs_from_the_command_line():
    done = subprocess.run([sys.executable, str(tool.__file__), "--help"], capture_output=True,
                          text=True, check=True)
    assert "--update" in done.stdout and "--target" in done.stdout


def test_collects_every_backend_node_case_then_the_model_suites():
    from onnx.backend.test.case.node import collect_testcases
    from onnx.backend.test.loader import load_model_tests
    nodes = sorted(c.name for c in collect_testcases(None) if c.kind == "node")
    models = sorted(f"{kind}/{c.name}" for kind in tool.MODEL_KINDS
                    for c in load_model_tests(kind=kind))
    assert len(models) >= 100
    assert [c.name for c in CASES] == nodes + models


def test_a_model_case_feeds_its_inputs_without_the_weights_listed_as_inputs():
    """pytorch-converted cases are IR 3: their weights are graph inputs too, and the data sets
    hold the real inputs only."""
    case = next(c for c in CASES if c.name == "pytorch-converted/test_Conv2d")
    initialized = {t.name for t in case.model.graph.initializer}
    feeds, expected = next(tool.case_data(case))
    assert feeds and not initialized.intersection(feeds)
    assert tool.run_reference(case).passed


def test_counts_by_status_and_reason(capsys, tmp_path):
    # test_abs passes; a listed name that is not a case counts as a regression
    (tmp_path / "passing_reference.txt").write_text("# comment\ntest_abs\n")
    assert tool.main(["--target", "reference", "-k", "test_abs", "--lists-dir",
                      str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "reference" in out and "1 cases: pass 1, mismatch 0" in out
    (tmp_path / "passing_reference.txt").write_text("test_abs\ntest_absent_case_name\n")
    assert tool.main(["--target", "reference", "--lists-dir", str(tmp_path),
                      "-k", "test_abs"]) == 1
    assert "test_absent_case_name" in capsys.readouterr().out


def test_update_writes_the_passing_cases(monkeypatch, tmp_path, capsys):
    picked = [c for c in CASES if c.name in ("test_abs", "test_add")]
    monkeypatch.setattr(tool, "collect_cases", lambda: picked)
    assert tool.main(["--target", "reference", "--update", "--lists-dir", str(tmp_path)]) == 0
    assert tool.read_list(tmp_path / "passing_reference.txt") == ["test_abs", "test_add"]
    assert "wrote" in capsys.readouterr().out


def test_update_refuses_a_subset():
    with pytest.raises(SystemExit):
        tool.main(["--update", "-k", "abs"])


def test_compare_to_list_finds_regressions_and_new_passes():
    outcomes = {"a": Outcome("pass"), "b": Outcome("mismatch", "values"), "c": Outcome("pass")}
    assert tool.compare_to_list(outcomes, ["a", "b", "gone"]) == (["b", "gone"], ["c"])


def test_summary_groups_reasons():
    outcomes = {"a": Outcome("pass"), "b": Outcome("unsupported", "Foo"),
                "c": Outcome("unsupported", "Foo"), "d": Outcome("run_error", "KeyError: x")}
    text = tool.summary(outcomes, "t")
    assert text.splitlines()[0] == ("t: 4 cases: pass 1, mismatch 0, unsupported 2, "
                                    "load_error 0, run_error 1")
    assert "   2  Foo" in text and "   1  KeyError: x" in text


def test_errors_are_classified():
    e = UnsupportedOpError("Foo", "", 13, "n", "attribute bar=3 is not supported")
    assert tool._error_outcome(e, "load") == Outcome("unsupported",
                                                     "Foo: attribute bar=# is not supported")
    assert tool._error_outcome(UnsupportedTypeError("graph input 'x': unsupported ONNX element "
                                                    "type INT4"), "load") == \
        Outcome("load_error", "element type INT4")
    assert tool._error_outcome(ModelFormatError("graph input 'x' is not a tensor"), "load") == \
        Outcome("load_error", "graph input '_' is not a tensor")
    assert tool._error_outcome(IndexError("list index out of range"), "run") == \
        Outcome("run_error", "IndexError: list index out of range")


def _case(node, inputs, outputs, data):
    """A backend-style case object around a one-node model (or a list of nodes)."""
    graph = helper.make_graph(node if isinstance(node, list) else [node], "g", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])

    class Case:
        name = "test_tiny"
        kind = "node"
        data_sets = data
    Case.model = model
    return Case


def test_mismatch_and_pass_on_a_built_case():
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32) + 2
    vi = [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [2, 3]) for n in "xy"]
    node = helper.make_node("Relu", ["x"], ["y"])
    assert tool.run_reference(_case(node, vi[:1], vi[1:], [([x], [x])])) == Outcome("pass")
    wrong = tool.run_reference(_case(node, vi[:1], vi[1:], [([x], [x * (1 + 2e-3)])]))
    assert wrong == Outcome("mismatch", "values")
    assert "Mismatched elements" in wrong.detail


def test_outputs_of_random_draws():
    f = onnx.TensorProto.FLOAT
    vi = [helper.make_tensor_value_info(n, f, [4]) for n in ("p", "y", "z")]
    nodes = [helper.make_node("Bernoulli", ["p"], ["b"]), helper.make_node("Relu", ["b"], ["y"]),
             helper.make_node("Relu", ["p"], ["z"])]
    case = _case(nodes, vi[:1], vi[1:], [])
    assert tool.random_outputs(case) == {"y"}  # downstream of the draw; z is not
    # If and Loop are declared non-deterministic for their bodies: only a drawing body counts
    cond = helper.make_tensor_value_info("c", onnx.TensorProto.BOOL, [])
    out = helper.make_tensor_value_info("o", f, [4])

    def branch(op):
        return helper.make_graph([helper.make_node(op, ["p"], ["o"])], op, [], [out])
    for op, drawn in (("Relu", set()), ("Bernoulli", {"y"})):
        node = helper.make_node("If", ["c"], ["y"], then_branch=branch(op),
                                else_branch=branch("Relu"))
        assert tool.random_outputs(_case([node], [cond, vi[0]], vi[1:2], [])) == drawn


def test_random_outputs_bind_shape_and_dtype_only():
    a, b = np.zeros(3, np.float32), np.ones(3, np.float32)
    assert tool.check_outputs({"y": a}, {"y": a}, frozenset({"y"})) == Outcome("pass")
    relaxed = tool.check_outputs({"y": a}, {"y": b}, frozenset({"y"}))
    assert relaxed == Outcome("pass", tool.RANDOM) and "Mismatched elements" in relaxed.detail
    assert tool.check_outputs({"y": a}, {"y": b}) == Outcome("mismatch", "values")
    assert tool.check_outputs({"y": a[:2]}, {"y": b}, frozenset({"y"})) == \
        Outcome("mismatch", "shape")
    assert tool.check_outputs({"y": a.astype(np.float64)}, {"y": b}, frozenset({"y"})) == \
        Outcome("mismatch", "dtype")


def test_lists_note_cases_that_pass_on_shape_and_dtype(tmp_path):
    outcomes = {"a": Outcome("pass"), "r": Outcome("pass", tool.RANDOM)}
    path = tmp_path / "passing_reference.txt"
    tool.write_list(path, outcomes, "reference")
    assert tool.read_notes(path) == {"a": "", "r": tool.RANDOM}
    assert tool.read_list(path) == ["a", "r"]
    assert tool.compare_to_list(outcomes, tool.read_notes(path)) == ([], [])
    # a case listed as passing by value that now passes only on shape and dtype regressed
    relaxed = {"a": Outcome("pass", tool.RANDOM), "r": Outcome("pass")}
    assert tool.compare_to_list(relaxed, tool.read_notes(path)) == (["a"], [])
