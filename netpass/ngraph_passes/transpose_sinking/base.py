"""Bases of the sinking passes: a forward pass matches an op with a transposed input and moves
the Transpose below it; a backward pass matches a Transpose below an op whose consumers are
all the same Transpose and moves it above. Both consult the transformation callback first."""
from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from ...core.boundary import Constant
from ...core.node import Node
from ...core.types import Type
from ...ops.movement import Transpose
from ...passes import MatcherPass
from ...pattern import Matcher, binds, wrap_type
from ..utils import static_rank
from .utils import (
    MatchedOrder,
    TransposeInput,
    consumer_transposes_order,
    first_transpose_input,
    has_transpose_input,
    update_forward_sinking_ability,
)


class TSForwardBase(MatcherPass):
    """Subclasses set ``TYPES`` (op type or family names), ``INDICES`` (inputs that may carry
    the Transpose; None = all) and implement ``applicable`` and ``sink``.

    When the callback refuses, or the op turns out not to allow the move, the Transpose is
    marked ``no_transpose_sinking`` if one of its consumers is an op forward sinking cannot
    pass (OpenVINO's TSForwardBase; ``MARK_ON_FAILURE = False`` for the passes OpenVINO writes
    as plain matchers, which mark only on a refusing callback)."""

    TYPES: ClassVar[tuple[type[Node], ...]] = ()
    INDICES: ClassVar[Sequence[int] | None] = None
    MARK_ON_FAILURE: ClassVar[bool] = True

    def __init__(self) -> None:
        super().__init__()
        # The TSFuse of the same traversal, when it is the first matcher rooted at a
        # Transpose there (TSGeneralForward sets it): a step then cancels itself the Transpose
        # pairs that TSFuse would remove right after it.
        self.fuser: MatcherPass | None = None
        pattern = wrap_type(self.TYPES, predicate=has_transpose_input(self.INDICES))

        def callback(m: Matcher) -> bool:
            main = m.match_root
            info = first_transpose_input(main, self.INDICES)
            if info is None:
                return False
            if self.transformation_callback(main):
                update_forward_sinking_ability(info.transpose)
                return False
            # Bypassing a Transpose of a dynamic-rank value would lose the rank it proves.
            if static_rank(info.transpose.input_value(0)) is None or not self.applicable(main,
                                                                                         info):
                if self.MARK_ON_FAILURE:
                    update_forward_sinking_ability(info.transpose)
                return False
            info.cancel = self._fuser_cancels()
            for n in self.sink(main, info):
                self.register_new_node(n)
            return True

        self.register_matcher(Matcher(pattern, type(self).__name__), callback)

    def _fuser_cancels(self) -> bool:
        """``fuser`` runs and its callback refuses nothing: every cancelling pair is removed."""
        fuser = self.fuser
        return fuser is not None and fuser.is_enabled() and \
            not fuser.pass_config.has_callback(type(fuser))

    def applicable(self, main: Node, info: TransposeInput) -> bool:
        return True

    def sink(self, main: Node, info: TransposeInput) -> list[Node]:
        raise NotImplementedError


class TSBackwardBase(MatcherPass):
    """Matched at a Transpose fed by one of ``TYPES`` whose consumers are all unmarked
    Transposes with one order; ``sink`` moves that order above the op."""

    TYPES: ClassVar[tuple[type[Node], ...]] = ()

    def __init__(self) -> None:
        super().__init__()
        # The predicate's order, bound in the match for the callback (computing it again
        # there cost ~4% of transpose sinking; a cache of the pass's own outlived the match).
        sinkable = binds(lambda o: consumer_transposes_order(o.node), "sinkable")
        main_p = wrap_type(self.TYPES, predicate=sinkable)
        root = wrap_type(Transpose, [main_p, wrap_type(Constant)])

        def callback(m: Matcher) -> bool:
            main = m.pattern_value_map[main_p].node
            order: list[int] | None = m.symbols.get(sinkable)
            if order is None or not self.applicable(main, order):
                return False
            if self.transformation_callback(main):
                return False
            order_value = m.match_root.input_value(1)
            for n in self.sink(main, MatchedOrder(order, order_value), order_value.element_type):
                self.register_new_node(n)
            return True

        self.register_matcher(Matcher(root, type(self).__name__), callback)

    def applicable(self, main: Node, order: list[int]) -> bool:
        return True

    def sink(self, main: Node, order: list[int], order_type: Type) -> list[Node]:
        raise NotImplementedError
