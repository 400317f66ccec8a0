"""Checks shared by the tests of ops added for ONNX breadth (attention, losses, bitwise, ...).

- :func:`one_node` builds a one-node ONNX model from numpy feeds.
- :func:`expected` runs it in onnxruntime, or in onnx's reference evaluator where onnxruntime
  has no kernel for the op at that opset (``engine`` forces one).
- :func:`check_import` compares ``netpass.reference.infer`` on the imported model with that.
- :func:`check_export` writes a netpass model as ONNX and runs it in the same engines.
- :func:`check_ir_round_trip` saves IR v11 and reads it back: same attributes, same outputs.
- :func:`check_runtime` compiles for ``RUNTIME_DEVICE`` and compares with the reference.
- :func:`fuzz_tests` makes a hypothesis test of a case function and a slow one of more draws.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper, numpy_helper

import netpass
from netpass.testing import RUNTIME_DEVICE

RTOL, ATOL = 1e-4, 1e-5


def one_node(op: str, feeds: dict[str, np.ndarray], n_out: int = 1, opset: int = 17,
             initializers: dict[str, np.ndarray] | None = None,
             inputs: list[str] | None = None, domain: str = "", **attrs: Any) -> onnx.ModelProto:
    """One ONNX node reading ``inputs`` (default: the feeds, then the initializers; "" for an
    omitted optional input) and writing ``y0..y{n_out-1}`` (types left to inference)."""
    initializers = initializers or {}
    vis = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
           for k, v in feeds.items()]
    outs = [onnx.ValueInfoProto(name=f"y{i}") for i in range(n_out)]
    names = inputs if inputs is not None else list(feeds) + list(initializers)
    node = helper.make_node(op, names, [o.name for o in outs], domain=domain, **attrs)
    graph = helper.make_graph([node], "g", vis, outs,
                              [numpy_helper.from_array(v, k) for k, v in initializers.items()])
    imports = [helper.make_opsetid("", opset)]
    if domain:
        imports.append(helper.make_opsetid(domain, 1))
    proto = helper.make_model(graph, opset_imports=imports)
    proto.ir_version = 8 if opset <= 17 else 10
    return proto


def _ort(proto: onnx.ModelProto, feeds: dict) -> list[np.ndarray] | None:
    import onnxruntime as ort
    try:
        sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as e:
        text = str(e)
        if "NOT_IMPLEMENTED" in text or "not a registered function/op" in text or \
                "opset" in text.lower() or "Type Error" in text:
            return None
        raise
    return sess.run(None, feeds)


def expected(proto: onnx.ModelProto, feeds: dict, engine: str = "auto") -> list[np.ndarray]:
    """The outputs by onnxruntime (``ort``), onnx's reference evaluator (``reference``), or the
    first of the two that can run the model (``auto``)."""
    if engine in ("auto", "ort"):
        got = _ort(proto, feeds)
        if got is not None or engine == "ort":
            assert got is not None, "onnxruntime cannot run the model"
            return got
    from onnx.reference import ReferenceEvaluator
    return list(ReferenceEvaluator(proto).run(None, feeds))


def assert_close(got: np.ndarray, ref: np.ndarray, rtol: float = RTOL, atol: float = ATOL,
                 what: str = "") -> None:
    got, ref = np.asarray(got), np.asarray(ref)
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != {ref.shape}"
    if ref.dtype.kind in "OU" or got.dtype.kind in "OU":  # strings: numpy str or object arrays
        assert got.astype(object).tolist() == ref.astype(object).tolist(), what
        return
    assert got.dtype == ref.dtype, f"{what}: dtype {got.dtype} != {ref.dtype}"
    if ref.dtype.kind in "fc" or ref.dtype.kind == "V":
        np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=rtol,
                                   atol=atol, err_msg=what)
    else:
        np.testing.assert_array_equal(got, ref, err_msg=what)


def check_import(proto: onnx.ModelProto, feeds: dict, rtol: float = RTOL, atol: float = ATOL,
                 engine: str = "auto") -> netpass.Model:
    """netpass's reference on the imported model equals the engine's outputs; returns the
    imported model."""
    model = netpass.read_model(proto)
    got = netpass.reference.infer(model, feeds)
    ref = expected(proto, feeds, engine)
    for vo, r in zip(proto.graph.output, ref):
        assert_close(got[vo.name], r, rtol, atol, vo.name)
    return model


def check_export(model: netpass.Model, feeds: dict, rtol: float = RTOL, atol: float = ATOL,
                 engine: str = "auto") -> onnx.ModelProto:
    """The model written as ONNX gives netpass's reference outputs in the engine."""
    from netpass.frontend.onnx_writer import to_onnx
    proto = to_onnx(model)
    onnx.checker.check_model(proto)
    ref = netpass.reference.infer(model, feeds)
    got = expected(proto, feeds, engine)
    for name, g in zip(model.output_names, got):
        assert_close(g, ref[name], rtol, atol, name)
    return proto


def check_ir_round_trip(model: netpass.Model, feeds: dict, tmp_path: Any) -> netpass.Model:
    """IR v11 out and back in: the same op types and attributes, the same outputs (exact)."""
    path = tmp_path / "model.xml"
    netpass.save_model(model, str(path))
    back = netpass.read_model(str(path))
    ops = [(n.type_name, n.version) for n in model.get_ordered_ops()]
    assert [(n.type_name, n.version) for n in back.get_ordered_ops()] == ops
    for a, b in zip(model.get_ordered_ops(), back.get_ordered_ops()):
        if a.type_name != "Constant":
            assert {k: _norm(v) for k, v in a.get_attributes().items()} == \
                {k: _norm(v) for k, v in b.get_attributes().items()}, a.type_name
    ref = netpass.reference.infer(model, feeds)
    got = netpass.reference.infer(back, feeds)
    for name in model.output_names:
        np.testing.assert_array_equal(got[name], ref[name])
    return back


def _norm(value: Any) -> Any:
    if isinstance(value, netpass.Model):  # a body: its ops and their attributes, in order
        return tuple((n.type_name, n.version, _norm(list(n.get_attributes().values())))
                     for n in value.get_ordered_ops() if n.type_name != "Constant")
    if isinstance(value, (list, tuple)):
        return tuple(_norm(v) for v in value)
    if isinstance(value, np.ndarray):
        return tuple(value.reshape(-1).tolist())
    return str(value) if not isinstance(value, (int, float, bool)) else value


def check_openvino(model: netpass.Model, feeds: dict, tmp_path: Any, rtol: float = RTOL,
                   atol: float = ATOL) -> None:
    """OpenVINO's CPU plugin runs netpass's IR and agrees with netpass's reference."""
    import pytest
    ov = pytest.importorskip("openvino")
    path = tmp_path / "model.xml"
    netpass.save_model(model, str(path))
    core = ov.Core()
    compiled = core.compile_model(core.read_model(str(path)), "CPU",
                                  {"INFERENCE_PRECISION_HINT": "f32"})
    got = compiled([feeds[n] for n in model.input_names])
    ref = netpass.reference.infer(model, feeds)
    for i, name in enumerate(model.output_names):
        np.testing.assert_allclose(np.asarray(got[compiled.output(i)]).astype(np.float64),
                                   ref[name].astype(np.float64), rtol=rtol, atol=atol)


def check_runtime(model: netpass.Model, feeds: dict, rtol: float = RTOL,
                  atol: float = ATOL) -> dict:
    """compile_model on RUNTIME_DEVICE gives netpass's reference outputs; returns the stats."""
    req = netpass.compile_model(model, device=RUNTIME_DEVICE).create_infer_request()
    got = req.infer(feeds)
    ref = netpass.reference.infer(model, feeds)
    for name in model.output_names:
        assert got[name].dtype == ref[name].dtype, name
        assert_close(got[name], ref[name], rtol, atol, name)
    return req.stats


def check_reads_openvino_ir(ov_model: Any, feeds: dict, tmp_path: Any, rtol: float = RTOL,
                            atol: float = ATOL) -> netpass.Model:
    """IR that OpenVINO itself writes for ``ov_model`` (inputs named as ``feeds``, in order):
    netpass reads it, and its reference agrees with OpenVINO's CPU plugin; returns the model."""
    import openvino as ov
    path = tmp_path / "openvino.xml"
    ov.save_model(ov_model, str(path), compress_to_fp16=False)
    want = ov.Core().compile_model(str(path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})(
        list(feeds.values()))
    model = netpass.read_model(str(path))
    got = netpass.reference.infer(model, dict(zip(model.input_names, feeds.values())))
    for i, name in enumerate(model.output_names):
        ref = np.asarray(list(want.values())[i])
        assert got[name].dtype == ref.dtype, name
        assert_close(got[name], ref, rtol, atol, name)
    return model


def check_torch_ir(fn: Any, args: list[np.ndarray], tmp_path: Any, rtol: float = RTOL,
                   atol: float = ATOL) -> netpass.Model:
    """``fn`` (torch tensors in, out) as a module through OpenVINO's PyTorch frontend
    (``convert_model``, ``save_model``): netpass reads the IR and agrees with OpenVINO."""
    import pytest
    ov = pytest.importorskip("openvino")
    torch = pytest.importorskip("torch")

    class Module(torch.nn.Module):
        def forward(self, *xs):
            return fn(*xs)

    converted = ov.convert_model(Module(), example_input=tuple(torch.from_numpy(a) for a in args))
    return check_reads_openvino_ir(converted, {f"x{i}": a for i, a in enumerate(args)},
                                   tmp_path, rtol, atol)


def fuzz_tests(case: Callable[[st.DataObject], None], examples: int,
               more: int) -> tuple[Callable, Callable]:
    """Two hypothesis tests of ``case`` (drawing from ``st.data()``), derandomized: one of
    ``examples`` draws, and one marked slow of ``more``."""
    def draws(n: int) -> Callable:
        @settings(derandomize=True, max_examples=n, deadline=None)
        @given(st.data())
        def test(data: st.DataObject) -> None:
            case(data)
        return test
    return draws(examples), pytest.mark.slow(draws(more))
