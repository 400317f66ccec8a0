"""MaxUnpool against onnxruntime: MaxPool's values and indices unpooled (strides, an explicit
larger output_shape against onnx's reference), random data; the runtime. Exact."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from opcheck import check_runtime, expected

import netpass

RNG = np.random.default_rng(11)


@pytest.mark.parametrize("shape,attrs,out_shape", [
    ((1, 2, 6, 6), {"kernel_shape": [2, 2], "strides": [2, 2]}, None),
    ((2, 1, 7, 5), {"kernel_shape": [3, 1], "strides": [2, 1]}, None),
    ((1, 3, 6, 4), {"kernel_shape": [2, 2], "strides": [2, 2]}, [1, 3, 7, 6]),
])
def test_max_unpool_matches_onnxruntime(shape, attrs, out_shape):
    nodes = [helper.make_node("MaxPool", ["x"], ["p", "i"], **attrs),
             helper.make_node("MaxUnpool", ["p", "i"] + (["s"] if out_shape else []), ["y"],
                              **attrs)]
    inits = [helper.make_tensor("s", TensorProto.INT64, [4], out_shape)] if out_shape else []
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, shape)],
                              [helper.make_tensor_value_info("y", 1, None)], inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    proto.ir_version = 8
    x = RNG.standard_normal(shape).astype(np.float32)
    m = netpass.read_model(proto)
    got = netpass.reference.infer(m, {"x": x})["y"]
    # a larger output_shape: onnxruntime counts the indices over it, the specification's
    # reference (and the backend suite) over the inferred shape, placed in its corner
    engine = "reference" if out_shape else "ort"
    np.testing.assert_array_equal(got, expected(proto, {"x": x}, engine)[0])
    check_runtime(m, {"x": x}, rtol=0, atol=0)
