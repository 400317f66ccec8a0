"""Col2Im: 2-D against torch's fold and OpenVINO's Col2Im-15 (netpass's IR, IR round trip),
batched and not, strides, dilations and pads; 3-D against onnx's reference evaluator; the
runtime. rtol 1e-5, atol 1e-6."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from opcheck import assert_close, check_import, check_ir_round_trip, check_openvino, one_node

import netpass
from netpass import Model, opset
from netpass.testing import RUNTIME_DEVICE

RNG = np.random.default_rng(18)


def _blocks(size, kernel, strides, dilations, pads):
    return [(s + 2 * p - d * (k - 1) - 1) // st + 1
            for s, k, st, d, p in zip(size, kernel, strides, dilations, pads)]


@pytest.mark.parametrize("size,kernel,strides,dilations,pads", [
    ((5, 5), (2, 2), (1, 1), (1, 1), (0, 0)),
    ((6, 7), (3, 2), (2, 1), (1, 2), (1, 0)),
    ((4, 6), (2, 3), (1, 2), (2, 1), (1, 1))])
@pytest.mark.parametrize("batched", [True, False])
def test_col2im_2d_matches_torch_and_openvino(tmp_path, size, kernel, strides, dilations, pads,
                                              batched):
    c = 3
    n_blocks = int(np.prod(_blocks(size, kernel, strides, dilations, pads)))
    shape = (2, c * int(np.prod(kernel)), n_blocks)
    x = RNG.standard_normal(shape if batched else shape[1:]).astype(np.float32)
    p = opset.parameter(list(x.shape), "f32", "x")
    node = opset.col2im(p, size, kernel, strides, dilations, pads, pads)
    model = Model([node], [p])
    ref = torch.nn.functional.fold(torch.from_numpy(x), size, kernel, dilation=dilations,
                                   padding=pads, stride=strides).numpy()
    got = next(iter(netpass.reference.infer(model, {"x": x}).values()))
    assert node.output(0).partial_shape.to_shape() == ref.shape
    assert_close(got, ref, 1e-5, 1e-6)
    check_ir_round_trip(model, {"x": x}, tmp_path)
    check_openvino(model, {"x": x}, tmp_path, rtol=1e-5, atol=1e-6)
    req = netpass.compile_model(model, device=RUNTIME_DEVICE).create_infer_request()
    assert_close(next(iter(req.infer({"x": x}).values())), ref, 1e-5, 1e-6)


def test_col2im_3d_matches_onnx_reference():
    size, kernel = np.array([4, 5, 3], np.int64), np.array([2, 2, 2], np.int64)
    x = RNG.standard_normal((1, 2 * 8, 3 * 4 * 2)).astype(np.float32)
    proto = one_node("Col2Im", {"x": x}, opset=18, initializers={"size": size, "k": kernel})
    check_import(proto, {"x": x}, engine="reference")
