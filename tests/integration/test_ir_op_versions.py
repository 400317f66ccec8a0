"""Every (type, version) OpenVINO's Python opsets build (``openvino.opset1`` .. ``opset16``, the
builders of ``ov_op_versions.py``), saved by OpenVINO (``save_model``, no f16 compression),
read by netpass and run on the reference evaluator and on ``RUNTIME_DEVICE`` against OpenVINO's
CPU plugin (``INFERENCE_PRECISION_HINT`` f32; floats within rtol 1e-4, atol 1e-5, other types
exact), and netpass's own Serialize of what it read run by OpenVINO (``ov_written_ir.check_ir``).

A version netpass has no class for is refused by the reader (never read by the class of another
version, whose rules could read the layer's inputs and attributes with another meaning: GatherND-5
was read as v8 with another shape); ``REFUSED`` lists the ones refused on purpose. Also: a
hand-edited IR with a version no class declares.
"""
from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path

import numpy as np
import pytest

import netpass
from netpass.errors import NetpassError, UnsupportedOpError
from netpass.frontend.ir_reader import op_class, op_classes

ov = pytest.importorskip("openvino")
sys.path.insert(0, str(Path(__file__).resolve().parent))
import ov_op_versions as T  # noqa: E402
import ov_written_ir as h  # noqa: E402

# Builders whose op netpass refuses on purpose (a clean netpass error at read or compile).
REFUSED = {
    "opset16.avg_pool": "AvgPool-16's dilations are not implemented",
    "opset9.roi_align": "OpenVINO's half_pixel aligned mode is not implemented",
    "opset1.interpolate:area-0": "Interpolate-1's area mode (OpenVINO's CPU refuses it too)",
    "opset1.interpolate:area-1": "Interpolate-1's area mode (OpenVINO's CPU refuses it too)",
}


def _save(key: str, folder: Path) -> tuple[Path, list[np.ndarray]]:
    case = T.Case(0)
    model = case.model(T.BUILDERS[key](case))
    xml = folder / "model.xml"
    ov.save_model(model, str(xml), compress_to_fp16=False)
    return xml, case.feeds


@pytest.mark.parametrize("key", sorted(T.BUILDERS))
def test_op_version_as_openvino_computes_it(key, tmp_path):
    xml, feeds = _save(key, tmp_path)
    if key in REFUSED:
        with pytest.raises(NetpassError):
            model = netpass.read_model(xml)
            netpass.compile_model(model, "REFERENCE").create_infer_request().infer(
                dict(zip(model.input_names, feeds)))
        return
    h.check_ir(xml, [feeds])


def _factories() -> set[str]:
    """``"opsetN.name"`` of every op factory of ``openvino.opset1`` .. ``opset16`` (named by
    the module that defines it)."""
    out = set()
    for n in range(1, 17):
        module = importlib.import_module(f"openvino.opset{n}")
        for name, fn in vars(module).items():
            if not name.startswith("_") and inspect.isfunction(fn) \
                    and fn.__module__.startswith("openvino.opset"):
                out.add(f"{fn.__module__.split('.')[1]}.{fn.__name__}")
    return out


def test_every_factory_is_in_the_table():
    built = {k.split(":")[0] for k in T.BUILDERS}
    assert _factories() - built - set(T.NOT_BUILT) == set()
    assert built & set(T.NOT_BUILT) == set()


@pytest.mark.parametrize("key", sorted(T.NOT_BUILT))
def test_types_not_built_have_no_netpass_op(key):
    """Their IR is refused by type; a new netpass op of one of them needs a builder."""
    assert op_classes(T.NOT_BUILT[key]) == []


def test_class_reads_its_declared_versions_only():
    assert op_class("TopK", "opset3") is op_class("TopK", "opset11")
    assert op_class("Gather", "opset1").version == "opset7"
    assert op_class("Gather", "opset8").version == "opset8"
    assert op_class("Gather", "opset2") is None
    relu = op_class("Relu", "opset1")
    assert relu is not None and relu.ir_versions() == ("opset1",)


@pytest.mark.parametrize("layer, version", [("Relu", "opset99"), ("Gather", "opset2"),
                                            ("Gather", "")])
def test_unknown_version_refused(layer, version, tmp_path):
    """A hand-edited IR: a layer of a version no netpass class declares is refused, naming the
    layer, its type and version, and the versions netpass reads (before, the class of another
    version read it)."""
    import openvino.opset1 as o1
    import openvino.opset8 as o8
    x = o1.parameter([4, 3], np.float32, name="x")
    node = o1.relu(x) if layer == "Relu" else \
        o8.gather(x, o1.constant(np.array([1, 0], np.int64)), o1.constant(np.int64(0)))
    node.set_friendly_name("the_layer")
    xml = tmp_path / "model.xml"
    ov.save_model(ov.Model([node], [x]), str(xml), compress_to_fp16=False)
    text = xml.read_text()
    old = 'type="ReLU" version="opset1"' if layer == "Relu" else 'type="Gather" version="opset8"'
    assert old in text
    xml.write_text(text.replace(old, old.split(" version")[0] + f' version="{version}"'))
    with pytest.raises(UnsupportedOpError, match="the_layer") as info:
        netpass.read_model(xml)
    assert f"not of {version or 'no version'}" in str(info.value)
    assert ("opset1" if layer == "Relu" else "opset1, opset7, opset8") in str(info.value)
