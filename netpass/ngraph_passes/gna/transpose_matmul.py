"""TransposeMatMulForward: a Transpose GNA cannot run that only reorders the batch and row
axes of a MatMul's first input moves after the MatMul.

``MatMul(transpose(x, order), W) == transpose(MatMul(x, W), order)`` when ``order`` keeps the
last (contracted) axis in place and ``W`` is 2-D: every row is multiplied on its own, so rows
may be reordered before or after. Transpose sinking has no MatMul rule; without this one the
Transpose in front of a batch-first head (``[T, B, F] -> [B, T, F]`` with a batch > 1, as a
batch-first bidirectional LSTM exports) became a Gather inside the graph. After the MatMul the
Transpose sinks on (through the bias Add) to the Result.
"""
from __future__ import annotations

from ...core.boundary import Constant
from ...core.graph_util import copy_runtime_info
from ...ops.matmul import MatMul
from ...ops.movement import Transpose
from ...passes import MatcherPass
from ...pattern import Matcher, wrap_type
from ..utils import const, make, static_rank, static_shape
from .limitations import const_order, is_transpose_node_supported


def _movable(t_out) -> bool:
    t = t_out.node
    order = const_order(t)
    return order is not None and len(order) >= 3 and order[-1] == len(order) - 1 \
        and len(t_out.consumers()) == 1 and static_shape(t.input_value(0)) is not None \
        and not is_transpose_node_supported(t)


class TransposeMatMulForward(MatcherPass):
    """Moves a batch/row Transpose of a MatMul input after it."""

    def __init__(self) -> None:
        super().__init__()
        transpose = wrap_type(Transpose, predicate=_movable)
        pattern = wrap_type(MatMul, [transpose, wrap_type(Constant)],
                            predicate=lambda o: not o.node.transpose_a)

        def callback(m: Matcher) -> bool:
            mm = m.match_root
            t = m.pattern_value_map[transpose].node
            if self.transformation_callback(mm) or static_rank(mm.input_value(1)) != 2:
                return False
            mm.input(0).replace_source_output(t.input_value(0))
            mm.validate_and_infer_types()
            out = mm.output(0)
            after = make(Transpose, [out, const(t.input_value(1).node.value)])
            out.replace(after.output(0))
            out.names.clear()   # the model's tensor names now belong to the Transpose
            after.friendly_name, mm.friendly_name = mm.friendly_name, after.name
            copy_runtime_info([t, mm], after)
            self.register_new_node(after)
            return True

        self.register_matcher(Matcher(pattern, "TransposeMatMulForward"), callback)
