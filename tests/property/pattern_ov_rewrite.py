"""Rewrites run by a Manager in netpass and in OpenVINO over the same drawn graph.

A rewrite is a drawn pattern with an action its callback applies to the matched root when the
root is of a kind the action takes (else it returns False): ``swap_unary`` (a unary op becomes
the next one of Relu -> Abs -> Negative -> Sigmoid, by ``replace_node``; the chain ends, so a
rewrite that registers its new nodes cannot loop), ``swap_binary`` (Add -> Multiply -> Maximum
-> Subtract), ``reverse`` (a commutative op with its arguments swapped), ``remove_unary``
(``replace_output_update_name`` of the op by its input, which may refuse), and ``refuse``
(returns False). Several rewrites share one GraphRewrite, in order. Afterwards both models
must have the same ops in the same order, the same edges, the same friendly names (new nodes
are named after the node they replace) and the same tensor names on every output.
"""
from __future__ import annotations

import random
from typing import Any

from pattern_ov_graphs import COMMUTATIVE, UNARY, GNode, build
from pattern_ov_patterns import P, build_pattern, draw_pattern

ACTIONS = ("swap_unary", "swap_binary", "reverse", "remove_unary", "refuse")
_NEXT = {"Relu": "Abs", "Abs": "Negative", "Negative": "Sigmoid",
         "Add": "Multiply", "Multiply": "Maximum", "Maximum": "Subtract"}


def draw_rewrites(rng: random.Random, graph: list[GNode]) -> list[tuple[P, str, bool]]:
    """1-3 (pattern, action, register the new node) over ``graph``."""
    anchors = [(i, 0) for i, g in enumerate(graph) if g.kind in UNARY + COMMUTATIVE
               + ("Subtract",)] or [(0, 0)]
    out = []
    for _ in range(rng.randint(1, 3)):
        root = draw_pattern(rng, graph, rng.choice(anchors), rng.randint(0, 3))
        action = rng.choice(ACTIONS)
        out.append((root, action, action.startswith("swap") and rng.random() < 0.5))
    return out


def _callback(lib: str, action: str, register: bool, holder: list[Any]) -> Any:
    if lib == "np":
        import netpass
        from netpass import opset as o

        def name(n: Any) -> str:
            return n.friendly_name

        def set_name(n: Any, s: str) -> None:
            n.friendly_name = s
        replace_node, replace_output = netpass.replace_node, netpass.replace_output_update_name
    else:
        import openvino.opset13 as o
        import openvino.utils as ovu

        def name(n: Any) -> str:
            return n.get_friendly_name()

        def set_name(n: Any, s: str) -> None:
            n.set_friendly_name(s)
        replace_node, replace_output = ovu.replace_node, ovu.replace_output_update_name
    make = {"Relu": o.relu, "Abs": o.abs, "Negative": o.negative, "Sigmoid": o.sigmoid,
            "Add": o.add, "Multiply": o.multiply, "Maximum": o.maximum, "Subtract": o.subtract}

    def callback(m: Any) -> bool:
        root = m.match_root if lib == "np" else m.get_match_root()
        kind = root.type_name if lib == "np" else root.get_type_name()
        args = [root.input_value(i) for i in range(len(root.inputs()))]
        if action == "refuse":
            return False
        if action == "remove_unary":
            return kind in UNARY and bool(replace_output(root.output(0), args[0]))
        if action == "reverse" and kind in COMMUTATIVE:
            new = make[kind](args[1], args[0])
        elif action == "swap_unary" and kind in UNARY and kind in _NEXT:
            new = make[_NEXT[kind]](args[0])
        elif action == "swap_binary" and kind in _NEXT and kind not in UNARY:
            new = make[_NEXT[kind]](args[0], args[1])
        else:
            return False
        set_name(new, name(root) + "/r")
        replace_node(root, new)
        if register:
            holder[0].register_new_node(new)
        return True
    return callback


def run(graph: list[GNode], rewrites: list[tuple[P, str, bool]], lib: str,
        backward: bool = False) -> Any:
    """The model rewritten by one Manager holding one (Backward)GraphRewrite of ``rewrites``."""
    model, _ = build(graph, lib)
    if lib == "np":
        from netpass.passes import BackwardGraphRewrite, GraphRewrite, Manager, MatcherPass
        from netpass.pattern import Matcher
    else:
        from openvino.passes import (
            BackwardGraphRewrite,
            GraphRewrite,
            Manager,
            Matcher,
            MatcherPass,
        )
    gr = BackwardGraphRewrite() if backward else GraphRewrite()
    for i, (root, action, register) in enumerate(rewrites):
        pattern = build_pattern(root)[0 if lib == "np" else 1]
        if root.kind == "SO":
            pattern = pattern if lib == "np" else pattern.output(root.index)
        holder: list[Any] = []
        mp = MatcherPass(Matcher(pattern, f"r{i}"), _callback(lib, action, register, holder))
        holder.append(mp)
        gr.add_matcher(mp)
    manager = Manager()
    manager.register_pass(gr)
    manager.run_passes(model)
    return model


def summary(model: Any, lib: str) -> list[Any]:
    """Ops in order: type, friendly name, inputs (producer position, output), tensor names;
    then the model's output names."""
    ops = model.get_ordered_ops()
    if lib == "np":
        pos = {id(n): i for i, n in enumerate(ops)}
        return [(n.type_name, n.friendly_name,
                 [(pos[id(v.node)], v.index) for v in n.input_values()],
                 [sorted(o.names) for o in n.outputs()] if n.type_name != "Result" else [])
                for n in ops] + [[sorted(o.names) for o in model.outputs]]
    pos = {n.get_friendly_name(): i for i, n in enumerate(ops)}
    return [(n.get_type_name(), n.get_friendly_name(),
             [(pos[v.get_node().get_friendly_name()], v.get_index()) for v in n.input_values()],
             [sorted(o.get_names()) for o in n.outputs()] if n.get_type_name() != "Result"
             else []) for n in ops] + [[sorted(o.get_names()) for o in model.outputs]]


def compare_rewrites(graph: list[GNode], rewrites: list[tuple[P, str, bool]],
                     backward: bool = False) -> list[str]:
    """Where the rewritten models differ, op by op."""
    a = summary(run(graph, rewrites, "np", backward), "np")
    b = summary(run(graph, rewrites, "ov", backward), "ov")
    if len(a) != len(b):
        return [f"op counts differ: netpass {len(a)}, openvino {len(b)}", f"netpass {a}",
                f"openvino {b}"]
    return [f"op {i}: netpass {x}, openvino {y}" for i, (x, y) in enumerate(zip(a, b)) if x != y]
