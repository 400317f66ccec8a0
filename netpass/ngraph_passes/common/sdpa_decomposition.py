"""ScaledDotProductAttentionDecomposition: OpenVINO's ScaledDotProductAttention as the chain
the exporters write (``MatMul(q, k^T) * scale [+ mask] -> Softmax -> MatMul(v)``), which the
runtime fuses into one attention kernel and the layout passes see through. The causal mask is
a constant where the sequence lengths are static, else built from the shapes (key j masked
for query i when j > i). An SDPA with a ``sink`` input stays whole (the host evaluates it)."""
from __future__ import annotations

import numpy as np

from ...core.boundary import Constant
from ...core.graph_util import copy_runtime_info, replace_node
from ...core.node import Node, Output
from ...core.types import boolean
from ...ops.attention import ScaledDotProductAttention
from ...ops.elementwise import Add, Convert, Divide, Greater, Multiply, Select, Sqrt
from ...ops.indexing import Gather
from ...ops.matmul import MatMul
from ...ops.movement import Unsqueeze
from ...ops.normalization import Softmax
from ...ops.shape_ops import Range, ShapeOf
from ...passes import MatcherPass
from ...pattern import Matcher, wrap_type
from ..utils import built_nodes, const, make


def _dim(x: Output, index: int) -> Node:
    """Dim ``index`` (negative from the end) of ``x``'s shape, as an i64 scalar."""
    return make(Gather, [make(ShapeOf, [x]), const(np.int64(index)), const(np.int64(0))])


def _is_zero(x: Output) -> bool:
    node = x.node
    return isinstance(node, Constant) and not np.any(node.value)


def _causal_masked(q: Output, k: Output) -> Output:
    """Boolean [L, S]: True where key j lies after query i."""
    ql, kl = q.partial_shape[-2], k.partial_shape[-2]
    if ql.is_static and kl.is_static:
        L, S = ql.get_length(), kl.get_length()
        return const(np.arange(S)[None, :] > np.arange(L)[:, None])
    one, zero = const(np.int64(1)), const(np.int64(0))
    rows = make(Unsqueeze, [make(Range, [zero, _dim(q, -2), one]), const(np.int64(1))])
    cols = make(Range, [zero, _dim(k, -2), one])
    return make(Greater, [cols, rows]).output(0)


def _scale(node: Node, q: Output) -> Output:
    dtype = q.element_type.dtype
    if node.get_input_size() > 4:
        return node.input_value(4)
    e = q.partial_shape[-1]
    if e.is_static:
        return const(np.array(1.0 / np.sqrt(e.get_length()), dtype))
    size = make(Convert, [_dim(q, -1)], destination_type=q.element_type)
    return make(Divide, [const(np.array(1.0, dtype)), make(Sqrt, [size])]).output(0)


class ScaledDotProductAttentionDecomposition(MatcherPass):
    """ScaledDotProductAttention as MatMul, Softmax, MatMul.

    The scale and the mask go between the first MatMul and the Softmax; an SDPA with a sink
    input or dynamic ranks stays whole."""

    def __init__(self) -> None:
        super().__init__()
        pattern = wrap_type(ScaledDotProductAttention)

        def callback(m: Matcher) -> bool:
            sdpa = m.match_root
            q, k, v = sdpa.input_values()[:3]
            if self.transformation_callback(sdpa) or sdpa.get_input_size() > 5 or \
                    not q.partial_shape.rank_is_static or not k.partial_shape.rank_is_static \
                    or q.element_type.dtype is None:
                return False
            dtype = q.element_type.dtype
            scores = make(Multiply, [make(MatMul, [q, k], transpose_b=True), _scale(sdpa, q)])
            if sdpa.causal:
                scores = make(Select, [_causal_masked(q, k), const(np.array(-np.inf, dtype)),
                                       scores])
            elif sdpa.get_input_size() > 3 and not _is_zero(mask := sdpa.input_value(3)):
                scores = make(Select, [mask, scores, const(np.array(-np.inf, dtype))]) \
                    if mask.element_type is boolean else make(Add, [scores, mask])
            out = make(MatMul, [make(Softmax, [scores], axis=-1), v])
            out.friendly_name = sdpa.friendly_name
            copy_runtime_info(sdpa, built_nodes([out], sdpa))
            replace_node(sdpa, out)
            return True

        self.register_matcher(Matcher(pattern, "ScaledDotProductAttentionDecomposition"),
                              callback)
