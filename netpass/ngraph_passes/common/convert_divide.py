"""ConvertDivide: float ``x / y`` -> ``x * Power(y, -1)`` (folded at once when y is a Constant);
integer Divide stays (its rounding is not a multiplication)."""
from __future__ import annotations

import numpy as np

from ...core.graph_util import copy_runtime_info, replace_node
from ...ops.elementwise import Divide, Multiply, Power
from ...passes import MatcherPass
from ...pattern import Matcher, wrap_type
from ..utils import const, const_value, make


class ConvertDivide(MatcherPass):
    """Float x / y -> x * Power(y, -1); integer Divide stays."""

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
                new = [make(Multiply, [x, recip])]
            else:
                pw = make(Power, [y, const(np.array(-1, dtype=y.element_type.dtype))])
                new = [pw, make(Multiply, [x, pw])]
            mul = new[-1]
            mul.friendly_name = div.friendly_name
            copy_runtime_info(div, new)
            replace_node(div, mul)
            return True

        self.register_matcher(Matcher(pattern, "ConvertDivide"), callback)
