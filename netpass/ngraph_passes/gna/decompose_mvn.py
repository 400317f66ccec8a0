"""DecomposeMVN: MVN-6 -> ReduceMean, Subtract, Multiply, Sqrt and Divide (turned into a
Multiply by ConvertDivide later), ops that transpose sinking moves Transposes through."""
from __future__ import annotations

import numpy as np

from ...core.graph_util import copy_runtime_info, replace_node
from ...ops.elementwise import Add, Divide, Multiply, Sqrt, Subtract
from ...ops.normalization import MVN
from ...ops.reduction import ReduceMean
from ...passes import MatcherPass
from ...pattern import Matcher, wrap_type
from ..utils import built_nodes, const, make


class DecomposeMVN(MatcherPass):
    """MVN-6 -> ReduceMean, Subtract, Multiply, Sqrt, Divide."""

    def __init__(self) -> None:
        super().__init__()
        pattern = wrap_type(MVN, predicate=lambda o: o.element_type.is_real)

        def callback(m: Matcher) -> bool:
            mvn = m.match_root
            if self.transformation_callback(mvn):
                return False
            x, axes = mvn.input_values()
            dt = x.element_type.dtype
            made = [make(ReduceMean, [x, axes], keep_dims=True)]
            made.append(make(Subtract, [x, made[-1]]))
            d = made[-1]
            if mvn.normalize_variance:
                eps = const(np.array(mvn.eps, dtype=dt))
                var = make(ReduceMean, [make(Multiply, [d, d]), axes], keep_dims=True)
                if mvn.eps_mode == "INSIDE_SQRT":
                    den = make(Sqrt, [make(Add, [var, eps])])
                else:
                    den = make(Add, [make(Sqrt, [var]), eps])
                made += [var, den, make(Divide, [d, den])]
            out = made[-1]
            out.friendly_name = mvn.friendly_name
            copy_runtime_info(mvn, built_nodes([out], mvn))
            replace_node(mvn, out)
            return True

        self.register_matcher(Matcher(pattern, "DecomposeMVN"), callback)
