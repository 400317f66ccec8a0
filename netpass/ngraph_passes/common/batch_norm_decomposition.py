"""BatchNormDecomposition: BatchNormInference -> ``x * scale + shift`` with per-channel
constants shaped ``[C, 1, ...]`` (folded when gamma/beta/mean/variance are Constants), so the
elementwise sinking passes move Transposes through it."""
from __future__ import annotations

import numpy as np

from ...core.graph_util import copy_runtime_info, replace_node
from ...ops.elementwise import Add, Divide, Multiply, Sqrt, Subtract
from ...ops.movement import Reshape
from ...ops.normalization import BatchNormInference
from ...passes import MatcherPass
from ...pattern import Matcher, wrap_type
from ..utils import const, make, static_rank


class BatchNormDecomposition(MatcherPass):
    """BatchNormInference -> x * scale + shift, per channel."""

    def __init__(self) -> None:
        super().__init__()
        pattern = wrap_type(BatchNormInference,
                            predicate=lambda o: (static_rank(o) or 0) >= 2
                            and o.element_type.is_real)

        def callback(m: Matcher) -> bool:
            bn = m.match_root
            if self.transformation_callback(bn):
                return False
            # (the inputs' order is the version's: BatchNormInference-1 has data third)
            x, gamma, beta, mean, var = (bn.input_value(i) for i in bn.ORDER)
            rank = static_rank(x)  # (static: the pattern's predicate)
            if rank is None:
                return False
            dt = x.element_type.dtype
            shape = const(np.array([-1] + [1] * (rank - 2), np.int64))
            new: list = []  # every op built, for rt_info (each carries the BN's fused names)

            def op(cls, inputs, **attrs):
                node = make(cls, inputs, **attrs)
                new.append(node)
                return node

            inv = op(Divide, [gamma, op(Sqrt, [op(Add, [var, const(np.array(bn.epsilon, dt))])])])
            shift = op(Subtract, [beta, op(Multiply, [mean, inv])])
            out = op(Add, [op(Multiply, [x, op(Reshape, [inv, shape], special_zero=False)]),
                           op(Reshape, [shift, shape], special_zero=False)])
            out.friendly_name = bn.friendly_name
            copy_runtime_info(bn, new)
            replace_node(bn, out)
            return True

        self.register_matcher(Matcher(pattern, "BatchNormDecomposition"), callback)
