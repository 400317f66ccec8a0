"""Pattern nodes: ``wrap_type``, ``any_input``, ``optional``, ``Or`` and pattern outputs.

A pattern is a small DAG of these nodes. Each node's ``_match(m, out)`` tries to match the
graph value ``out`` (an :class:`~netpass.core.node.Output`) inside the running matcher ``m``:
it binds itself in ``m.pattern_value_map`` (pattern node -> Output; the dict only grows during
a match, so ``Or``, ``optional`` and commutative retries roll back by popping its newest
entries) and recurses into its inputs. Matching is the hot path of every rewrite, so the
common steps are plain attribute reads and one ``isinstance`` against a tuple of classes; failure
reasons are only recorded when the matcher
explains (see :mod:`netpass.pattern.explain`).
"""
from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Any, cast

from ..core.node import OP_TYPES, Node
from ..errors import NetpassError
from .predicates import Predicate, as_predicate

_pattern_ids = itertools.count()

# Failure reasons (recorded by an explaining matcher).
WRONG_TYPE = "wrong type"
WRONG_OUTPUT = "wrong output index"
PREDICATE = "predicate false"
INPUT_COUNT = "input count"
BOUND_OTHER = "bound to another value"
NO_BRANCH = "no branch matched"
NOT_AN_OUTPUT = "node has no such output"


class PatternError(NetpassError):
    """A pattern is malformed (unknown op type, optional without inputs...)."""


def _resolve_type(t: Any) -> type[Node]:
    if isinstance(t, type) and issubclass(t, Node):
        return t
    if isinstance(t, str):
        name = t.rsplit(".", 1)[-1]  # accept OpenVINO's "opset1.Transpose"
        cls = OP_TYPES.get(name)
        if cls is None:
            raise PatternError(f"wrap_type: unknown op type '{t}'")
        return cls
    raise PatternError(f"wrap_type: expected an op class (or tuple of them), got {t!r}")


def _types_tuple(types: Any) -> tuple[type[Node], ...]:
    if isinstance(types, (tuple, list, set, frozenset)):
        out = tuple(_resolve_type(t) for t in types)
    else:
        out = (_resolve_type(types),)
    if not out:
        raise PatternError("wrap_type: no op types given")
    return out


def as_pattern(value: Any) -> Pattern:
    """A pattern node from a pattern node, a pattern output, or an op class (= wrap_type)."""
    if isinstance(value, Pattern):
        return value
    if isinstance(value, type) and issubclass(value, Node) or isinstance(value, str):
        return WrapType(value)
    raise PatternError(f"not a pattern node: {value!r} (use wrap_type/any_input/Or/optional)")


class Pattern:
    """Base of pattern nodes. ``name`` labels the node in why-no-match reports."""

    __slots__ = ("name", "_id", "__weakref__")

    def __init__(self, name: str | None) -> None:
        self._id = next(_pattern_ids)
        self.name = name

    def _match(self, m: Any, out: Any) -> bool:
        raise NotImplementedError

    def root_types(self) -> tuple[type[Node], ...] | None:
        """Op classes every match of this pattern's root is an instance of, or None (any)."""
        return None

    def root_index(self) -> int:
        """The output index the matcher tries first on a node (pattern outputs pin it)."""
        return 0

    def label(self) -> str:
        return self.name or f"{self._describe()}#{self._id}"

    def _describe(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        return f"<pattern {self.label()}>"


def _join_types(types: Sequence[type]) -> str:
    return "|".join(t.__name__ if t.__name__ == getattr(t, "type_name", t.__name__)
                    else getattr(t, "type_name", t.__name__) for t in types)


class WrapType(Pattern):
    """Matches a node that is an instance of one of ``types`` (base classes allowed), whose
    value satisfies ``predicate``, and, when ``inputs`` is given, whose inputs match them
    pairwise (both orders for commutative ops). Without ``inputs`` (None or empty, as in
    OpenVINO, whose ``wrap_type<T>({})`` is ``wrap_type<T>()``) the inputs are not checked.

    A WrapType stands for one graph node within one match: met again, it must meet the same
    node. It matches any output of that node unless pinned with :meth:`output`.
    """

    __slots__ = ("types", "inputs", "predicate", "_pred", "_outputs", "_n_in")

    def __init__(self, types: Any, inputs: Iterable[Any] | None = None,
                 predicate: Any = None, name: str | None = None) -> None:
        super().__init__(name)
        self.types = _types_tuple(types)
        self.inputs = (None if inputs is None else tuple(as_pattern(p) for p in inputs)) or None
        self._n_in = 0 if self.inputs is None else len(self.inputs)
        self.predicate = None if predicate is None else as_predicate(predicate)
        self._pred = None if self.predicate is None else self.predicate.fn
        self._outputs: dict[int, PatternOutput] = {}

    def output(self, index: int) -> PatternOutput:
        """This pattern node's output ``index``: matches only that output of the node."""
        po = self._outputs.get(index)
        if po is None:
            po = self._outputs[index] = PatternOutput(self, index)
        return po

    def root_types(self) -> tuple[type[Node], ...] | None:
        return self.types

    def _describe(self) -> str:
        return f"wrap_type({_join_types(self.types)})"

    def _match(self, m: Any, out: Any) -> bool:
        node = out.node
        if not isinstance(node, self.types):
            if m._explain:
                m._fail(self, out, WRONG_TYPE, self.types)
            return False
        pred = self._pred
        if pred is not None and not pred(out, m):
            if m._explain:
                m._fail(self, out, PREDICATE, cast(Predicate, self.predicate).failure(out, m))
            return False
        prev = m.pattern_value_map.setdefault(self, out)
        if prev is not out:
            if prev.node is node:
                return True
            if m._explain:
                m._fail(self, out, BOUND_OTHER, prev)
            return False
        ins = self.inputs
        if ins is None:
            return True
        args = node._inputs
        n = self._n_in
        if len(args) != n:
            if m._explain:
                m._fail(self, out, INPUT_COUNT, (n, len(args)))
            return False
        if n == 1:
            return ins[0]._match(m, args[0])
        if node.commutative:
            return _match_commutative(m, ins, args)
        if n == 2:
            return ins[0]._match(m, args[0]) and ins[1]._match(m, args[1])
        for p, a in zip(ins, args):  # noqa: SIM110 (a loop: no generator on the hot path)
            if not p._match(m, a):
                return False
        return True


def _match_commutative(m: Any, ins: tuple[Any, ...], args: list[Any]) -> bool:
    """Try every order of the pattern's arguments, restoring the state between tries."""
    mark = m._mark()
    for perm in itertools.permutations(ins):
        for p, a in zip(perm, args):
            if not p._match(m, a):
                break
        else:
            return True
        m._rollback(mark)
    return False


class PatternOutput(Pattern):
    """Output ``index`` of a :class:`WrapType` pattern node (multi-output patterns).

    Matches a graph value whose output index is ``index`` and whose node matches the wrapped
    pattern node; the map holds both this output and the wrapped node.
    """

    __slots__ = ("owner", "index")

    def __init__(self, owner: WrapType, index: int) -> None:
        super().__init__(None)
        self.owner = owner
        self.index = index

    def root_types(self) -> tuple[type[Node], ...] | None:
        return self.owner.root_types()

    def root_index(self) -> int:
        return self.index

    def label(self) -> str:
        return self.name or f"{self.owner.label()}.output({self.index})"

    def _match(self, m: Any, out: Any) -> bool:
        if out.index != self.index:
            if m._explain:
                m._fail(self, out, WRONG_OUTPUT, self.index)
            return False
        if not self.owner._match(m, out):
            return False
        m.pattern_value_map.setdefault(self, out)
        return True


class Label(Pattern):
    """``any_input``: matches any value satisfying ``predicate``; bound twice in one match, it
    must meet the same Output both times (this is how patterns share a value)."""

    __slots__ = ("predicate", "_pred", "wrapped")

    def __init__(self, predicate: Any = None, wrapped: Pattern | None = None,
                 name: str | None = None) -> None:
        super().__init__(name)
        self.predicate = None if predicate is None else as_predicate(predicate)
        self._pred = None if self.predicate is None else self.predicate.fn
        self.wrapped = wrapped

    def root_types(self) -> tuple[type[Node], ...] | None:
        return None if self.wrapped is None else self.wrapped.root_types()

    def _describe(self) -> str:
        return "any_input()" if self.predicate is None else f"any_input({self.predicate.name})"

    def _match(self, m: Any, out: Any) -> bool:
        pred = self._pred
        if pred is not None and not pred(out, m):
            if m._explain:
                m._fail(self, out, PREDICATE, cast(Predicate, self.predicate).failure(out, m))
            return False
        prev = m.pattern_value_map.setdefault(self, out)
        if prev is not out:
            if prev.node is out.node and prev.index == out.index:
                return True
            if m._explain:
                m._fail(self, out, BOUND_OTHER, prev)
            return False
        if self.wrapped is not None:
            return self.wrapped._match(m, out)
        return True


class Or(Pattern):
    """Tries ``patterns`` in order; the first that matches wins (failed branches roll back)."""

    __slots__ = ("patterns",)

    def __init__(self, patterns: Iterable[Any], name: str | None = None) -> None:
        super().__init__(name)
        self.patterns = tuple(as_pattern(p) for p in patterns)
        if not self.patterns:
            raise PatternError("Or: no patterns given")

    def root_types(self) -> tuple[type[Node], ...] | None:
        types: list[type[Node]] = []
        for p in self.patterns:
            t = p.root_types()
            if t is None:
                return None
            types.extend(t)
        return tuple(dict.fromkeys(types))

    def _describe(self) -> str:
        return "Or(" + ", ".join(p.label() for p in self.patterns) + ")"

    def _match(self, m: Any, out: Any) -> bool:
        mark = m._mark()
        for p in self.patterns:
            if p._match(m, out):
                m.pattern_value_map[self] = out
                return True
            m._rollback(mark)
        if m._explain:
            m._fail(self, out, NO_BRANCH, None)
        return False


class Optional(WrapType):
    """A node that may be absent: matches the wrapped op (binding this pattern node) or, when
    that fails, its first input pattern directly (this pattern node then stays unbound)."""

    __slots__ = ()

    def __init__(self, types: Any, inputs: Iterable[Any] | None = None,
                 predicate: Any = None, name: str | None = None) -> None:
        super().__init__(types, inputs, predicate, name)
        if not self.inputs:
            raise PatternError("optional: needs inputs (the value used when the op is absent)")

    def root_types(self) -> tuple[type[Node], ...] | None:
        absent = self._absent().root_types()
        return None if absent is None else tuple(dict.fromkeys((*self.types, *absent)))

    def _describe(self) -> str:
        return f"optional({_join_types(self.types)})"

    def _match(self, m: Any, out: Any) -> bool:
        mark = m._mark()
        if WrapType._match(self, m, out):
            return True
        m._rollback(mark)
        return self._absent()._match(m, out)

    def _absent(self) -> Pattern:
        """The pattern of the value used when the op is absent (checked given)."""
        assert self.inputs
        return self.inputs[0]


# -- factories (OpenVINO names) ---------------------------------------------------------------
def wrap_type(types: Any, inputs: Iterable[Any] | None = None, predicate: Any = None,
              *, name: str | None = None) -> WrapType:
    """A node of one of ``types`` (a class, a tuple/list of classes, or op type names)."""
    return WrapType(types, inputs, predicate, name)


def any_input(predicate: Any = None, *, name: str | None = None) -> Label:
    """Any value (satisfying ``predicate``); the same label always binds the same Output."""
    return Label(predicate, None, name)


def optional(types: Any, inputs: Iterable[Any] | None = None, predicate: Any = None,
             *, name: str | None = None) -> Optional:
    """``types(inputs)`` if present, else ``inputs[0]`` itself."""
    return Optional(types, inputs, predicate, name)


__all__ = ["Pattern", "WrapType", "PatternOutput", "Label", "Or", "Optional", "PatternError",
           "Predicate", "wrap_type", "any_input", "optional", "as_pattern"]
