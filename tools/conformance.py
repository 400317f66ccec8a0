"""ONNX backend conformance of netpass: every case of onnx's backend node suite
(``onnx.backend.test.case.node.collect_testcases()``, 1884 cases with onnx 1.23.2), and of its
model suites shipped with the package (MODEL_KINDS: 140 cases named ``<kind>/<case>``), through
the reference evaluator and through the OpenCL runtime, with the suite's tolerance (rtol 1e-3,
atol 1e-7 for floats, exact otherwise).

Outputs that depend on a random draw (a node whose ONNX schema declares it non-deterministic:
Bernoulli, RandomUniformLike, training-mode Dropout...) are compared by value first; where the
values differ, shape and element type decide, and the case passes with the reason ``RANDOM``.
The specification leaves such values to the implementation (the suite's Bernoulli values come
from numpy's global generator, not from the node's seed), and onnx's own backend test of its
reference evaluator checks only shape and dtype there too. A case listed without that note
passed by value and must keep doing so.

Each case ends in one status: ``pass``, ``mismatch`` (ran, wrong values or shape),
``unsupported`` (an import rule refused the op or its variant), ``load_error`` (the model could
not be read: element type, graph value kind, domain) or ``run_error`` (read, then failed to
compile or run). The summary counts them by reason.

The lists of passing cases live in ``tests/conformance/passing_<target>.txt``; the conformance
tests fail when a listed case stops passing. After a change that makes more cases pass:

    python tools/conformance.py --update            # both targets; rewrites the lists
    python tools/conformance.py --target reference  # counts only
    python tools/conformance.py -k attention -v     # a subset, one line per case

The runtime target compiles with ``netpass.compile_model(model, device=D)`` where ``D`` is
``netpass.testing.RUNTIME_DEVICE`` (PoCL's ``CPU`` unless ``NETPASS_TEST_DEVICE`` says
otherwise) and runs one infer request over all of a case's data sets.
"""
from __future__ import annotations

import argparse
import re
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

REPO = Path(__file__).resolve().parents[1]
LISTS_DIR = REPO / "tests" / "conformance"
TARGETS = ("reference", "runtime")
STATUSES = ("pass", "mismatch", "unsupported", "load_error", "run_error")
RTOL = 1e-3
ATOL = 1e-7
RANDOM = "random output: shape and dtype only"


@dataclass(frozen=True)
class Outcome:
    """How one case ended on one target: a status of ``STATUSES`` and a short reason that
    groups like failures (the op, the element type, the exception kind)."""

    status: str
    reason: str = ""
    detail: str = field(default="", compare=False)  # the full message, for a failing test

    @property
    def passed(self) -> bool:
        return self.status == "pass"


# onnx's backend *model* suites shipped with the package (``onnx/backend/test/data``): small
# models converted from PyTorch (modules and single operators, many at opset 6) and hand-built
# ones, each a model.onnx beside test_data_set_N folders. ("real" downloads its models;
# "light"'s placeholder weights give mostly uniform outputs: docs/onnx-coverage.md.)
MODEL_KINDS = ("pytorch-converted", "pytorch-operator", "simple")


@dataclass(frozen=True)
class ModelCase:
    """A backend model case, shaped as this tool reads a node case: the ``model`` proto, its
    ``data_sets`` ((inputs, outputs) in graph order), the suite (``kind``); named
    ``<kind>/<case>`` so that no name meets a node case's."""

    name: str
    model: Any
    data_sets: list
    kind: str


def _data_set(folder: Path) -> tuple[list, list]:
    def tensors(prefix: str) -> list:
        files = sorted(folder.glob(f"{prefix}_*.pb"), key=lambda f: int(f.stem.split("_")[-1]))
        return [onnx.load_tensor(str(f)) for f in files]
    return tensors("input"), tensors("output")


def collect_model_cases() -> list:
    """Every case of the MODEL_KINDS suites, sorted by name."""
    from onnx.backend.test.loader import load_model_tests
    cases = []
    for kind in MODEL_KINDS:
        for c in load_model_tests(kind=kind):
            folder = Path(c.model_dir)
            sets = [_data_set(d) for d in sorted(folder.glob("test_data_set_*"))]
            cases.append(ModelCase(f"{kind}/{c.name}", onnx.load(str(folder / "model.onnx")),
                                   sets, kind))
    return sorted(cases, key=lambda c: c.name)


def collect_cases() -> list:
    """Every backend *node* case, sorted by name, then every case of the model suites."""
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    nodes = sorted((c for c in cases if c.kind == "node"), key=lambda c: c.name)
    return nodes + collect_model_cases()


def case_ops(case: Any) -> tuple[str, ...]:
    """The op types of the case's graph, in node order, without repeats."""
    return tuple(dict.fromkeys(n.op_type for n in case.model.graph.node))


def to_array(value: Any) -> Any:
    """A data-set entry as an ndarray (the suite stores TensorProtos, arrays, or lists and
    None for sequences and optionals)."""
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, onnx.SequenceProto):
        return numpy_helper.to_list(value)
    if isinstance(value, onnx.OptionalProto):
        return numpy_helper.to_optional(value)
    if isinstance(value, (list, tuple)) or value is None:
        return value
    return np.asarray(value)


def case_data(case: Any) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """``(feeds, expected)`` per data set, keyed by the ONNX graph input / output names (a
    data set with fewer inputs than the graph feeds those without an initializer: IR < 4 lists
    the weights as inputs too)."""
    graph = case.model.graph
    names = [vi.name for vi in graph.input]
    initialized = {t.name for t in graph.initializer}
    out_names = [vo.name for vo in graph.output]
    for inputs, expected in case.data_sets:
        in_names = names if len(inputs) == len(names) else \
            [n for n in names if n not in initialized]
        yield ({n: to_array(v) for n, v in zip(in_names, inputs)},
               {n: to_array(v) for n, v in zip(out_names, expected)})


def random_outputs(case: Any) -> frozenset[str]:
    """The graph outputs of ``case`` that depend on a node that draws random numbers."""
    opsets = {o.domain: o.version for o in case.model.opset_import}
    drawn: set[str] = set()
    for node in case.model.graph.node:  # (ONNX graphs are topologically sorted)
        if _draws(node, opsets) or drawn.intersection(node.input):
            drawn.update(node.output)
    return frozenset(o.name for o in case.model.graph.output if o.name in drawn)


def _draws(node: Any, opsets: dict[str, int]) -> bool:
    """Whether ``node``'s schema declares it non-deterministic; an op with bodies (If, Loop,
    Scan), which the schemas declare so because a body may draw, when one of its bodies does."""
    bodies = [g for a in node.attribute for g in ([a.g] if a.HasField("g") else a.graphs)]
    if bodies:
        return any(_draws(n, opsets) for b in bodies for n in b.node)
    try:
        schema = onnx.defs.get_schema(node.op_type, opsets.get(node.domain, 1), node.domain)
    except onnx.defs.SchemaError:
        return False
    return schema.node_determinism == onnx.defs.OpSchema.NodeDeterminism.NonDeterministic


def assert_output(name: str, got: Any, ref: Any, values: bool = True) -> None:
    """Same shape; floats within rtol 1e-3 / atol 1e-7 after a cast to the expected dtype
    (NaN equals NaN), everything else exactly equal. Sequences compare element-wise. Without
    ``values``, only the structure, shapes and dtypes."""
    if isinstance(ref, list):
        assert isinstance(got, (list, tuple)), f"{name}: expected a sequence, got {type(got)}"
        assert len(got) == len(ref), f"{name}: sequence length {len(got)} != {len(ref)}"
        for i, (g, r) in enumerate(zip(got, ref)):
            assert_output(f"{name}[{i}]", g, r, values)
        return
    if ref is None:
        assert got is None, f"{name}: expected an empty optional, got {type(got)}"
        return
    got = np.asarray(got)
    assert got.shape == ref.shape, f"{name}: shape {got.shape} != {ref.shape}"
    assert got.dtype == ref.dtype, f"{name}: dtype {got.dtype} != {ref.dtype}"
    if not values:
        return
    if ref.dtype.kind in "fc" or _is_ml_float(ref.dtype):
        np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=RTOL,
                                   atol=ATOL, err_msg=name)
    elif ref.dtype.kind == "O":
        np.testing.assert_array_equal(got.astype(object), ref, err_msg=name)
    else:
        np.testing.assert_array_equal(got.astype(ref.dtype), ref, err_msg=name)


def _is_ml_float(dtype: np.dtype) -> bool:
    """ml_dtypes' floats (bfloat16, float8, float4) are numpy kind 'V'."""
    return dtype.kind == "V" and "float" in dtype.name


_QUOTED = re.compile(r"'[^']*'")
_NUMBERS = re.compile(r"\[[-0-9, ]*\]|\(\d[\d, ]*\)|\b\d+\b")


def _short(message: str, limit: int = 90) -> str:
    """A message with names and numbers blanked, so that like failures group together."""
    first = message.strip().splitlines()[0] if message.strip() else ""
    first = _NUMBERS.sub("#", _QUOTED.sub("'_'", first))
    return first[:limit]


def _error_outcome(e: BaseException, stage: str) -> Outcome:
    """The status and reason of an exception raised while reading (``load``) or running."""
    outcome = _classify(e, stage)
    return Outcome(outcome.status, outcome.reason, f"{type(e).__name__}: {e}")


def _classify(e: BaseException, stage: str) -> Outcome:
    from netpass.errors import ModelFormatError, UnsupportedOpError, UnsupportedTypeError
    if isinstance(e, UnsupportedOpError):
        why = getattr(e, "reason", "")
        dom = f" ({e.domain})" if e.domain else ""
        return Outcome("unsupported", f"{e.op_type}{dom}" + (f": {_short(why, 60)}" if why else ""))
    if stage == "load":
        if isinstance(e, UnsupportedTypeError):
            m = re.search(r"element type (\w+)", str(e))
            return Outcome("load_error", f"element type {m.group(1) if m else _short(str(e))}")
        if isinstance(e, ModelFormatError):
            return Outcome("load_error", _short(str(e)))
        return Outcome("load_error", f"{type(e).__name__}: {_short(str(e))}")
    return Outcome("run_error", f"{type(e).__name__}: {_short(str(e))}")


def check_outputs(outs: dict[str, Any], expected: dict[str, Any],
                  random: frozenset[str] = frozenset()) -> Outcome:
    """One data set's outputs against the expected ones: ``pass`` (with the reason ``RANDOM``
    where only the shapes and dtypes of outputs in ``random`` held) or ``mismatch``."""
    relaxed = ""  # the first value mismatch of a random output
    for name, ref in expected.items():
        try:
            try:
                assert_output(name, outs[name], ref)
            except AssertionError as e:
                if name not in random:
                    raise
                assert_output(name, outs[name], ref, values=False)
                relaxed = relaxed or str(e)
        except AssertionError as e:
            text = str(e)
            kind = "shape" if ": shape" in text else "dtype" if ": dtype" in text else \
                "length" if "length" in text else \
                "kind" if "expected" in text.split("\n")[0] else "values"
            return Outcome("mismatch", kind, text)
        except Exception as e:
            return Outcome("mismatch", f"{type(e).__name__}: {_short(str(e))}",
                           f"{type(e).__name__}: {e}")
    return Outcome("pass", RANDOM, relaxed) if relaxed else Outcome("pass")


def _check(case: Any, infer: Callable[[dict[str, Any]], dict[str, Any]]) -> Outcome:
    random = random_outputs(case)
    outcome = Outcome("pass")
    for feeds, expected in case_data(case):
        try:
            outs = infer(feeds)
        except Exception as e:  # every failure is counted, not raised
            return _error_outcome(e, "run")
        checked = check_outputs(outs, expected, random)
        if not checked.passed:
            return checked
        if checked.reason:
            outcome = checked
    return outcome


def read_case(case: Any) -> tuple[Any, Outcome | None]:
    """``(model, None)``, or ``(None, outcome)`` when the case cannot be read."""
    import netpass
    try:
        return netpass.read_model(case.model), None
    except Exception as e:
        return None, _error_outcome(e, "load")


def run_reference(case: Any) -> Outcome:
    """One case through ``netpass.reference.infer``."""
    import netpass
    model, failed = read_case(case)
    if failed is not None:
        return failed
    return _check(case, lambda feeds: netpass.reference.infer(model, feeds))


def run_runtime(case: Any, device: str | None = None) -> Outcome:
    """One case through ``netpass.compile_model(model, device)`` and one infer request."""
    import netpass
    from netpass.testing import RUNTIME_DEVICE
    model, failed = read_case(case)
    if failed is not None:
        return failed
    try:
        req = netpass.compile_model(model, device=device or RUNTIME_DEVICE).create_infer_request()
    except Exception as e:
        return _error_outcome(e, "compile")
    return _check(case, req.infer)


RUNNERS: dict[str, Callable[[Any], Outcome]] = {"reference": run_reference,
                                                 "runtime": run_runtime}


def run_all(cases: Sequence[Any], target: str,
            progress: Callable[[int, Any, Outcome], None] | None = None) -> dict[str, Outcome]:
    """Outcome per case name, for ``target`` (``reference`` or ``runtime``)."""
    runner = RUNNERS[target]
    out: dict[str, Outcome] = {}
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        for i, case in enumerate(cases):
            outcome = runner(case)
            out[case.name] = outcome
            if progress is not None:
                progress(i, case, outcome)
    return out


def summary(outcomes: dict[str, Outcome], title: str) -> str:
    """Counts by status, then by reason within each failing status."""
    by_status = Counter(o.status for o in outcomes.values())
    lines = [f"{title}: {len(outcomes)} cases: " +
             ", ".join(f"{s} {by_status.get(s, 0)}" for s in STATUSES)]
    for status in STATUSES:
        reasons = Counter(o.reason for o in outcomes.values() if o.status == status)
        if status == "pass":
            reasons.pop("", None)
        if not reasons:
            continue
        of_which = ", of which" if status == "pass" else ""
        lines.append(f"  {status} ({by_status[status]}){of_which}:")
        for reason, n in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(f"    {n:4d}  {reason}")
    return "\n".join(lines)


def list_path(target: str, directory: Path = LISTS_DIR) -> Path:
    return directory / f"passing_{target}.txt"


def read_list(path: Path) -> list[str]:
    """Case names of a passing list (one per line; ``#`` comments and blank lines ignored)."""
    return list(read_notes(path))


def read_notes(path: Path) -> dict[str, str]:
    """Case name -> the note after its name (``RANDOM`` or "") of a passing list."""
    if not path.is_file():
        return {}
    entries = (line.split("#", 1) for line in path.read_text().splitlines())
    return {e[0].strip(): e[1].strip() if len(e) > 1 else "" for e in entries if e[0].strip()}


def write_list(path: Path, outcomes: dict[str, Outcome], target: str) -> None:
    passing = sorted(n for n, o in outcomes.items() if o.passed)
    header = (f"# ONNX backend cases (node, then model suites) that pass through the {target} "
              f"({len(passing)} of {len(outcomes)}, onnx {onnx.__version__}).\n"
              "# Written by `python tools/conformance.py --update`; the conformance tests fail "
              "when one stops passing.\n")
    path.write_text(header + "".join(n + (f"  # {outcomes[n].reason}" if outcomes[n].reason
                                          else "") + "\n" for n in passing))


def compare_to_list(outcomes: dict[str, Outcome],
                    listed: Iterable[str] | dict[str, str]) -> tuple[list[str], list[str]]:
    """``(regressed, newly_passing)``: listed cases that no longer pass (or are no longer
    collected, or passed by value and now pass on shape and dtype only: listed without the
    note ``RANDOM``, a dict of :func:`read_notes`), and passing cases the list lacks."""
    notes = listed if isinstance(listed, dict) else dict.fromkeys(listed, "")
    listed = set(notes)
    regressed = sorted(n for n in listed if n not in outcomes or not outcomes[n].passed
                       or outcomes[n].reason and not notes[n])
    new = sorted(n for n, o in outcomes.items() if o.passed and n not in listed)
    return regressed, new


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tools/conformance.py",
        description="Run ONNX backend node cases through netpass's reference evaluator and/or "
                    "runtime; print counts by status and reason; compare with (or rewrite) the "
                    "passing lists in tests/conformance/.")
    parser.add_argument("--target", choices=(*TARGETS, "both"), default="both")
    parser.add_argument("-k", dest="pattern", default=None,
                        help="only cases whose name contains this substring")
    parser.add_argument("--update", action="store_true",
                        help="rewrite passing_<target>.txt from this run (needs all cases)")
    parser.add_argument("--lists-dir", type=Path, default=LISTS_DIR,
                        help="where the passing lists live (default: tests/conformance)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="one line per case that does not pass")
    args = parser.parse_args(argv)
    if args.update and args.pattern:
        parser.error("--update rewrites the whole list: it cannot be combined with -k")
    cases = collect_cases()
    if args.pattern:
        cases = [c for c in cases if args.pattern in c.name]
    targets = TARGETS if args.target == "both" else (args.target,)
    status = 0
    for target in targets:
        def progress(i: int, case: Any, outcome: Outcome) -> None:
            if args.verbose and not outcome.passed:
                print(f"  {case.name}: {outcome.status}: {outcome.reason}", flush=True)
        start = time.perf_counter()
        outcomes = run_all(cases, target, progress)
        elapsed = time.perf_counter() - start
        print(summary(outcomes, f"{target} ({elapsed:.1f} s)"))
        path = list_path(target, args.lists_dir)
        if args.update:
            write_list(path, outcomes, target)
            print(f"  wrote {path} ({sum(o.passed for o in outcomes.values())} cases)")
            continue
        listed = {n: note for n, note in read_notes(path).items()
                  if args.pattern is None or args.pattern in n}
        regressed, new = compare_to_list(outcomes, listed)
        if new:
            print(f"  {len(new)} passing cases are not in {path.name} (run with --update)")
        if regressed:
            print(f"  {len(regressed)} listed cases no longer pass: " + ", ".join(regressed[:20]))
            status = 1
    return status


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
