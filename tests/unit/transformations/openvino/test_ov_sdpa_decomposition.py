"""Ported from OpenVINO ``src/common/transformations/tests/op_conversions/
scaled_dot_product_decomposition_test.cpp`` (ScaledDotProductAttentionDecomposition).

OpenVINO's expected graph scales the query before the first MatMul, transposes the key with
a ``Range``/``Concat``-built order and builds the mask with ``ShapeOf`` arithmetic; netpass's
decomposition is the exporters' chain ``MatMul(q, k, transpose_b) * scale [+ mask] ->
Softmax -> MatMul(v)`` (docs/transformations.md), so every case is checked by value against
the SDPA op's own evaluation (random data, the shapes of OpenVINO's case, dynamic dims made
concrete), with OpenVINO's rt_info and unique-name checks.

Found and fixed: the decomposition gave ``fused_names`` only to the score Multiply, the mask
op and the last MatMul; the first MatMul, the Softmax and the causal mask's ops had none.
"""
from __future__ import annotations

import numpy as np
import pytest
from ov_values import feeds, port_by_value

from netpass import Model, opset
from netpass.ngraph_passes.common import ScaledDotProductAttentionDecomposition

NOT_PORTED = {
    "ScaledDotProductAttentionDecomposition with sinks":
        "netpass keeps an SDPA with a sink input whole (the host evaluates it; docs)",
}

# name: (query, key, value, mask, scale (None: no input; "const": 0.125), causal, concrete
# shapes for q, k, v, mask)
CASES = {
    "StaticBasic": ([1, 32, 32], [1, 32, 32], [1, 32, 32], [1, 32, 32], [1], False, None),
    "StaticBroadcastKey": ([2, 1, 3, 1], [1, 7, 4, 1], [2, 7, 4, 1], [1, 1, 3, 4], [1], False,
                           None),
    "StaticBroadcastQuery": ([1, 7, 3, 4], [2, 1, 1, 4], [1, 1, 1, 6], [1, 1, 3, 1], [], False,
                             None),
    "CasualPartiallyDynamic": ([-1, -1, 24, 64], [-1, -1, 24, 64], [-1, -1, -1, 64],
                               [-1, -1, -1, -1], None, True,
                               [[1, 2, 24, 64], [1, 2, 24, 64], [1, 2, 24, 64], [1, 2, 24, 24]]),
    "Dynamic": ([-1, -1, -1], [-1, -1, -1], [-1, -1, -1], [-1, -1, -1], [], False,
                [[2, 5, 8], [2, 6, 8], [2, 6, 3], [2, 5, 6]]),
    "ScalarScale_MultiplyAfterMatMul": ([1, 32, 64], [1, 32, 64], [1, 32, 64], [1, 32, 32],
                                        "const", False, None),
    "DynamicScale": ([-1, -1, 64], [-1, -1, 64], [-1, -1, 64], [-1, -1, -1], [1], False,
                     [[2, 5, 64], [2, 7, 64], [2, 7, 64], [2, 5, 7]]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_sdpa_decomposition(name):
    qs, ks, vs, ms, scale_shape, causal, concrete = CASES[name]
    q, k, v, mask = (opset.parameter(s, np.float32) for s in (qs, ks, vs, ms))
    params = [q, k, v, mask]
    if scale_shape == "const":
        scale = opset.constant(np.float32(0.125))
    elif scale_shape is None:
        scale = None
    else:
        scale = opset.parameter(scale_shape, np.float32)
        params.append(scale)
    sdpa = opset.scaled_dot_product_attention(q, k, v, mask, scale, causal=causal)
    model = Model([opset.result(sdpa.output(0))], params)
    shapes = dict(enumerate(concrete or []))
    values = feeds(model, shapes)
    port_by_value(model, ScaledDotProductAttentionDecomposition(),
                  gone=("ScaledDotProductAttention",), inputs=values, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("static", [True, False])
def test_causal_without_mask_builds_every_op_with_rt_info(static):
    """The causal mask of dynamic lengths is built from ShapeOf/Gather/Range: those ops take
    the SDPA's fused names too (they had none)."""
    s = [1, 2, 5, 8] if static else [1, 2, -1, 8]
    q, k, v = (opset.parameter(s, np.float32) for _ in range(3))
    model = Model([opset.result(opset.scaled_dot_product_attention(q, k, v, causal=True)
                                .output(0))], [q, k, v])
    values = feeds(model, {i: [1, 2, 5, 8] for i in range(3)})
    port_by_value(model, ScaledDotProductAttentionDecomposition(),
                  gone=("ScaledDotProductAttention",), inputs=values)
