"""ONNX -> netpass -> ONNX on every ONNX backend node case the reference passes: the exported
model, run by onnxruntime, must give the case's expected outputs (the suite's tolerance,
rtol 1e-3, atol 1e-7; outputs of random draws by shape and dtype where the values differ, as
``tools/conformance.py`` checks them: onnxruntime has its own generator). This exercises every op family's export rule through the writer.
Case collection and decoding live in ``_cases.py``.

Skipped, with the reason: cases an import or export rule refuses (a netpass error naming the
op), and cases onnxruntime cannot run (no kernel for the type, or the op's documented edge
cases it computes differently; listed below).
"""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from _cases import CASES, PASSING, case_data, tool

import netpass
from netpass.core.types import Type
from netpass.errors import NetpassError
from netpass.frontend.onnx_writer import to_onnx

# onnxruntime 1.31 returns NaN for x mod +-inf where ONNX's floor-mod edge cases expect x.
ORT_DEVIATIONS = {f"test_mod_float_edge_cases_fmod_0_{t}": "onnxruntime's Mod edge cases"
                  for t in ("float16", "float32", "float64")}
# onnxruntime 1.32's Attention: no masks shorter than the keys (the specification pads them),
# the lowest float instead of -inf in the qk_matmul_output of masked positions, fp16 rounding
# beyond the suite's tolerance.
ORT_DEVIATIONS.update({
    "test_attention_4d_diff_heads_mask4d_padded_kv": "onnxruntime's Attention: short mask",
    "test_attention_4d_with_past_and_present_qk_matmul_bias_3d_mask_causal":
        "onnxruntime's Attention: -inf written as the lowest float",
    "test_attention_4d_with_past_and_present_qk_matmul_bias_4d_mask_causal":
        "onnxruntime's Attention: -inf written as the lowest float",
    "test_attention_4d_causal_fp16": "onnxruntime's Attention: fp16 rounding",
})
# onnxruntime's DFT and STFT leave float32 rounding noise (1e-5) where the exact value is 0.
ORT_DEVIATIONS.update(dict.fromkeys(("test_dft_axis_opset19", "test_dft_inverse_opset19", "test_dft_irfft_opset19", "test_dft_opset19", "test_dft_rfft_opset19", "test_stft_with_window"), "onnxruntime's DFT rounding"))
# With an output_shape larger than the unpooled one, onnxruntime counts MaxUnpool's indices over
# output_shape; the specification's reference (and the suite) over the inferred shape.
ORT_DEVIATIONS["test_maxunpool_export_with_output_shape"] = "onnxruntime's MaxUnpool indices"


ROUND_TRIP = [c for c in CASES if c.name in PASSING["reference"]]


@pytest.mark.parametrize("case", ROUND_TRIP, ids=[c.name for c in ROUND_TRIP])
def test_round_trip(case):
    if case.name in ORT_DEVIATIONS:
        pytest.skip(ORT_DEVIATIONS[case.name])
    try:
        proto = to_onnx(netpass.read_model(case.model))
    except NetpassError as e:
        pytest.skip(f"refused by an import or export rule: {e}")
    try:
        sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime's own kernel coverage, not netpass's export
        # (no kernel for the type; the ai.onnx.preview.training ops: only in its training build)
        if "NOT_IMPLEMENTED" in str(e) or "Type Error" in str(e) or \
                "not a registered function/op" in str(e):
            pytest.skip(f"onnxruntime cannot run it: {str(e).splitlines()[0][:160]}")
        if "construct locale" in str(e):  # StringNormalizer changing case needs en_US
            pytest.skip("onnxruntime needs the en_US locale installed on the system")
        raise
    for feeds, expected in case_data(case):
        if any(Type.of(np.asarray(v).dtype).is_quantized
               for v in [*feeds.values(), *expected.values()]):
            pytest.skip("onnxruntime's Python API has no ml_dtypes arrays (bfloat16, float8, "
                        "int4...) in or out")
        got = dict(zip(expected, sess.run(list(expected), feeds)))
        outcome = tool.check_outputs(got, expected, tool.random_outputs(case))
        assert outcome.passed, outcome.detail
