"""No raw MemoryError, OSError or RecursionError leaves the public API before the runtime.

read_model, save_model, the passes, reference.infer and compile_model (up to the runtime) walk
graphs with loops, not recursion (a chain of 12000 nodes goes through each of them), and raise
a NetpassError where memory or a file fails them. The CLI shows these as one error line, never
as an internal error.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import netpass
from netpass.errors import (
    FileAccessError,
    ModelFileError,
    ModelFormatError,
    NetpassError,
    OutOfMemoryError,
    PassError,
    ResourceLimitError,
)
from netpass.frontend.files import physical_memory
from netpass.passes import Manager, Serialize, VisualizeTree

ROOT = Path(__file__).resolve().parents[2]
RNG = np.random.default_rng(12)


def _model(nodes, inputs, outputs, initializers=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    return proto


def _vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("NETPASS_DEVICE", "NETPASS_DEBUG")}
    return subprocess.run([sys.executable, "-m", "netpass.cli", *map(str, args)], cwd=ROOT,
                          env=env, capture_output=True, text=True)


# -- depth: a chain of 12000 nodes ----------------------------------------------------------
DEPTH = 12000


def _chain() -> onnx.ModelProto:
    """x -> (Neg, Relu, Reshape, Add c) repeated: 12000 nodes, each reading the one before."""
    shape = numpy_helper.from_array(np.array([2, 8], np.int64), "shape")
    bias = numpy_helper.from_array(RNG.uniform(0.1, 0.2, (2, 8)).astype(np.float32), "bias")
    nodes, prev = [], "x"
    for i in range(DEPTH):
        kind = ("Neg", "Relu", "Reshape", "Add")[i % 4]
        inputs = {"Reshape": [prev, "shape"], "Add": [prev, "bias"]}.get(kind, [prev])
        nodes.append(helper.make_node(kind, inputs, [f"t{i}"], name=f"n{i}"))
        prev = f"t{i}"
    nodes.append(helper.make_node("Identity", [prev], ["y"], name="out"))
    return _model(nodes, [_vi("x", [2, 8])], [_vi("y", [2, 8])], [shape, bias])


@pytest.mark.slow
def test_a_chain_of_12000_nodes_goes_through_every_stage(tmp_path):
    proto = _chain()
    x = RNG.uniform(-1, 1, (2, 8)).astype(np.float32)
    expected = ort.InferenceSession(proto.SerializeToString(),
                                    providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    model = netpass.read_model(proto)
    assert len(model.get_ordered_ops()) > DEPTH
    model.validate_nodes_and_infer_types()
    netpass.lint(model)
    clone = model.clone()
    np.testing.assert_allclose(netpass.reference.infer(clone, {"x": x})["y"], expected,
                               rtol=1e-5, atol=1e-5)
    netpass.save_model(model, tmp_path / "chain.xml")
    netpass.save_model(model, tmp_path / "chain.onnx")
    for path in (tmp_path / "chain.xml", tmp_path / "chain.onnx"):
        back = netpass.read_model(path)
        np.testing.assert_allclose(netpass.reference.infer(back, {"x": x})["y"], expected,
                                   rtol=1e-5, atol=1e-5)
    manager = Manager()
    manager.register_pass(VisualizeTree(tmp_path / "chain.dot"))
    manager.run_passes(model)
    assert (tmp_path / "chain.dot").stat().st_size > DEPTH
    compiled = netpass.compile_model(model, "REFERENCE")  # the GNA pipeline, prepost, legacy
    np.testing.assert_allclose(compiled.create_infer_request().infer({"x": x})["y"], expected,
                               rtol=1e-5, atol=1e-5)


def test_deeply_nested_ir_rt_info_is_refused(tmp_path):
    x = netpass.opset.parameter([2], np.float32, name="x")
    model = netpass.Model([netpass.opset.relu(x)], [x], "m")
    model.rt_info = {"framework": {"name": "test"}}
    path = tmp_path / "m.xml"
    netpass.save_model(model, path)
    xml = path.read_text()
    start, end = xml.index("<rt_info>"), xml.rindex("</rt_info>") + len("</rt_info>")
    deep = "<rt_info>" + "<k>" * 20000 + '<leaf value="v"/>' + "</k>" * 20000 + "</rt_info>"
    path.write_text(xml[:start] + deep + xml[end:])
    with pytest.raises(ModelFormatError, match=r"rt_info> nests deeper than 64 levels"):
        netpass.read_model(path)


# -- memory ------------------------------------------------------------------------------------
def _huge_fill() -> onnx.ModelProto:
    """y = x + ReduceSum(ConstantOfShape([10^6, 10^6], 1.5)): 4 TB of f32 if materialized."""
    s = numpy_helper.from_array(np.array([1_000_000, 1_000_000], np.int64), "s")
    return _model([helper.make_node("ConstantOfShape", ["s"], ["big"], name="fill",
                                    value=numpy_helper.from_array(np.array([1.5], np.float32))),
                   helper.make_node("ReduceSum", ["big"], ["total"], name="sum", keepdims=0),
                   helper.make_node("Add", ["x", "total"], ["y"], name="add")],
                  [_vi("x", [3])], [_vi("y", [3])], [s])


def test_a_huge_constant_of_shape_compiles_and_fails_at_run_time_naming_the_op():
    model = netpass.read_model(_huge_fill())
    compiled = netpass.compile_model(model, "REFERENCE")  # folding left it to run time
    with pytest.raises(OutOfMemoryError, match=r"Broadcast 'fill' ran out of memory") as info:
        compiled.create_infer_request().infer({"x": np.ones(3, np.float32)})
    assert isinstance(info.value, MemoryError) and isinstance(info.value, NetpassError)
    with pytest.raises(OutOfMemoryError, match=r"Broadcast 'fill'"):
        netpass.reference.infer(model, {"x": np.ones(3, np.float32)})


@pytest.mark.parametrize("op", ["Expand", "Tile"])
def test_shape_values_grown_to_10_to_the_12_elements_are_not_propagated(op):
    """Shape(x) grown to 10^12 elements: shape inference keeps no partial value that large (it
    built a list of 10^12 ints and failed with MemoryError), and the model reads."""
    big = numpy_helper.from_array(np.array([10**12], np.int64), "big")
    proto = _model([helper.make_node("Shape", ["x"], ["s"], name="shape"),
                    helper.make_node(op, ["s", "big"], ["grown"], name="grow")],
                   [_vi("x", ["n"])], [helper.make_tensor_value_info("grown", TensorProto.INT64,
                                                                    None)], [big])
    model = netpass.read_model(proto)
    grown = model.results[0].input_value(0)
    assert list(grown.partial_shape.to_shape()) == [10**12] and grown.partial_value is None


def test_external_data_larger_than_memory_is_refused_before_reading(tmp_path):
    memory = physical_memory()
    if memory is None:
        pytest.skip("the OS does not report its memory size")
    count = memory // 4 + 1
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[count])
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "w.bin"), ("offset", "0"), ("length", str(count * 4))):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    proto = _model([helper.make_node("Identity", ["w"], ["y"], name="id")], [],
                   [_vi("y", [count])], [w])
    (tmp_path / "m.onnx").write_bytes(proto.SerializeToString())
    with open(tmp_path / "w.bin", "wb") as f:  # sparse: no disk, no memory
        f.truncate(count * 4)
    with pytest.raises(OutOfMemoryError, match=r"tensor 'w' .* declares \d+ bytes, more than "
                                               r"this machine's \d+ bytes of memory"):
        netpass.read_model(tmp_path / "m.onnx")


# -- files that cannot be written ----------------------------------------------------------
@pytest.mark.parametrize("suffix", [".xml", ".onnx"])
def test_save_model_into_a_folder_that_is_a_file_raises_file_access_error(tmp_path, suffix):
    (tmp_path / "plain").write_text("not a folder")
    x = netpass.opset.parameter([2], np.float32, name="x")
    model = netpass.Model([netpass.opset.relu(x)], [x], "m")
    target = tmp_path / "plain" / f"m{suffix}"
    with pytest.raises(FileAccessError, match=r"File exists|Not a directory") as info:
        netpass.save_model(model, target)
    assert isinstance(info.value, OSError) and str(tmp_path / "plain") in str(info.value)


@pytest.mark.parametrize("make_pass", [lambda p: VisualizeTree(p / "g.dot"),
                                       lambda p: Serialize(p / "m.xml")],
                         ids=["VisualizeTree", "Serialize"])
def test_writing_passes_into_a_folder_that_is_a_file_name_the_pass_and_the_file(tmp_path,
                                                                                make_pass):
    (tmp_path / "plain").write_text("not a folder")
    x = netpass.opset.parameter([2], np.float32, name="x")
    model = netpass.Model([netpass.opset.relu(x)], [x], "m")
    with pytest.raises(PassError, match=r"pass '(VisualizeTree|Serialize)' failed: "
                                        r"FileAccessError: .*plain") as info:
        make_pass(tmp_path / "plain").run_on_model(model)
    assert isinstance(info.value.cause, FileAccessError)


def test_resource_errors_are_netpass_errors():
    assert issubclass(OutOfMemoryError, ResourceLimitError)
    assert issubclass(ResourceLimitError, NetpassError)
    assert issubclass(FileAccessError, NetpassError) and issubclass(FileAccessError, OSError)


# -- the CLI says so in one line ---------------------------------------------------------------
def test_cli_reports_these_as_errors_not_internal_errors(tmp_path):
    path = tmp_path / "fill.onnx"
    path.write_bytes(_huge_fill().SerializeToString())
    run = _cli("run", path, "--device", "REFERENCE")
    assert run.returncode == 1, run.stderr
    assert run.stderr.startswith("error: ") and "internal error" not in run.stderr
    assert "Broadcast 'fill' ran out of memory" in run.stderr and "Traceback" not in run.stderr

    (tmp_path / "plain").write_text("not a folder")
    convert = _cli("convert", ROOT / "examples" / "kws_cnn.onnx", "-o",
                   tmp_path / "plain" / "out.xml")
    assert convert.returncode == 1 and "internal error" not in convert.stderr
    assert convert.stderr.startswith("error: ") and "plain" in convert.stderr


# -- file names no OS takes ------------------------------------------------------------------
def test_file_names_with_a_nul_character_are_netpass_errors(tmp_path):
    """(os.stat and open raised a bare ValueError: embedded null byte.)"""
    x = netpass.opset.parameter([2], np.float32, name="x")
    model = netpass.Model([netpass.opset.relu(x)], [x], "m")
    netpass.save_model(model, tmp_path / "m.xml")
    with pytest.raises(FileAccessError, match="NUL character"):
        netpass.save_model(model, str(tmp_path / "a\0b.xml"))
    with pytest.raises(FileAccessError, match="NUL character"):
        netpass.save_model(model, tmp_path / "m.xml", str(tmp_path / "w\0.bin"))
    with pytest.raises(ModelFileError, match="embedded null byte"):
        netpass.read_model(str(tmp_path / "a\0b.onnx"))
    with pytest.raises(ModelFileError, match="embedded null byte"):
        netpass.read_model(tmp_path / "m.xml", str(tmp_path / "w\0.bin"))


def test_save_model_of_something_not_a_model():
    with pytest.raises(NetpassError, match="save_model expects a Model, got str"):
        netpass.save_model("m.onnx", "out.onnx")
