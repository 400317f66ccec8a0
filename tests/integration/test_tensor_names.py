"""Outputs and inputs addressed by every tensor name of their port (OpenVINO's ``get_names()``),
in IR that OpenVINO writes and in ONNX models, on the reference and ``RUNTIME_DEVICE``; the
primary names (``input_names`` / ``output_names``) stay the keys."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import netpass
from netpass.errors import InputError
from netpass.testing import RUNTIME_DEVICE

ov = pytest.importorskip("openvino")
onnx = pytest.importorskip("onnx")


def _named_ir(folder: Path) -> Path:
    """IR written by OpenVINO whose ports carry several tensor names."""
    import openvino.opset1 as o1
    x = o1.parameter([2, 3], np.float32, name="x")
    x.output(0).get_tensor().set_names({"x", "pixels"})
    y = o1.relu(x)
    y.output(0).get_tensor().set_names({"y", "activation"})
    z = o1.negative(x)
    z.output(0).get_tensor().set_names({"z"})
    xml = folder / "named.xml"
    ov.save_model(ov.Model([y, z], [x]), str(xml), compress_to_fp16=False)
    return xml


@pytest.mark.parametrize("device", ["REFERENCE", RUNTIME_DEVICE])
def test_outputs_and_feeds_by_every_tensor_name(device, tmp_path):
    """OpenVINO names an output's Result layer (``Result_N`` or ``y/sink_port_0``) and its
    users address it by the tensor name; an input may be fed by any of its names. The primary
    names (``input_names`` / ``output_names``) keep working, and stay the only keys."""
    xml = _named_ir(tmp_path)
    model = netpass.read_model(xml)
    x = np.float32([[1, -2, 3], [-4, 5, -6]])
    core = ov.Core()
    compiled = core.compile_model(core.read_model(str(xml)), "CPU")
    want = compiled({"pixels": x})
    req = netpass.compile_model(model, device).create_infer_request()
    for feed in ("x", "pixels"):
        out = req.infer({feed: x})
        assert list(out) == model.output_names
        for name in ("y", "activation", "z"):
            assert name in out
            np.testing.assert_array_equal(out[name], want[name])
            np.testing.assert_array_equal(req.get_output(name), want[name])
        for name in model.output_names:
            assert out[name] is out.get(name)
    ref = netpass.reference.infer(model, {"pixels": x})
    np.testing.assert_array_equal(ref["activation"], want["y"])
    with pytest.raises(InputError, match="fed twice"):
        req.infer({"x": x, "pixels": x})
    with pytest.raises(InputError, match="not an input"):
        req.infer({"image": x})


def test_onnx_outputs_by_every_tensor_name():
    """An ONNX graph output behind an Identity: its port carries both the output's name and
    the name of the tensor the Identity passed on; ``infer`` finds the output by either."""
    from onnx import TensorProto, helper
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["t"]), helper.make_node("Identity", ["t"], ["y"]),
         helper.make_node("Neg", ["x"], ["z"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])])
    model = netpass.read_model(helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", 17)]))
    x = np.float32([[1, -2, 3], [-4, 5, -6]])
    assert model.output_names == ["y", "z"]
    for device in ("REFERENCE", RUNTIME_DEVICE):
        out = netpass.compile_model(model, device).create_infer_request().infer({"x": x})
        assert list(out) == ["y", "z"]
        for name in model.output(0).names:
            np.testing.assert_array_equal(out[name], np.maximum(x, 0))
        np.testing.assert_array_equal(out["z"], -x)
