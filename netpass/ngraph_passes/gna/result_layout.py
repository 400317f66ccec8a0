"""ResultsTakeInverseTranspose: a model output that reads a value a stuck Transpose reads too
takes the Transpose's inverse instead, so that the Transpose can sink on up.

Backward sinking moves a Transpose above an op only when every reader of the op's output is a
Transpose of that order. A model output (``z = f(x)``, an inner tensor a user also wants) reading
``f(x)`` beside a Transpose GNA cannot run (``T(f(x))`` on the main path) stops it there, inside
the graph. Read as ``T^-1(T(f(x)))``, the output is the same and the Transpose is the value's
only reader: it sinks on to the model's inputs, and the inverse is at an output, where
split_pre_post_processing takes both to the host. (Whether the Transpose then gets out is
decided by the sinking after this: RescueStuckTransposes keeps the rewrite only where no
Transpose stays stuck.)"""
from __future__ import annotations

from ...core.boundary import Result
from ...core.model import result_name
from ...core.node import Node
from ...ops.movement import Reshape, Squeeze, Transpose
from ...ops.movement import Unsqueeze as _Unsqueeze
from ...passes import MatcherPass
from ...pattern import Matcher, wrap_type
from ..transpose_sinking.utils import transpose_order
from ..utils import graph_consumers, make, reverse_order
from .limitations import at_model_edge, is_transpose_node_supported

_RESHAPES = (Reshape, Squeeze, _Unsqueeze)


def _feeds_only_a_result(node: Node) -> bool:
    """``node`` is a Result, or shape-renaming ops each read once down to one."""
    while isinstance(node, _RESHAPES):
        cons = graph_consumers(node.output(0))
        if len(cons) != 1:
            return False
        node = cons[0].node
    return isinstance(node, Result)


def result_readers(transpose: Node) -> list | None:
    """The readers of ``transpose``'s input other than itself when they all lead only to model
    outputs (and there is one at least), else None."""
    others = [c for c in graph_consumers(transpose.input_value(0)) if c.node is not transpose]
    if not others or not all(_feeds_only_a_result(c.node) for c in others):
        return None
    return others


def yields_to_results(transpose: Node) -> bool:
    """A Transpose of a static shape GNA cannot run, inside the graph, with a constant order,
    whose input model outputs read too (``result_readers``)."""
    return transpose_order(transpose) is not None and \
        transpose.input_value(0).partial_shape.is_static and \
        not is_transpose_node_supported(transpose) and not at_model_edge(transpose) and \
        result_readers(transpose) is not None


class ResultsTakeInverseTranspose(MatcherPass):
    """The module doc's rewrite on each Transpose ``yields_to_results`` accepts."""

    def __init__(self) -> None:
        super().__init__()

        def callback(m: Matcher) -> bool:
            t = m.match_root
            if self.transformation_callback(t) or not yields_to_results(t):
                return False
            order = transpose_order(t)
            assert order is not None  # (yields_to_results checked it)
            inverse = make(Transpose, [t.output(0), reverse_order(order)])
            inverse.friendly_name = f"{t.friendly_name}_inverse"
            for c in result_readers(t) or ():
                if isinstance(c.node, Result):  # (its name may be the value's tensor name)
                    c.node.friendly_name = result_name(c.node)
                c.node.set_argument(c.index, inverse.output(0))
            return True

        self.register_matcher(Matcher(wrap_type(Transpose), "ResultsTakeInverseTranspose"),
                              callback)
