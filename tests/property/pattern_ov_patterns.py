"""Random patterns over a drawn graph, built identically in netpass and OpenVINO, and the
comparison of what each library's Matcher matches.

A pattern is drawn by abstracting the sub-graph above a value of the graph (so that most
patterns match somewhere): each value becomes ``any_input`` (maybe with a predicate, maybe the
same label as an equal value met before), a ``wrap_type`` of its op (maybe with a second type,
or a wrong one; inputs abstracted in turn, or not checked), an ``Or`` of it and wrong branches,
an ``optional`` present or absent, or, for a Split output, the Split's pattern output ``i``.

OpenVINO quirks the comparison allows for, each on purpose:

- commutative ops: OpenVINO tries the pattern's arguments sorted by their address in memory;
  :func:`build_pattern` gives netpass's ``wrap_type`` its arguments in that order (all types of a
  binary ``wrap_type`` are drawn commutative, or all not), so both try the same order first.
- a ``wrap_type`` met twice in one match: OpenVINO overwrites its binding, netpass requires the
  same node (docs/passes.md, "Differences from OpenVINO"): with such a pattern a netpass match
  must be an OpenVINO match, not the converse.
- a multi-output pattern node: OpenVINO's ``WrapType`` has one output, so ``split.output(i)`` is
  a real Split op in OpenVINO's pattern (``Node::match_value`` checks the output index); its map
  entry holds the last output met, so only its node is compared.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from pattern_ov_graphs import COMMUTATIVE, ORDERED, UNARY, GNode, n_outputs

_OTHER = ("Parameter", "Constant", "Transpose", "Reshape", "Concat", "Split")


@dataclass(eq=False)
class P:
    """A pattern node: kind W (wrap_type), L (any_input), Or, Opt (optional), SO (split output)."""

    kind: str
    types: tuple[str, ...] = ()
    inputs: list[P] | None = None
    pred: Any = None
    index: int = 0
    name: str = ""
    _built: dict[str, Any] = field(default_factory=dict)


# -- predicates -------------------------------------------------------------------------------
def _draw_pred(rng: random.Random, depth: int = 0) -> Any:
    r = rng.random()
    if depth < 1 and r < 0.15:
        return (rng.choice(("and", "or")), _draw_pred(rng, 1), _draw_pred(rng, 1))
    if depth < 1 and r < 0.2:
        return ("not", _draw_pred(rng, 1))
    return rng.choice([("consumers", rng.randint(0, 2)), ("consumers", 1), ("static_shape",),
                       ("static_rank",), ("rank", rng.choice((1, 2))),
                       ("type", rng.choice(("f32", "f16"))), ("static_dim", rng.randint(0, 2)),
                       ("shape", rng.choice(("[2,?]", "[?,2]", "[...]", "[4,...]", "[N,N]",
                                             "[N,?]", "[...,2]")))])


def _np_pred(spec: Any) -> Any:
    from netpass import pattern as pt
    kind = spec[0]
    if kind == "and":
        return _np_pred(spec[1]) & _np_pred(spec[2])
    if kind == "or":
        return _np_pred(spec[1]) | _np_pred(spec[2])
    if kind == "not":
        return ~_np_pred(spec[1])
    return {"consumers": lambda: pt.consumers_count(spec[1]),
            "static_shape": pt.has_static_shape, "static_rank": pt.has_static_rank,
            "rank": lambda: pt.rank_equals(spec[1]), "type": lambda: pt.type_matches(spec[1]),
            "static_dim": lambda: pt.has_static_dim(spec[1]),
            "shape": lambda: pt.shape_matches(spec[1])}[kind]()


def _ov_eval(spec: Any, out: Any) -> bool:
    """Combinations for OpenVINO (its Python predicates do not combine): evaluated here."""
    kind = spec[0]
    if kind == "and":
        return _ov_eval(spec[1], out) and _ov_eval(spec[2], out)
    if kind == "or":
        return _ov_eval(spec[1], out) or _ov_eval(spec[2], out)
    if kind == "not":
        return not _ov_eval(spec[1], out)
    ps = out.get_partial_shape()
    if kind == "consumers":
        return len(out.get_target_inputs()) == spec[1]
    if kind == "static_shape":
        return ps.is_static
    if kind == "static_rank":
        return ps.rank.is_static
    if kind == "rank":
        return ps.rank.is_static and ps.rank.get_length() == spec[1]
    if kind == "type":
        return out.get_element_type().get_type_name() == spec[1]
    if kind == "static_dim":
        return ps.rank.is_static and ps.rank.get_length() > spec[1] and ps[spec[1]].is_static
    raise AssertionError(kind)


def _ov_pred(spec: Any) -> Any:
    import openvino as ov
    import openvino.passes as ovp
    kind = spec[0]
    if kind in ("and", "or", "not"):
        if any(s[0] == "shape" for s in spec[1:] if isinstance(s, tuple)):
            return None  # shape_matches binds symbols: only OpenVINO's own can do that
        return lambda out: _ov_eval(spec, out)
    return {"consumers": lambda: ovp.consumers_count(spec[1]),
            "static_shape": ovp.has_static_shape, "static_rank": ovp.has_static_rank,
            "rank": lambda: ovp.rank_equals(ov.Dimension(spec[1])),
            "type": lambda: ovp.type_matches(getattr(ov.Type, spec[1])),
            "static_dim": lambda: ovp.has_static_dim(spec[1]),
            "shape": lambda: ovp.shape_matches(spec[1])}[kind]()


def _usable(spec: Any) -> bool:
    return spec is None or _ov_pred(spec) is not None


# -- drawing ----------------------------------------------------------------------------------
def _group(kind: str) -> tuple[str, ...]:
    for g in (UNARY, COMMUTATIVE, ORDERED):
        if kind in g:
            return g
    return _OTHER


def draw_pattern(rng: random.Random, graph: list[GNode], anchor: tuple[int, int],
                 depth: int) -> P:
    """A pattern abstracting the values above ``anchor`` (node, output) to ``depth``."""
    labels: dict[tuple[int, int], P] = {}
    wraps: dict[int, P] = {}

    def pred() -> Any:
        if rng.random() >= 0.35:
            return None
        spec = _draw_pred(rng)
        return spec if _usable(spec) else None

    def wrap(v: tuple[int, int], d: int, kind: str) -> P:
        g = graph[v[0]]
        group = _group(g.kind)
        r = rng.random()
        if r < 0.1:  # a wrong type (maybe)
            types: tuple[str, ...] = (rng.choice(group),)
        elif r < 0.3:
            types = tuple(dict.fromkeys((g.kind, rng.choice(group))))
        else:
            types = (g.kind,)
        r = rng.random()
        if kind == "W" and r < 0.05:
            inputs: list[P] | None = []  # as unchecked as None, in OpenVINO
        elif r < 0.15 or not g.inputs:
            inputs = None
        else:
            inputs = [sub(x, d - 1) for x in g.inputs]
        return P(kind, types, inputs, pred())

    def sub(v: tuple[int, int], d: int) -> P:
        g = graph[v[0]]
        if v in labels and rng.random() < 0.6:
            return labels[v]  # the same any_input twice: it must meet the same value
        if v[0] in wraps and rng.random() < 0.5:
            return wraps[v[0]]  # a shared wrap_type (may differ from OpenVINO: see above)
        r = rng.random()
        if d <= 0 or r < 0.12:
            p = labels[v] = P("L", pred=pred())
            return p
        if g.kind == "Split" and r < 0.6:
            return P("SO", inputs=[sub(x, d - 1) for x in g.inputs],
                     index=v[1] if rng.random() < 0.85 else 1 - v[1])
        if r < 0.55:
            branches = [wrap(v, d, "W"), P("W", (rng.choice(_group(g.kind)),), None, pred())]
            if rng.random() < 0.3:
                branches.append(P("L", pred=pred()))
            rng.shuffle(branches)
            return P("Or", inputs=branches)
        if r < 0.7 and g.kind in UNARY + ("Subtract",):
            p = wrap(v, d, "Opt")  # present
            if p.inputs is None:
                p.inputs = [sub(x, d - 1) for x in g.inputs]
            return p
        if r < 0.8:
            other = rng.choice(UNARY)  # absent (or, by chance, present)
            return P("Opt", (other,), [sub(v, d - 1)], pred())
        p = wrap(v, d, "W")
        if rng.random() < 0.4:
            wraps[v[0]] = p
        return p

    return sub(anchor, depth)


def pattern_nodes(root: P) -> list[P]:
    """Every pattern node, each once, root first."""
    out: list[P] = []
    seen: set[int] = set()
    stack = [root]
    while stack:
        p = stack.pop()
        if id(p) in seen:
            continue
        seen.add(id(p))
        out.append(p)
        stack.extend(reversed(p.inputs or []))
    for i, p in enumerate(out):
        p.name = f"p{i}"
    return out


def _post_order(root: P) -> list[P]:
    """Every pattern node once, each after its inputs."""
    out: list[P] = []
    seen: set[int] = set()

    def visit(p: P) -> None:
        if id(p) not in seen:
            seen.add(id(p))
            for c in p.inputs or []:
                visit(c)
            out.append(p)
    visit(root)
    return out


def shared_wraps(root: P) -> bool:
    """Whether a wrap_type (or split pattern) has several parents (OpenVINO then differs)."""
    parents: dict[int, int] = {}
    for p in pattern_nodes(root):
        for c in p.inputs or []:
            parents[id(c)] = parents.get(id(c), 0) + 1
    return any(parents.get(id(p), 0) > 1 for p in pattern_nodes(root) if p.kind in ("W", "SO"))


# -- building ---------------------------------------------------------------------------------
def build_pattern(root: P) -> tuple[Any, Any]:
    """(netpass pattern, OpenVINO pattern); each node's objects are kept in ``p._built``."""
    import openvino.opset13 as ovo
    import openvino.passes as ovp

    from netpass import ops
    from netpass import pattern as pt

    pattern_nodes(root)  # names the nodes
    for p in _post_order(root):
        ov_in = [c._built["ov"] for c in p.inputs or []]
        ov_out = [x.output(c.index) if c.kind == "SO" else x.output(0)
                  for c, x in zip(p.inputs or [], ov_in)]
        ovpred = None if p.pred is None else _ov_pred(p.pred)
        types = [f"opset1.{t}" for t in p.types]
        if p.kind == "L":
            ov_node = ovp.AnyInput() if ovpred is None else ovp.AnyInput(ovpred)
        elif p.kind in ("W", "Opt"):
            cls = ovp.WrapType if p.kind == "W" else ovp.Optional
            args: list[Any] = [types]
            if p.inputs is not None:
                args.append(ov_out)
            if ovpred is not None:
                args.append(ovpred)
            ov_node = cls(*args)
        elif p.kind == "Or":
            ov_node = ovp.Or(ov_out)
        else:
            ov_node = ovo.split(ov_out[0], ov_out[1], 2)
        ov_node.set_friendly_name(p.name)
        p._built["ov"] = ov_node
        np_in = [c._built["np"] for c in p.inputs or []]
        if (p.kind == "W" and len(np_in) == 2 and all(t in COMMUTATIVE for t in p.types)
                and ov_out[1] < ov_out[0]):
            np_in.reverse()  # OpenVINO tries commutative arguments in address order
        npred = None if p.pred is None else _np_pred(p.pred)
        np_types = tuple(getattr(ops, t) for t in p.types)
        if p.kind == "L":
            np_node: Any = pt.any_input(npred, name=p.name)
        elif p.kind == "W":
            np_node = pt.wrap_type(np_types, None if p.inputs is None else np_in, npred,
                                   name=p.name)
        elif p.kind == "Opt":
            np_node = pt.optional(np_types, np_in, npred, name=p.name)
        elif p.kind == "Or":
            np_node = pt.Or(np_in, name=p.name)
        else:
            np_node = pt.wrap_type(ops.Split, np_in, name=p.name).output(p.index)
        p._built["np"] = np_node
    return root._built["np"], root._built["ov"]


# -- comparing --------------------------------------------------------------------------------
def _np_map(m: Any, nodes: list[P]) -> dict[str, tuple[str, int]]:
    vm = m.pattern_value_map
    out = {}
    for p in nodes:
        key = p._built["np"].owner if p.kind == "SO" else p._built["np"]
        if key in vm:
            v = vm[key]
            out[p.name] = (v.node.friendly_name, -1 if p.kind == "SO" else v.index)
    return out


def _ov_map(m: Any, nodes: list[P]) -> dict[str, tuple[str, int]]:
    names = {p.name: p for p in nodes}
    out = {}
    for k, v in m.get_pattern_value_map().items():
        p = names.get(k.get_friendly_name())
        if p is not None:
            out[p.name] = (v.get_node().get_friendly_name(), -1 if p.kind == "SO" else
                           v.get_index())
    return out


def compare(graph: list[GNode], root: P, by_node: bool = True) -> list[str]:
    """Differences between the libraries' matches of ``root`` at every value of ``graph``."""
    import openvino.passes as ovp
    from pattern_ov_graphs import build

    from netpass.pattern import Matcher

    nodes = pattern_nodes(root)
    np_pat, ov_pat = build_pattern(root)
    np_model, np_nodes = build(graph, "np")
    ov_model, ov_nodes = build(graph, "ov")
    ov_root = ov_pat.output(root.index) if root.kind == "SO" else ov_pat
    npm, ovm = Matcher(np_pat, "fuzz"), ovp.Matcher(ov_root, "fuzz")
    loose = shared_wraps(root)
    diffs = []
    live = {n.friendly_name for n in np_model.get_ordered_ops()}
    for i, g in enumerate(graph):
        if f"n{i}" not in live:
            continue
        for k in range(n_outputs(g)):
            a = npm.match(np_nodes[i].output(k))
            b = ovm.match(ov_nodes[i].output(k))
            where = f"n{i}:{k} ({g.kind})"
            if a != b and not (loose and b and not a):
                diffs.append(f"{where}: netpass {a}, openvino {b}")
            elif a and b:
                ma, mb = _np_map(npm, nodes), _ov_map(ovm, nodes)
                if ma != mb:
                    diffs.append(f"{where}: maps differ: netpass {ma}, openvino {mb}")
        if by_node and root.kind != "SO" and n_outputs(g):
            a, b = npm.match(np_nodes[i]), ovm.match(ov_nodes[i])
            if a != b and not (loose and b and not a):
                diffs.append(f"n{i} (as node): netpass {a}, openvino {b}")
    return diffs


def describe(p: P, seen: set[int] | None = None) -> str:
    """The pattern as text (shared nodes by name after their first appearance)."""
    seen = set() if seen is None else seen
    if id(p) in seen:
        return p.name
    seen.add(id(p))
    pred = "" if p.pred is None else f" pred={p.pred}"
    head = {"L": "any_input", "W": f"wrap_type{p.types}", "Or": "Or",
            "Opt": f"optional{p.types}", "SO": f"split.output({p.index})"}[p.kind]
    inner = "" if p.inputs is None else "[" + ", ".join(describe(c, seen) for c in p.inputs) + "]"
    return f"{p.name}:{head}{pred}{inner}"
