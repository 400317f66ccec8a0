"""Differential fuzz of the stages after the ngraph pipeline: the pre/post split, the legacy
layer graph and its passes, and the graph compiler (``legacy_fuzz_models`` draws the models).

For each drawn model and each TRANSFORMATIONS setting (GNA, COMMON, NONE):

(a) every legacy pass alone (``run_legacy_passes`` with that one), then ``legacy_to_model``,
    on the reference evaluator;
(b) the whole ``compile_model`` on REFERENCE and on ``RUNTIME_DEVICE``;
(c) ``split_pre_post_processing`` alone, pre -> main -> post;

each against the reference evaluator on the original model: rel. L2 <= 1e-5 for f32 on the
reference (1e-4 on an OpenCL device, which sums in other orders; 1e-2 for f16), exact for ints, NaN and inf where the reference has them; input and output names kept;
the user's model untouched. A second draw feeds an inf, a -inf and a NaN to float inputs; GNA
runs only where no output holds one: the GNA pipeline lowers crops and stepped slices to 0/1
products, which spread them (docs/legacy.md, crop lowering rule). A third draws f16 models.
``-m slow`` draws more and larger models.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from legacy_fuzz_harness import (
    check_compile,
    check_single_pass,
    check_split,
    feeds_for,
)
from legacy_fuzz_models import fuzz_models

import netpass
from netpass import Model, opset
from netpass.legacy_passes import DEFAULT_PASSES
from netpass.reference import infer
from netpass.testing import RUNTIME_DEVICE

ALL = ("GNA", "COMMON", "NONE")
# (the reference's products of inf and NaN inputs warn; their values are what is compared)
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")


def _check_all(model: Model, seed: int, special: bool, runtime: bool) -> None:
    feeds = feeds_for(model, seed, special)
    want = infer(model, feeds)
    finite = all(np.isfinite(v).all() for v in want.values() if v.dtype.kind == "f")
    # (GNA: only where no inf or NaN arises, inputs or inside, as with -inf from a max-pool
    # window of padding only: its crops as 0/1 products spread them, as documented)
    for which in ALL if finite and not special else ("COMMON", "NONE"):
        for legacy_pass in DEFAULT_PASSES:
            check_single_pass(model, which, legacy_pass, feeds, want)
        check_split(model, which, feeds, want)
        for device in ("REFERENCE", RUNTIME_DEVICE) if runtime else ("REFERENCE",):
            check_compile(model, which, device, feeds, want)


def _settings(n: int) -> settings:
    return settings(max_examples=n, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


@_settings(150)
@given(fuzz_models(), st.integers(0, 100))
def test_legacy_stage_keeps_outputs(model, seed):
    _check_all(model, seed, special=False, runtime=False)


@_settings(60)
@given(fuzz_models(), st.integers(0, 100))
def test_legacy_stage_keeps_outputs_on_the_runtime(model, seed):
    _check_all(model, seed, special=False, runtime=True)


@_settings(60)
@given(fuzz_models(), st.integers(0, 100))
def test_legacy_stage_keeps_non_finite_inputs(model, seed):
    _check_all(model, seed, special=True, runtime=True)


@_settings(30)
@given(fuzz_models(float_type=np.float16), st.integers(0, 100))
def test_legacy_stage_keeps_f16_outputs(model, seed):
    _check_all(model, seed, special=False, runtime=True)


@pytest.mark.slow
@_settings(600)
@given(fuzz_models(14), st.integers(0, 100), st.booleans())
def test_legacy_stage_keeps_outputs_slow(model, seed, special):
    _check_all(model, seed, special=special, runtime=True)


@pytest.mark.slow
@_settings(200)
@given(fuzz_models(14, float_type=np.float16), st.integers(0, 100))
def test_legacy_stage_keeps_f16_outputs_slow(model, seed):
    _check_all(model, seed, special=False, runtime=True)


# -- shrunk failures, kept as explicit cases -----------------------------------------------------

def _relu_concat_model() -> Model:
    """Relu of a [1, 2, 3, 3] input, concatenated with itself three times along axis 0."""
    x = opset.parameter([1, 2, 3, 3], np.float32, "x")
    r = opset.relu(x)
    return Model([opset.result(opset.abs(opset.concat([r, r, r], -4)), "y")], [x])


def _dilated_pool_model(auto_pad: str) -> Model:
    """Conv -> Clamp -> MaxPool whose dilated window's taps fall into padding only."""
    x = opset.parameter([1, 3, 1, 1], np.float32, "x")
    w = np.random.default_rng(0).uniform(0.5, 1.0, (2, 3, 1, 1)).astype(np.float32)
    conv = opset.convolution(x, w, [1, 1], [0, 0], [0, 0], [1, 1])
    pads = [0, 1] if auto_pad == "explicit" else [0, 0]
    pool = opset.max_pool(opset.clamp(conv, -0.5, 1.0), [1, 1], [1, 2], pads, pads, [1, 2],
                          auto_pad=auto_pad)
    return Model([opset.result(opset.matmul(pool.output(0), pool.output(0), False, True), "y")],
                 [x])


def _f16_avg_pool_model() -> Model:
    """An f16 AvgPool (the GNA pipeline's window sum took f32 filters)."""
    x = opset.parameter([1, 2, 3, 4], np.float16, "x")
    return Model([opset.result(opset.avg_pool(x, [1, 2], [0, 1], [1, 0], [2, 2], True), "y")],
                 [x])


def _growing_gather_model() -> Model:
    """Gather [0, 0] along the 1-long axis 0 of an int Add(n, n) (the GNA pipeline's Gather
    sinking moved it above the Add, where no input could carry the new size)."""
    n = opset.parameter([1, 2], np.int32, "n")
    g = opset.gather(opset.add(n, n), np.array([0, 0], np.int64), np.int64(0))
    return Model([opset.result(g, "y1")], [n])


@pytest.mark.parametrize("make", [_relu_concat_model, lambda: _dilated_pool_model("explicit"),
                                  lambda: _dilated_pool_model("same_upper"), _f16_avg_pool_model,
                                  _growing_gather_model],
                         ids=["relu_concat_axis0", "dilated_pool", "dilated_same_upper_pool",
                              "f16_avg_pool", "growing_gather"])
def test_found_case(make):
    _check_all(make(), 1, special=False, runtime=True)


def test_compile_model_keeps_names_of_outputs_read_straight_from_inputs():
    """An input read straight by two outputs, one named after it: the names stay."""
    x = opset.parameter([2, 3], np.float32, "x")
    model = Model([opset.result(x, "x_out"), opset.result(x.output(0), None)], [x])
    cm = netpass.compile_model(model, RUNTIME_DEVICE)
    assert [p.name for p in cm.outputs] == model.output_names
    _check_all(model, 0, special=False, runtime=True)
