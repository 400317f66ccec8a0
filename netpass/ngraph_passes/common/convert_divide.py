"""ConvertDivide: float ``x / y`` -> ``x * Power(y, -1)`` (folded at once when y is a Constant);
``1 / y`` -> ``Power(y, -1)`` alone, as OpenVINO's; integer Divide stays (its rounding is not a
multiplication)."""
from __future__ import annotations

import numpy as np

from ...core.graph_util import copy_runtime_info, replace_node
from ...core.node import Output
from ...ops.elementwise import Divide, Multiply, Power
from ...passes import MatcherPass
from ...pattern import Matcher, wrap_type
from ..utils import const, const_value, make


def _is_inverse(x: Output, reciprocal: Output, div_out: Output) -> bool:
    """Whether ``x`` is a Constant of ones that ``x * reciprocal`` only broadcasts into the
    reciprocal's own shape (OpenVINO's ``can_eliminate_eltwise_node``): the Divide is
    ``1 / y`` and the Multiply would change nothing."""
    xv = const_value(x)
    if xv is None or not bool((xv == 1).all()):
        return False
    ps, out = reciprocal.partial_shape, div_out.partial_shape
    if ps.is_static and out.is_static:
        return tuple(ps.to_shape()) == tuple(out.to_shape())
    return xv.size == 1 and ps.rank_is_static and xv.ndim <= len(ps)


class ConvertDivide(MatcherPass):
    """Float x / y -> x * Power(y, -1); integer Divide stays.

    ``1 / y`` becomes ``Power(y, -1)`` alone where the ones broadcast nothing (OpenVINO's
    ``can_eliminate_eltwise_node``)."""

    def __init__(self) -> None:
        super().__init__()
        pattern = wrap_type(Divide, predicate=lambda o: o.element_type.is_real)

        def callback(m: Matcher) -> bool:
            div = m.match_root
            if self.transformation_callback(div):
                return False
            x, y = div.input_value(0), div.input_value(1)
            yv = const_value(y)
            if yv is not None:
                recip = const(np.reciprocal(yv.astype(np.float64)).astype(yv.dtype), y.element_type)
                new = []
            else:
                recip = make(Power, [y, const(np.array(-1, dtype=y.element_type.dtype))]).output(0)
                new = [recip.node]
            if not _is_inverse(x, recip, div.output(0)):
                new.append(make(Multiply, [x, recip]))
            out = new[-1] if new else recip.node
            out.friendly_name = div.friendly_name
            copy_runtime_info(div, new or [out])
            replace_node(div, out)
            return True

        self.register_matcher(Matcher(pattern, "ConvertDivide"), callback)
