"""Ported from OpenVINO ``src/common/transformations/tests/op_conversions/
batch_norm_decomposition_test.cpp`` (BatchNormDecomposition).

netpass's decomposition is deliberately ``x * scale + shift`` with ``[C, 1, ...]`` constants
(``scale = gamma / sqrt(var + eps)``, ``shift = beta - mean * scale``; netpass/ngraph_passes/
common/batch_norm_decomposition.py, docs/transformations.md), one Multiply and one Add, where
OpenVINO builds ``(x - mean) * scale + beta`` with ``[1, C, 1, ...]`` constants (or a
``ShapeOf``-built shape for Parameter statistics). Each case is therefore checked against
netpass's form structurally, and against OpenVINO's expected model by value.

Found and fixed: the decomposition gave ``fused_names`` only to its last ops (``scale``,
``shift``, the final Add); the Sqrt, Reshapes and Multiplies had none, which OpenVINO's
``TransformationTestsF`` (and netpass's) rt_info check rejects.
"""
from __future__ import annotations

import numpy as np
import pytest
from ov_port import model_of
from ov_values import feeds, port, same_values

from netpass import opset
from netpass.core.shape import PartialShape
from netpass.ngraph_passes.common import BatchNormDecomposition

EPS = 0.001


def _const(v, shape):
    return opset.constant(np.full(shape, v, np.float32))


def _ov_ref_static(shape):
    """OpenVINO's expected model for gamma = beta = mean = var = 3 (C = 3)."""
    x = opset.parameter(shape, np.float32)
    y = opset.add(opset.multiply(opset.add(x, _const(-3, [1, 3, 1, 1])),
                                 _const(1.7317622900009155, [1, 3, 1, 1])),
                  _const(3, [1, 3, 1, 1]))
    return model_of([y], [x])


@pytest.mark.parametrize("shape", [[-1, -1, -1, -1], [2, 3, 4, 5]])
def test_static_rank(shape):
    """``BatchNormDecompositionStaticRankOpset1 / Opset5`` (netpass has one BatchNormInference)."""
    x = opset.parameter(shape, np.float32)
    bn = opset.batch_norm_inference(x, *(_const(3, [3]) for _ in range(4)), EPS)
    model = model_of([bn], [x])
    scale = np.float32(3) / np.sqrt(np.float32(3) + np.float32(EPS))
    x = opset.parameter(shape, np.float32)
    ref = model_of([opset.add(opset.multiply(x, _const(scale, [3, 1, 1])),
                              _const(np.float32(3) - np.float32(3) * scale, [3, 1, 1]))], [x])
    values = feeds(model, {0: [2, 3, 4, 5]})
    after = port(model, ref, BatchNormDecomposition(), inputs=values)
    same_values(after, _ov_ref_static(shape), values, rtol=1e-5, atol=1e-5)


def test_dynamic_statistics():
    """``BatchNormDecompositionDynamicShapesOpset1 / Opset5``: gamma, beta, mean and var are
    Parameters of shape ``[?]``."""
    def params():
        return [opset.parameter([-1, -1, -1, -1], np.float32)] + \
            [opset.parameter([-1], np.float32) for _ in range(4)]
    x, g, b, m, v = params()
    model = model_of([opset.batch_norm_inference(x, g, b, m, v, EPS)], [x, g, b, m, v])
    x, g, b, m, v = params()
    inv = opset.divide(g, opset.sqrt(opset.add(v, opset.constant(np.float32(EPS)))))
    shift = opset.subtract(b, opset.multiply(m, inv))
    shape = opset.constant(np.array([-1, 1, 1], np.int64))
    ref = model_of([opset.add(opset.multiply(x, opset.reshape(inv, shape, False)),
                              opset.reshape(shift, shape, False))], [x, g, b, m, v])
    values = feeds(model, {0: [2, 3, 4, 5], 1: [3], 2: [3], 3: [3], 4: [3]})
    values[model.input_names[4]] = np.abs(values[model.input_names[4]])  # a variance
    after = port(model, ref, BatchNormDecomposition(), inputs=values, rtol=1e-5, atol=1e-5)
    # OpenVINO's expected model, by value: (x - mean) * gamma / sqrt(var + eps) + beta
    x, g, b, m, v = params()
    c = [1, 3, 1, 1]
    ov = opset.add(opset.multiply(opset.subtract(x, opset.reshape(m, c, False)),
                                  opset.reshape(opset.divide(g, opset.sqrt(opset.add(
                                      v, opset.constant(np.float32(EPS))))), c, False)),
                   opset.reshape(b, c, False))
    same_values(after, model_of([ov], [x, g, b, m, v]), values, rtol=1e-5, atol=1e-5)


def test_dynamic_rank():
    """``BatchNormDecompositionDynamicRank``: unchanged."""
    x = opset.parameter(PartialShape.dynamic(), np.float32)
    bn = opset.batch_norm_inference(x, *(_const(3, [3]) for _ in range(4)), EPS)
    port(model_of([bn], [x]), None, BatchNormDecomposition(), numeric=False)
