"""Helpers of ``test_openvino_written_ir.py``: IR that the real OpenVINO writes, read and run by
netpass, against OpenVINO's CPU plugin on the same files.

:func:`save_variants` writes one OpenVINO model three ways (``save_model`` with
``compress_to_fp16=False``; ``save_model`` with its default f16 weight compression, which
writes f16 Constants and Convert ops; ``serialize``). :func:`check_ir` runs the IR on OpenVINO's
CPU plugin (``INFERENCE_PRECISION_HINT`` f32) and on netpass (``read_model``, then the
reference evaluator and ``RUNTIME_DEVICE``, every step in ONE infer request of each), and
compares every output: same shape and dtype, floats within ``RTOL``/``ATOL`` (both sides use
the same rounded f16 weights, so the compressed files keep that tolerance), other types exact.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import openvino as ov

import netpass
from netpass.testing import RUNTIME_DEVICE

RTOL, ATOL = 1e-4, 1e-5
DEVICES = ("REFERENCE", RUNTIME_DEVICE)
VARIANTS = ("f32", "f16", "serialize")


class Invalid(Exception):
    """OpenVINO's CPU plugin cannot be the judge of this case (it refuses it, or departs from
    the ops' spec there): not a netpass case."""


def save_variants(model: ov.Model, folder: Path, variants=VARIANTS) -> dict[str, Path]:
    """``model`` saved by OpenVINO in each of ``variants``: variant -> xml path."""
    out = {}
    for kind in variants:
        xml = folder / f"{kind}.xml"
        if kind == "serialize":
            ov.serialize(model, str(xml))
        else:
            ov.save_model(model, str(xml), compress_to_fp16=kind == "f16")
        out[kind] = xml
    return out


def openvino_outputs(xml: Path, steps: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
    """OpenVINO CPU's outputs (in order) for every step, in one infer request."""
    core = ov.Core()
    try:
        compiled = core.compile_model(core.read_model(str(xml)), "CPU",
                                      {"INFERENCE_PRECISION_HINT": "f32"})
        req = compiled.create_infer_request()
        out = []
        for feeds in steps:
            res = req.infer(list(feeds))
            out.append([np.array(res[o]) for o in compiled.outputs])
        return out
    except RuntimeError as exc:
        raise Invalid(f"OpenVINO CPU refuses it: {str(exc)[:200]}") from exc


def compare(got: np.ndarray, want: np.ndarray, what: str) -> None:
    got = np.asarray(got)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=RTOL,
                                   atol=ATOL, equal_nan=True, err_msg=what)
    else:
        assert np.array_equal(got, want), f"{what}: values differ\n got {got}\n want {want}"


def check_ir(xml: Path, steps: list[list[np.ndarray]], want=None) -> netpass.Model:
    """netpass on ``xml`` (reference and RUNTIME_DEVICE, one request each over ``steps``, the
    inputs in the model's order) gives OpenVINO CPU's outputs (``want``, else computed); so
    does OpenVINO CPU on netpass's own Serialize of the model it read (the round trip)."""
    if want is None:
        want = openvino_outputs(xml, steps)
    model = netpass.read_model(xml)
    again = xml.with_name(xml.stem + "_netpass.xml")
    netpass.save_model(model, again)
    core = ov.Core()
    compiled = core.compile_model(core.read_model(str(again)), "CPU",
                                  {"INFERENCE_PRECISION_HINT": "f32"})
    req = compiled.create_infer_request()
    for i, (feeds, expected) in enumerate(zip(steps, want)):
        res = req.infer(list(feeds))
        for j, (o, w) in enumerate(zip(compiled.outputs, expected)):
            compare(np.array(res[o]), w, f"{again.name} in OpenVINO step {i} output {j}")
    for device in DEVICES:
        req = netpass.compile_model(model, device).create_infer_request()
        for i, (feeds, expected) in enumerate(zip(steps, want)):
            got = list(req.infer(dict(zip(model.input_names, feeds))).values())
            assert len(got) == len(expected), f"{device}: {len(got)} outputs, not {len(expected)}"
            for j, (g, w) in enumerate(zip(got, expected)):
                compare(g, w, f"{xml.name} {device} step {i} output {j}")
    return model


def refuse_cpu_departures(model: ov.Model) -> None:
    """:class:`Invalid` for a model where OpenVINO's CPU plugin departs from the spec its IR
    states: an integer Divide, which it truncates whatever ``m_pythondiv`` says (its ONNX
    frontend writes ``m_pythondiv="true"``, floor division, for ONNX's truncating Div;
    OpenVINO's reference and constant folding floor, as netpass does)."""
    for op in model.get_ordered_ops():
        if op.get_type_name() == "Divide" and op.get_output_element_type(0).is_integral():
            raise Invalid("integer Divide: OpenVINO's CPU plugin ignores m_pythondiv")


def check_against_both(xml: Path, steps: list[list[np.ndarray]], ort_outputs) -> None:
    """As :func:`check_ir` where OpenVINO CPU agrees with onnxruntime on the ONNX model the IR
    came from (``ort_outputs``, per step); :class:`Invalid` where they disagree (OpenVINO CPU
    departs from the spec there, e.g. a Range whose step points away from its limit)."""
    want = openvino_outputs(xml, steps)
    for w_step, o_step in zip(want, ort_outputs):
        for w, o in zip(w_step, o_step):
            try:
                compare(w, np.asarray(o), "OpenVINO CPU vs onnxruntime")
            except AssertionError as exc:
                raise Invalid(str(exc)[:200]) from exc
    check_ir(xml, steps, want)
