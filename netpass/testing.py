"""Test kit for transformations: compare two models, check numeric accuracy, and a pytest base
class that runs passes and checks names, rt_info and the expected graph (OpenVINO's
``TransformationTestsF`` and ``FunctionsComparator``).

``compare_models`` follows OpenVINO's comparator: Results are paired by tensor names (else by
order), then a breadth-first walk from the Results pairs input ``i`` of one node with input
``i`` of the other. Nodes no Result reaches are ignored. The message names the first differing
node pair and why.
"""
from __future__ import annotations

import os
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .core.boundary import Constant, Result
from .core.model import Model
from .core.node import Node, Output
from .core.rt_info import FusedNames
from .core.shape import PartialShape
from .core.subgraph import MultiSubGraphOp
from .core.types import Type

RUNTIME_DEVICE = os.environ.get("NETPASS_TEST_DEVICE", "CPU").upper()
"""The device the runtime's tests compile for: ``NETPASS_TEST_DEVICE``, default ``CPU``
(PoCL, what CI has); ``GPU`` runs them on a GPU, where the tests of PoCL's own kernel
choices skip."""


@dataclass
class ComparisonResult:
    """Outcome of :func:`compare_models`; truthy when the models match."""

    valid: bool
    message: str = ""

    def __bool__(self) -> bool:
        return self.valid


def _desc(node: Node) -> str:
    return f"{node.type_name}-{node.version} '{node.friendly_name}'"


def _norm(value: Any) -> Any:
    """Attribute values in a comparable form (lists and tuples alike, types by name)."""
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (list, tuple)):
        return tuple(_norm(v) for v in value)
    if isinstance(value, Type):
        return value.name
    if isinstance(value, PartialShape):
        return str(value)
    if isinstance(value, np.generic):
        return value.item()
    return value


def _attr_equal(a: Any, b: Any) -> bool:
    na, nb = _norm(a), _norm(b)
    if isinstance(na, float) and isinstance(nb, (int, float)):
        return bool(np.isclose(na, nb, rtol=1e-6, atol=0.0))
    return na == nb


def _values_equal(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape:
        return False
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        return bool(np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=1e-5,
                                atol=1e-8, equal_nan=True))
    return bool(np.array_equal(a, b))


def _rt_diff(rt: Mapping | None, rt_ref: Mapping | None) -> str | None:
    """OpenVINO's rule: every rt_info key of the reference (but ``opset``) must be present
    with an equal value; extra keys on the compared side are fine."""
    rt = rt or {}
    for key, ref_value in (rt_ref or {}).items():
        if key == "opset":
            continue
        if key not in rt:
            return f"rt_info key '{key}' is missing"
        try:
            differ = bool(rt[key] != ref_value)
        except Exception:  # values without a usable equality count as equal, as in OpenVINO
            differ = False
        if differ:
            return f"rt_info values of '{key}' differ: {rt[key]!r} vs {ref_value!r}"
    return None


def _pair_results(model: Model, ref: Model) -> list[tuple[Node, Node]]:
    """Pair Results whose values share a tensor name; otherwise pair them by order."""
    a_res, b_res = model.results, ref.results
    pairs: list[tuple[Node, Node]] = []
    used: set[int] = set()
    for a in a_res:
        names = a.input_value(0).names
        match = [b for b in b_res if id(b) not in used and names & b.input_value(0).names]
        if len(match) != 1:
            return list(zip(a_res, b_res))
        used.add(id(match[0]))
        pairs.append((a, match[0]))
    return pairs


class _Comparator:
    def __init__(self, flags: dict[str, bool]) -> None:
        self.f = flags

    def node_pair(self, a: Node, b: Node) -> str | None:
        """Why ``a`` and ``b`` differ (excluding their inputs' producers), or None."""
        if type(a).type_name != type(b).type_name or a.version != b.version:
            return f"types differ: {a.type_name}-{a.version} vs {b.type_name}-{b.version}"
        if a.get_input_size() != b.get_input_size():
            return f"input counts differ: {a.get_input_size()} vs {b.get_input_size()}"
        if a.get_output_size() != b.get_output_size():
            return f"output counts differ: {a.get_output_size()} vs {b.get_output_size()}"
        for i, (sa, sb) in enumerate(zip(a.input_values(), b.input_values())):
            why = self.input_pair(i, sa, sb)
            if why:
                return why
            if self.f["rt_info"]:
                why = _rt_diff(a._in_rt.get(i) if a._in_rt else None,
                               b._in_rt.get(i) if b._in_rt else None)
                if why:
                    return f"input {i} {why}"
        for oa, ob in zip(a.outputs(), b.outputs()):
            why = self.output_pair(oa, ob)
            if why:
                return why
        if self.f["attributes"]:
            why = self.attributes(a, b)
            if why:
                return why
        if self.f["rt_info"]:
            why = _rt_diff(a.rt_info, b.rt_info)
            if why:
                return why
        if self.f["names"] and isinstance(a, Result):
            pa, pb = a.input_value(0).node, b.input_value(0).node
            if pa.friendly_name != pb.friendly_name:
                return (f"Result producers' friendly names differ: '{pa.friendly_name}' vs "
                        f"'{pb.friendly_name}'")
        return None

    def input_pair(self, i: int, sa: Output, sb: Output) -> str | None:
        if sa.index != sb.index:
            return f"input {i} comes from output port {sa.index} vs {sb.index}"
        if not sa.partial_shape.same_scheme(sb.partial_shape):
            return f"input {i} shapes differ: {sa.partial_shape} vs {sb.partial_shape}"
        if self.f["precisions"] and sa.element_type is not sb.element_type:
            return f"input {i} element types differ: {sa.element_type} vs {sb.element_type}"
        if (self.f["const_values"] and isinstance(sa.node, Constant)
                and isinstance(sb.node, Constant)):
            va, vb = np.asarray(sa.node.value), np.asarray(sb.node.value)
            if not _values_equal(va, vb):
                return (f"input {i} constant values differ: {_preview(va)} vs {_preview(vb)}")
        return None

    def output_pair(self, oa: Output, ob: Output) -> str | None:
        k = oa.index
        if not oa.partial_shape.same_scheme(ob.partial_shape):
            return f"output {k} shapes differ: {oa.partial_shape} vs {ob.partial_shape}"
        if self.f["precisions"] and oa.element_type is not ob.element_type:
            return f"output {k} element types differ: {oa.element_type} vs {ob.element_type}"
        if self.f["tensor_names"] and oa.names != ob.names:
            return f"output {k} tensor names differ: {sorted(oa.names)} vs {sorted(ob.names)}"
        if self.f["rt_info"]:
            why = _rt_diff(oa.node._outs[k].rt, ob.node._outs[k].rt)
            if why:
                return f"output {k} {why}"
        if self.f["consumers_count"]:
            ca, cb = len(oa.consumers()), len(ob.consumers())
            if ca != cb:
                return f"output {k} consumer counts differ: {ca} vs {cb}"
        return None

    def attributes(self, a: Node, b: Node) -> str | None:
        if isinstance(a, Constant):
            if a.get_output_element_type(0) is not b.get_output_element_type(0):
                return (f"attribute element_type differs: {a.get_output_element_type(0)} vs "
                        f"{b.get_output_element_type(0)}")
            va, vb = np.asarray(a.value), np.asarray(b.value)
            if va.shape != vb.shape:
                return f"attribute shape differs: {list(va.shape)} vs {list(vb.shape)}"
            if self.f["const_values"] and not _values_equal(va, vb):
                return f"constant values differ: {_preview(va)} vs {_preview(vb)}"
            return None
        aa, ab = a.get_attributes(), b.get_attributes()
        for key in sorted(set(aa) | set(ab)):
            if key not in aa or key not in ab:
                return f"attribute {key} exists on one side only"
            if key == "bodies" and isinstance(a, MultiSubGraphOp):
                if len(aa[key]) != len(ab[key]):
                    return f"body counts differ: {len(aa[key])} vs {len(ab[key])}"
                for i, (ba, bb) in enumerate(zip(aa[key], ab[key])):
                    inner = self.compare(ba, bb)
                    if not inner.valid:
                        return f"{a.body_name(i)} differs: {inner.message}"
                continue
            if not _attr_equal(aa[key], ab[key]):
                return f"attribute {key} differs: {aa[key]!r} vs {ab[key]!r}"
        return None

    def compare(self, model: Model, ref: Model) -> ComparisonResult:
        if len(model.results) != len(ref.results):
            return ComparisonResult(False, f"result counts differ: {len(model.results)} vs "
                                           f"{len(ref.results)}")
        if len(model.sinks) != len(ref.sinks):
            return ComparisonResult(False, f"sink counts differ: {len(model.sinks)} vs "
                                           f"{len(ref.sinks)}")
        queue: deque[tuple[Node, Node, str]] = deque()
        seen: set[int] = set()
        for a, b in [*_pair_results(model, ref), *zip(model.sinks, ref.sinks)]:
            queue.append((a, b, f"{a.type_name} '{a.friendly_name}'"))
            seen.add(id(a))
        while queue:
            a, b, path = queue.popleft()
            why = self.node_pair(a, b)
            if why:
                return ComparisonResult(False, f"{_desc(a)} and {_desc(b)} differ: {why}\n"
                                               f"  (reached from {path})")
            for i, (sa, sb) in enumerate(zip(a.input_values(), b.input_values())):
                if id(sa.node) not in seen:
                    seen.add(id(sa.node))
                    queue.append((sa.node, sb.node, f"{path} <- input {i} of '{a.friendly_name}'"
                                  if path.count("<-") < 4 else path))
        return ComparisonResult(True, "")


def _preview(arr: np.ndarray, limit: int = 6) -> str:
    flat = arr.reshape(-1)
    items = ", ".join(str(v) for v in flat[:limit].tolist())
    more = ", ..." if flat.size > limit else ""
    return f"{arr.dtype}{list(arr.shape)} [{items}{more}]"


def compare_models(model: Model, model_ref: Model, *, names: bool = False,
                   const_values: bool = True, attributes: bool = True, precisions: bool = True,
                   rt_info: bool = False, tensor_names: bool = False,
                   consumers_count: bool = False) -> ComparisonResult:
    """Compare ``model`` with ``model_ref`` node by node from their Results (OpenVINO's
    comparator). Types, input/output counts, source output ports and shapes are always
    compared; the flags add element types, constant values, attributes, Result producers'
    friendly names, rt_info (the reference's keys must be present with equal values), tensor
    names and consumer counts."""
    flags = dict(names=names, const_values=const_values, attributes=attributes,
                 precisions=precisions, rt_info=rt_info, tensor_names=tensor_names,
                 consumers_count=consumers_count)
    return _Comparator(flags).compare(model, model_ref)


# -- accuracy ------------------------------------------------------------------------------
@dataclass
class AccuracyResult:
    """Outcome of :func:`check_accuracy`; truthy when every output is within tolerance."""

    valid: bool
    message: str = ""
    max_abs_error: dict[str, float] = field(default_factory=dict)
    max_rel_error: dict[str, float] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.valid


def _concrete_shape(ps: PartialShape) -> tuple[int, ...]:
    """A small concrete shape fitting ``ps``: dynamic dims become 2 (or their bounds)."""
    if not ps.rank_is_static:
        return (2, 3)
    dims = []
    for d in ps:
        if d.is_static:
            dims.append(d.min)
        else:
            hi = d.get_max_length()
            dims.append(max(d.min, 2) if hi == -1 else min(max(d.min, 2), hi))
    return tuple(dims)


def random_inputs(model: Model, seed: int = 0) -> dict[str, np.ndarray]:
    """Random non-zero inputs for every parameter: floats in ±[0.1, 1], ints in [1, 3]."""
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for name, p in zip(model.input_names, model.parameters):
        et = p.output(0).element_type
        shape = _concrete_shape(p.output(0).partial_shape)
        if et.name == "boolean":
            arr = rng.integers(0, 2, size=shape).astype(np.bool_)
        elif et.is_integral:
            arr = rng.integers(1, 4, size=shape).astype(et.dtype)
        else:
            mag = rng.uniform(0.1, 1.0, size=shape)
            sign = np.where(rng.integers(0, 2, size=shape) == 0, -1.0, 1.0)
            arr = (mag * sign).astype(et.dtype if et.dtype is not None else np.float32)
        out[name] = arr
    return out


def check_accuracy(model: Model, model_ref: Model, inputs: Mapping[str, Any] | None = None,
                   rtol: float = 1e-3, atol: float = 5e-4, seed: int = 0) -> AccuracyResult:
    """Run both models with ``netpass.reference.infer`` on the same inputs (random non-zero
    ones by default) and check ``|out - ref| <= atol + rtol * |ref|`` for every output."""
    from .reference import infer
    feeds = dict(inputs) if inputs is not None else random_inputs(model_ref, seed)
    outs = infer(model, {k: feeds[k] for k in model.input_names if k in feeds})
    refs = infer(model_ref, {k: feeds[k] for k in model_ref.input_names if k in feeds})
    if len(outs) != len(refs):
        return AccuracyResult(False, f"output counts differ: {len(outs)} vs {len(refs)}")
    pairs = [(k, outs[k], refs[k]) for k in refs] if set(outs) == set(refs) else \
        [(kr, outs[ko], refs[kr]) for ko, kr in zip(outs, refs)]
    result = AccuracyResult(True)
    problems = []
    for name, out, ref in pairs:
        out, ref = np.asarray(out), np.asarray(ref)
        if out.shape != ref.shape:
            problems.append(f"output '{name}': shape {list(out.shape)} vs {list(ref.shape)}")
            continue
        o64, r64 = out.astype(np.float64), ref.astype(np.float64)
        nan_o, nan_r = np.isnan(o64), np.isnan(r64)
        both_nan = nan_o & nan_r
        with np.errstate(invalid="ignore"):  # inf - inf: NaN, judged by the rule below
            diff = np.where(both_nan, 0.0, np.abs(o64 - r64))
            mag = np.abs(np.where(nan_r, 0.0, r64))
            result.max_abs_error[name] = float(np.nanmax(diff, initial=0.0))
            result.max_rel_error[name] = float(np.nanmax(diff / np.maximum(mag, 1e-12),
                                                         initial=0.0))
        # A NaN on one side only is an error; NaN compares false with any tolerance. An
        # infinity must be matched exactly: ``rtol * inf`` would accept any value.
        inf = np.isinf(o64) | np.isinf(r64)
        bad = (diff > atol + rtol * mag) | (nan_o != nan_r) | (inf & (o64 != r64))
        if bad.any():
            at = tuple(int(i) for i in np.argwhere(bad)[0])
            problems.append(f"output '{name}': {int(bad.sum())} of {bad.size} elements off, "
                            f"max abs error {result.max_abs_error[name]:.3g}; first at {at}: "
                            f"{out[at]} vs {ref[at]} (rtol {rtol}, atol {atol})")
    if problems:
        result.valid = False
        result.message = "\n".join(problems)
    return result


# -- TransformationTest --------------------------------------------------------------------
def init_node_info(model: Model) -> None:
    """Put ``FusedNames{friendly name}`` on every op (OpenVINO's InitNodeInfo)."""
    for node in model.get_ordered_ops():
        node.rt_info[FusedNames.key] = FusedNames([node.friendly_name])


def init_unique_names(model: Model) -> None:
    """Give every op without an explicit friendly name ``node_<i>`` and every unnamed output
    ``tensor_<i>_<port>`` (OpenVINO's InitUniqueNames), so name checks after the passes mean
    something."""
    for i, node in enumerate(model.get_ordered_ops()):
        if node._friendly is None and not isinstance(node, Result):
            node.friendly_name = f"node_{i}"
        if isinstance(node, Result):
            continue
        for out in node.outputs():
            if not out.names:
                out.names.add(f"tensor_{i}_{out.index}")


class TransformationTest:
    """pytest base class for transformation tests (OpenVINO's ``TransformationTestsF``).

    A test method builds ``self.model`` (and optionally ``self.model_ref``; by default the
    expected result is the unchanged model) and registers passes on ``self.manager``. The
    passes run at an explicit ``self.run_and_compare()``, or, when the test did not call it,
    right after the test method returns (as part of the test: a failed check fails the test,
    never its teardown; a test that raised, or left ``self.model`` None, runs nothing more).
    The test fails when names are duplicated, a Result's tensor names or producer friendly name
    were lost, an op lacks ``fused_names_0`` (unless ``disable_rt_info_check()``), the model
    differs from ``model_ref`` (``compare_models`` with ``self.compare_flags``), or, after
    ``enable_accuracy_check()``, the outputs differ from the original model's. The Manager
    validates every pass (``netpass.passes.validation``), so a pass that breaks the model's
    interface or reports a change it did not make fails with a ``PassValidationError``.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, fn in list(cls.__dict__.items()):
            if name.startswith("test") and callable(fn) and not hasattr(fn, "_compares_after"):
                setattr(cls, name, _compare_after(fn))

    model: Model | None
    model_ref: Model | None

    def setup_method(self, method: Any = None) -> None:
        from .passes import Manager
        self.model = None
        self.model_ref = None
        self.manager = Manager()
        # compare_models flags; rt_info on as in OpenVINO's TransformationTestsF (model_ref's
        # rt_info keys must survive on the transformed model).
        self.compare_flags: dict[str, bool] = {"rt_info": True}
        self._check_rt_info = True
        self._check_result_names = True
        self._check_accuracy = False
        self._accuracy_tol = (1e-3, 5e-4)
        self._done = False

    def finish(self) -> None:
        """Run the check unless the test ran it or set no model (called after each test
        method of a subclass; call it yourself when using the class outside pytest)."""
        if not self._done and self.model is not None:
            self.run_and_compare()

    def disable_rt_info_check(self) -> None:
        self._check_rt_info = False

    def disable_result_friendly_names_check(self) -> None:
        """Do not require a Result's producer to keep its friendly name (OpenVINO's switch of the
        same name, for rewrites such as Split sinking that rename multi-output producers)."""
        self._check_result_names = False

    def enable_accuracy_check(self, rtol: float = 1e-3, atol: float = 5e-4) -> None:
        self._check_accuracy = True
        self._accuracy_tol = (rtol, atol)

    def run_and_compare(self) -> None:
        """Run the registered passes on ``self.model`` and check it (see the class doc)."""
        self._done = True
        model = self.model
        assert model is not None, "TransformationTest: set self.model in the test"
        init_unique_names(model)
        if self.model_ref is None:
            self.model_ref = model.clone()
        original = model.clone() if self._check_accuracy else None
        _copy_result_tensor_names(model, self.model_ref)
        expected = [(set(r.input_value(0).names),
                     r.input_value(0).node.friendly_name if self._check_result_names else None)
                    for r in model.results]
        init_node_info(model)
        self.manager.run_passes(model)
        problems = check_unique_names(model) + _check_results(model, expected)
        if self._check_rt_info:
            problems += check_rt_info(model)
        assert not problems, "TransformationTest:\n  " + "\n  ".join(problems)
        if original is not None:
            rtol, atol = self._accuracy_tol
            acc = check_accuracy(model, original, rtol=rtol, atol=atol)
            assert acc.valid, f"TransformationTest: accuracy check failed:\n{acc.message}"
        res = compare_models(model, self.model_ref, **self.compare_flags)
        assert res.valid, f"TransformationTest: model differs from model_ref: {res.message}"


def _compare_after(test: Any) -> Any:
    """``test`` followed by ``self.finish()`` when it returns normally (pytest still sees the
    original signature, so fixtures and parametrization work)."""
    import functools

    @functools.wraps(test)
    def run(self: TransformationTest, *args: Any, **kwargs: Any) -> Any:
        result = test(self, *args, **kwargs)
        self.finish()
        return result

    run._compares_after = True  # type: ignore[attr-defined]
    return run


def check_unique_names(model: Model) -> list[str]:
    """Problems with friendly names or tensor names used by more than one op/output."""
    problems = []
    friendly: dict[str, Node] = {}
    tensors: dict[str, Output] = {}
    for node in model.get_ordered_ops():
        if isinstance(node, Result):
            continue
        other = friendly.setdefault(node.friendly_name, node)
        if other is not node:
            problems.append(f"friendly name '{node.friendly_name}' is used by {_desc(other)} "
                            f"and {_desc(node)}")
        for out in node.outputs():
            for name in out.names:
                prev = tensors.setdefault(name, out)
                if prev != out:
                    problems.append(f"tensor name '{name}' is on {prev} and {out}")
    return problems


def check_rt_info(model: Model) -> list[str]:
    """Ops lacking ``fused_names_0`` (Constants are exempt, as in OpenVINO's check_rt_info)."""
    return [f"{_desc(n)} has no rt_info attribute {FusedNames.key}"
            for n in model.get_ordered_ops()
            if not isinstance(n, Constant) and FusedNames.key not in n.rt_info]


def _check_results(model: Model, expected: list[tuple[set[str], str | None]]) -> list[str]:
    problems = []
    for r, (names, producer) in zip(model.results, expected):
        src = r.input_value(0)
        lost = names - src.names
        if lost:
            problems.append(f"Result '{r.friendly_name}' lost tensor names {sorted(lost)} "
                            f"(its value now comes from {_desc(src.node)})")
        # Multi-output producers name outputs '<name>.<i>': accept the original as a part.
        if producer is not None and src.node.friendly_name != producer \
                and producer not in src.node.friendly_name:
            problems.append(f"Result '{r.friendly_name}' producer is now named "
                            f"'{src.node.friendly_name}', expected '{producer}'")
    return problems


def _copy_result_tensor_names(model: Model, ref: Model) -> None:
    """Give model_ref's Results the tensor names of model's where they have none
    (OpenVINO's CopyTensorNamesToRefModel)."""
    for r, rr in zip(model.results, ref.results):
        src = rr.input_value(0)
        if not src.names:
            src.names.update(r.input_value(0).names)


__all__ = ["compare_models", "ComparisonResult", "check_accuracy", "AccuracyResult",
           "random_inputs", "TransformationTest", "init_node_info", "init_unique_names",
           "check_unique_names", "check_rt_info"]
