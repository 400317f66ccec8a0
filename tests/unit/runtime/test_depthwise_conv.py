"""Depthwise convolutions (ONNX Conv with ``group`` = input channels) on the
``depthwise_conv`` kernel (``netpass.runtime.kernels.window``) against onnxruntime on random
data: odd image sizes (partial tiles), strides, dilations, asymmetric and automatic padding,
channel multipliers, batches, 1-D, MobileNet's fused bias and ReLU6, and two shapes on one
request (the dynamic path). Tolerance: relative L2 <= 1e-5 (float32 sums of at most 49
products, in another order than onnxruntime's)."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from graph_blocks import rel_l2_unfloored
from onnx import TensorProto, helper, numpy_helper

import netpass
from netpass.runtime.kernels.window import DW_LOCAL, depthwise_shape, depthwise_tile
from netpass.testing import RUNTIME_DEVICE


def _depthwise_model(rng, c: int, k: tuple, mult: int = 1, relu6: bool = False, **attrs) -> bytes:
    """x [N, c, H(, W)] -> Conv(group=c, c * mult filters of size k) [+ bias, Clip(0, 6)]."""
    nd = len(k)
    w = rng.standard_normal((c * mult, 1) + k).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w")]
    ins = ["x", "w"]
    if relu6:
        inits.append(numpy_helper.from_array(rng.standard_normal(c * mult).astype(np.float32), "b"))
        inits += [numpy_helper.from_array(np.float32(0.0), "lo"), numpy_helper.from_array(np.float32(6.0), "hi")]
        ins.append("b")
    nodes = [helper.make_node("Conv", ins, ["c"], group=c, kernel_shape=list(k), **attrs)]
    out = "c"
    if relu6:
        nodes.append(helper.make_node("Clip", ["c", "lo", "hi"], ["y"]))
        out = "y"
    dims = ["n", c] + [f"s{i}" for i in range(nd)]
    graph = helper.make_graph(nodes, "dw", [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, ["n", c * mult] + [f"o{i}" for i in range(nd)])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model.SerializeToString()


def _check(blob: bytes, shapes: list[tuple], rng, kernel: str = "depthwise_conv"):
    sess = ort.InferenceSession(blob, providers=["CPUExecutionProvider"])
    req = netpass.compile_model(netpass.read_model(blob), RUNTIME_DEVICE, {"TRANSFORMATIONS": "NONE"}).create_infer_request()
    out = sess.get_outputs()[0].name
    for shape in shapes:
        x = rng.standard_normal(shape).astype(np.float32)
        want = sess.run(None, {"x": x})[0]
        got = req.infer({"x": x})[out]
        assert got.shape == want.shape
        assert rel_l2_unfloored(got, want) <= 1e-5
    rreq = req._runtime_request
    assert any(f"void {kernel}(" in key[2] for key in rreq.network.kernel_objects)
    assert rreq.stats["host_fallbacks"] == 0
    return rreq


@pytest.mark.parametrize("c,k,mult,attrs,shapes", [
    (5, (3, 3), 1, {"pads": [1, 1, 1, 1]}, [(2, 5, 13, 11), (1, 5, 40, 9)]),
    (7, (3, 3), 1, {"strides": [2, 2], "pads": [1, 0, 2, 1]}, [(3, 7, 17, 9)]),
    (6, (7, 7), 1, {"pads": [3, 3, 3, 3]}, [(1, 6, 23, 31), (2, 6, 7, 7)]),
    (4, (5, 5), 1, {"strides": [2, 1], "dilations": [2, 3], "pads": [4, 2, 3, 6]}, [(2, 4, 15, 21)]),
    (3, (3, 3), 2, {"dilations": [1, 2]}, [(2, 3, 10, 12)]),
    (4, (3, 5), 1, {"auto_pad": "SAME_UPPER", "strides": [2, 2]}, [(1, 4, 19, 33)]),
    (5, (5,), 1, {"strides": [2], "pads": [2, 1]}, [(2, 5, 37), (1, 5, 70)]),
])
def test_depthwise_matches_onnxruntime(c, k, mult, attrs, shapes, rng):
    _check(_depthwise_model(rng, c, k, mult, **attrs), shapes, rng)


def test_fused_bias_and_relu6(rng):
    """MobileNet's block: the bias and the Clip run in the kernel's epilogue."""
    rreq = _check(_depthwise_model(rng, 9, (3, 3), relu6=True, strides=[2, 2], pads=[1, 1, 1, 1]),
                  [(2, 9, 21, 17), (1, 9, 8, 8)], rng)
    assert rreq.stats["fused"] >= 2


def test_tile_too_large_keeps_the_direct_kernel(rng):
    """A dilation whose input tile exceeds the kernel's local memory runs the direct kernel."""
    rows, cols = depthwise_tile(depthwise_shape(45, 50), 3, 3, 1, 1, 40, 40)
    assert rows * cols > DW_LOCAL
    _check(_depthwise_model(rng, 3, (3, 3), dilations=[40, 40], pads=[40, 40, 40, 40]), [(1, 3, 45, 50)], rng, "conv")
