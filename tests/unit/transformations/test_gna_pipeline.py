"""GnaTransformationsPipeline on small graphs (model-level checks are in
tests/integration/test_gna_pipeline_models.py)."""
from __future__ import annotations

import numpy as np
from tr_helpers import count, model_of, param, rand, run_checked

from netpass import opset
from netpass.ngraph_passes.gna import GnaTransformationsPipeline, is_transpose_supported


def _inner_unsupported_transposes(m):
    bad = []
    for n in m.get_ordered_ops():
        if n.type_name == "Transpose" and not is_transpose_supported(n.input_value(0).shape):
            edge_in = n.input_value(0).node.type_name == "Parameter"
            edge_out = all(c.node.type_name == "Result" for c in n.output(0).consumers())
            if not (edge_in or edge_out):
                bad.append(n)
    return bad


def test_cnn_ends_with_gna_ops_and_edge_transposes_only():
    x = param([1, 3, 10, 10])
    conv = opset.convolution(x, opset.constant(rand(4, 3, 3, 3)), [1, 1], [1, 1], [1, 1], [1, 1])
    pool = opset.max_pool(opset.relu(conv), [2, 2], [1, 1], [0, 0], [0, 0], [2, 2])
    flat = opset.reshape(pool.output(0), [1, -1], False)
    out = opset.divide(opset.matmul(flat, opset.constant(rand(100, 6)), False, False), opset.constant(np.float32(2)))
    m = model_of(out, x)
    run_checked(m, GnaTransformationsPipeline(), rtol=1e-4, atol=1e-5)
    assert count(m, "Convolution", "MaxPool", "Divide", "Gather") == 0
    assert count(m, "GNAConvolution") == 1 and count(m, "GNAMaxPool") == 1
    assert not _inner_unsupported_transposes(m)


def test_slice_workaround_gives_crop():
    x = param([1, 3, 8, 8])
    conv = opset.convolution(x, opset.constant(rand(8, 3, 1, 1)), [1, 1], [0, 0], [0, 0], [1, 1])
    m = model_of(opset.relu(opset.slice(conv, [2], [6], [1], [1])), x)
    run_checked(m, GnaTransformationsPipeline(), rtol=1e-4, atol=1e-5)
    assert count(m, "Slice", "StridedSlice") == 0 and count(m, "CropIE") == 1


def test_lstm_cells_are_decomposed():
    x = param([2, 5])
    cell = opset.lstm_cell(x, opset.constant(rand(2, 4)), opset.constant(rand(2, 4)), opset.constant(rand(16, 5)),
                           opset.constant(rand(16, 4)), opset.constant(rand(16)), 4)
    m = model_of([cell.output(0), cell.output(1)], x)
    run_checked(m, GnaTransformationsPipeline())
    assert count(m, "LSTMCell") == 0
