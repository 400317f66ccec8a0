"""Differential check of one small ONNX model against onnxruntime, for the operator fuzz.

A :class:`Case` is a model of one operator (or a tiny chain) whose inputs are declared with
symbolic dims where their sizes change, plus 2-4 steps of concrete feeds. :func:`check` runs
onnxruntime on every step (a step onnxruntime refuses makes the case invalid: hypothesis is
told to discard it), then compiles the model once for ``RUNTIME_DEVICE`` and once for the
reference device and runs every step in ONE infer request of each, comparing each output:
relative L2 <= 1e-4 for floats, exact for integers and booleans, equal NaN positions, same
shape and dtype. A ``netpass.errors`` refusal at read or compile time is reported as
:class:`Refused`; anything else is a failure.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper

import netpass
from netpass.errors import NetpassError

REL_L2 = 1e-4
FLOAT = onnx.TensorProto.FLOAT


class Invalid(Exception):
    """onnxruntime refuses the drawn model or one of its feeds: not a netpass case."""


class Refused(Exception):
    """netpass refused the model with a clear ``netpass.errors`` exception."""


@dataclass
class Case:
    """An ONNX graph over declared inputs and a sequence of feeds for one request."""

    nodes: list
    inputs: list[tuple[str, int, list | None]]  # name, ONNX element type, dims (None: any rank)
    outputs: list[str]
    steps: list[dict[str, np.ndarray]]
    opset: int
    inits: list = field(default_factory=list)
    transformations: str = "GNA"  # the runtime device's TRANSFORMATIONS config

    def model(self) -> onnx.ModelProto:
        """The ONNX model (outputs typed by inference, so their shapes stay unknown)."""
        graph = helper.make_graph(
            self.nodes, "fuzz",
            [helper.make_tensor_value_info(n, t, d) for n, t, d in self.inputs],
            [helper.make_empty_tensor_value_info(o) for o in self.outputs], self.inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)],
                                 ir_version=min(onnx.IR_VERSION, 10))

    def describe(self) -> str:
        """Nodes, declarations and step shapes, for a failure message."""
        nodes = "; ".join(
            f"{n.op_type}({', '.join(n.input)}) "
            f"{ {a.name: helper.get_attribute_value(a) for a in n.attribute} }"
            for n in self.nodes)
        inits = {i.name: onnx.numpy_helper.to_array(i).tolist() for i in self.inits}
        shapes = [{k: v.tolist() if v.dtype.kind in "iub" and v.size <= 8 else
                   (v.shape, v.dtype.name) for k, v in s.items()} for s in self.steps]
        return (f"opset {self.opset}, {self.transformations}: {nodes}\n  inputs {self.inputs}\n  inits {inits}\n"
                f"  steps {shapes}")


def rel_l2(got: np.ndarray, want: np.ndarray) -> float:
    """||got - want|| / ||want|| over finite positions (0 when both are all zero)."""
    g, w = got.astype(np.float64), want.astype(np.float64)
    finite = np.isfinite(w)
    diff = np.linalg.norm(g[finite] - w[finite])
    scale = np.linalg.norm(w[finite])
    return float(diff / scale) if scale > 0 else float(diff)


def compare(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """Raise AssertionError when ``got`` is not onnxruntime's ``want``."""
    got = np.asarray(got)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    if want.dtype.kind == "f":
        assert np.array_equal(np.isnan(got), np.isnan(want)), f"{what}: NaN positions differ"
        inf = np.isinf(want)
        assert np.array_equal(got[inf], want[inf]), f"{what}: infinities differ"
        err = rel_l2(got, want)
        assert err <= REL_L2, f"{what}: relative L2 {err:.3g}\n got {got}\n want {want}"
    else:
        assert np.array_equal(got, want), f"{what}: values differ\n got {got}\n want {want}"


def expected(model: onnx.ModelProto, steps: list[dict[str, np.ndarray]]) -> list[list]:
    """onnxruntime's outputs for every step; :class:`Invalid` where it refuses."""
    import onnxruntime as ort

    ort.set_default_logger_severity(4)
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    try:
        sess = ort.InferenceSession(model.SerializeToString(), opts,
                                    providers=["CPUExecutionProvider"])
        return [sess.run(None, feeds) for feeds in steps]
    except Exception as exc:
        raise Invalid(str(exc)[:200]) from exc


def check(case: Case, devices: tuple[str, ...]) -> None:
    """onnxruntime vs netpass on every device, one request each over all steps."""
    model = case.model()
    want = expected(model, case.steps)
    before = model.SerializeToString()
    feeds_before = [{k: v.copy() for k, v in s.items()} for s in case.steps]
    try:
        ir = netpass.read_model(copy.deepcopy(model))
        compiled = [netpass.compile_model(ir, device,
                                          config={"TRANSFORMATIONS": case.transformations})
                    for device in devices]
    except NetpassError as exc:
        raise Refused(f"{type(exc).__name__}: {exc}") from exc
    assert model.SerializeToString() == before, "reading mutated the model"
    for device, cm in zip(devices, compiled):
        req = cm.create_infer_request()
        for i, (feeds, outs) in enumerate(zip(case.steps, want)):
            got = req.infer({k: v.copy() for k, v in feeds.items()})
            for name, ref in zip(case.outputs, outs):
                compare(got[name], ref, f"{device} step {i} output {name}")
    for feeds, kept in zip(case.steps, feeds_before):
        for k in feeds:
            assert np.array_equal(feeds[k], kept[k], equal_nan=True), f"feed {k} mutated"
