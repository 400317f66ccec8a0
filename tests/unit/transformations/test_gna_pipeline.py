"""GnaTransformationsPipeline on small graphs (model-level checks are in
tests/integration/test_gna_pipeline_models.py)."""
from __future__ import annotations

import numpy as np
from tr_helpers import count, model_of, param, rand, run_checked

from netpass import opset
from netpass.ngraph_passes.gna import GnaTransformationsPipeline, is_transpose_supported
from netpass.prepost import split_pre_post_processing


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


def _layer_norm(h, axis):
    """The decomposed layer norm exporters write (no scale and shift)."""
    axes = opset.constant(np.array([axis], np.int64))
    d = opset.subtract(h, opset.reduce_mean(h, axes, True))
    var = opset.reduce_mean(opset.multiply(d, d), axes, True)
    rsqrt = opset.power(opset.sqrt(opset.add(var, opset.constant(np.float32(1e-5)))),
                        opset.constant(np.float32(-1)))
    return opset.multiply(d, rsqrt)


def _unsupported_transposes_after_split(m):
    split_pre_post_processing(m)
    return [n for n in m.get_ordered_ops()
            if n.type_name == "Transpose" and not is_transpose_supported(n.input_value(0).shape)]


def test_layer_norm_between_two_transposed_regions():
    """A ViT layer: patches [B, C, H, W] -> Reshape [B, C, T] -> Transpose -> residual block
    (layer norm, MatMul) -> final layer norm -> the hidden states and a pooler on the first
    token. Only the Transpose before the block's MatMul stays inside; no Transpose reads another
    one (the rescue's forward stage used to leave the final layer norm's Transpose pair, TSFuse
    refusing a first Transpose with other consumers)."""
    x = param([2, 32, 4, 3])
    h = opset.transpose(opset.reshape(opset.relu(x), [2, 32, 12], False), [0, 2, 1])
    h = opset.add(h, opset.matmul(_layer_norm(h, 2), opset.constant(rand(32, 32)), False, False))
    f = _layer_norm(h, 2)
    first = opset.squeeze(opset.slice(f, [0], [1], [1], [1]), opset.constant(np.array([1], np.int64)))
    pooled = opset.tanh(opset.matmul(first, opset.constant(rand(32, 32, seed=1)), False, False))
    m = model_of([f, pooled], x)
    run_checked(m, GnaTransformationsPipeline(), rtol=1e-4, atol=1e-5)
    left = _unsupported_transposes_after_split(m)
    assert [n.input_value(0).node.type_name for n in left] == ["Multiply"]
    assert all(n.input_value(0).node.type_name != "Transpose"
               for n in m.get_ordered_ops() if n.type_name == "Transpose")


def test_transpose_feeding_a_result_and_a_transpose_is_fused_apart():
    """A GPT-2 key cache: Concat(past, new keys) is a model output and, transposed again, a
    MatMul operand. The two Transposes fuse into one before the MatMul, so the first one
    feeds only the output and leaves with the post-processing."""
    past, k, q = param([2, 4, 4, 8], "past"), param([2, 3, 32], "k"), param([2, 4, 3, 8], "q")
    keys = opset.transpose(opset.reshape(opset.relu(k), [2, 3, 4, 8], False), [0, 2, 1, 3])
    present = opset.concat([past, keys], 2)
    scaled = opset.multiply(opset.transpose(present, [0, 1, 3, 2]), opset.constant(np.float32(0.5)))
    m = model_of([present, opset.matmul(q, scaled, False, False)], [past, k, q])
    run_checked(m, GnaTransformationsPipeline(), rtol=1e-4, atol=1e-5)
    left = _unsupported_transposes_after_split(m)
    assert len(left) == 1 and left[0].output(0).consumers()[0].node.type_name == "MatMul"
