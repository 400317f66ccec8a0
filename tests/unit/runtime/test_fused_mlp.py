"""A decode step's MLP in one launch (netpass.runtime.fused_mlp, kernels.decode_mlp): the down
projection computes the up projection too at one row; prompts run the two apart; results are
the reference's. Gated MLPs by default, GPT-2's with ``DECODE_MLP_FUSION: "all"``."""
from __future__ import annotations

import numpy as np
import pytest
from graph_blocks import randn_f32

import netpass
from netpass import Model, opset
from netpass.errors import NetpassError
from netpass.runtime.fused_mlp import MlpDesc, fold_decode_mlps
from netpass.runtime.kernels.decode_mlp import MLP_REGS, mlp_chunk
from netpass.testing import RUNTIME_DEVICE

D = 64


def _layer_norm(x, rng, d=D):
    mvn = opset.mvn(x, np.array([-1], np.int64), True, 1e-5, "inside_sqrt")
    return opset.add(opset.multiply(mvn, 1.0 + randn_f32(rng, d, scale=0.1)), randn_f32(rng, d, scale=0.1))


def _rms(x, rng, d=D):
    ms = opset.reduce_mean(opset.power(x, np.float32(2.0)), np.array([-1], np.int64), True)
    h = opset.multiply(x, opset.divide(np.float32(1.0), opset.sqrt(opset.add(ms, np.float32(1e-6)))))
    return opset.multiply(h, (1.0 + randn_f32(rng, d, scale=0.2)))


def _gelu_tanh(h):
    """GPT-2's gelu_new as its exports write it: 0.5 h (1 + tanh(c (h + 0.044715 h^3)))."""
    inner = opset.add(h, opset.multiply(opset.power(h, np.float32(3.0)), np.float32(0.044715)))
    t = opset.tanh(opset.multiply(inner, np.float32(0.7978845608)))
    return opset.multiply(opset.multiply(h, np.float32(0.5)), opset.add(t, np.float32(1.0)))


ACTIVATIONS = {"gelu_tanh": _gelu_tanh, "relu": opset.relu,
               "gelu_erf": lambda h: opset.gelu(h, "erf")}


def _mlp_model(rng, act="gelu_tanh", d=D, hidden=4 * D, norm=True):
    """x + down(act(up(LayerNorm(x)) + b1)) + b2: GPT-2's MLP block."""
    x = opset.parameter([1, -1, d], np.float32, name="x")
    h = _layer_norm(x, rng, d) if norm else x
    up = opset.add(opset.matmul(h, randn_f32(rng, d, hidden, scale=0.2), False, False),
                   randn_f32(rng, hidden, scale=0.1))
    down = opset.add(opset.matmul(ACTIVATIONS[act](up), randn_f32(rng, hidden, d, scale=0.1), False,
                                  False), randn_f32(rng, d, scale=0.1))
    return Model([opset.result(opset.add(x, down), name="y")], [x])


# gate activations: LLaMA's SiLU (a Swish op), Gemma's tanh-GELU as its exports write it
GATES = {"silu": opset.swish, **ACTIVATIONS}


def _gated_model(rng, d=D, hidden=3 * D // 2, act="silu"):
    """x + down(act(gate(RMSNorm(x))) * up(RMSNorm(x))): LLaMA's MLP block (SiLU), Gemma's
    (tanh-GELU)."""
    x = opset.parameter([1, -1, d], np.float32, name="x")
    h = _rms(x, rng, d)
    gate = opset.matmul(h, randn_f32(rng, d, hidden, scale=0.2), False, False)
    up = opset.matmul(h, randn_f32(rng, d, hidden, scale=0.2), False, False)
    y = opset.matmul(opset.multiply(GATES[act](gate), up), randn_f32(rng, hidden, d, scale=0.1), False,
                     False)
    return Model([opset.result(opset.add(x, y), name="y")], [x])


def _compiled(model, mlps="all"):
    cm = netpass.compile_model(model, RUNTIME_DEVICE, {"TRANSFORMATIONS": "NONE",
                                                       "DECODE_MLP_FUSION": mlps})
    return cm, cm.runtime.program


def _down(program):
    return [n for n in program.nodes if isinstance(n.subgraph, MlpDesc)]


def _check(req, model, rng, rows, offset=2.0, rel_l2=None):
    """Each step's output against the reference (rows with a mean off zero; ``rel_l2``: the
    relative L2 error at most that too); launches a step."""
    launches = []
    for s in rows:
        feeds = {"x": (offset + randn_f32(rng, 1, s, model.inputs[0].get_partial_shape()[2].get_length()))}
        k0 = req.stats["kernels_enqueued"]
        got = req.infer(feeds)["y"]
        launches.append(req.stats["kernels_enqueued"] - k0)
        want = netpass.reference.infer(model, feeds)["y"]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * float(np.abs(want).max()))
        if rel_l2 is not None:
            assert np.linalg.norm(got - want) <= rel_l2 * np.linalg.norm(want)
    return launches


@pytest.mark.parametrize("act, hidden", [(a, 4 * D) for a in sorted(ACTIVATIONS)]
                         + [("gelu_tanh", 32 * 11)])
def test_one_row_runs_the_mlp_in_one_launch(rng, act, hidden):
    """The down projection holds the up projection's inputs and an MlpDesc; at one row the
    block is one launch (norm, both projections, activation, residual), a prompt's rows take
    the two projections' own launches, and every step equals the reference (352 hidden
    units: 11 work-groups, a block of 8 and one of 3 summing their partial rows)."""
    model = _mlp_model(rng, act, hidden=hidden)
    cm, prog = _compiled(model)
    (down,) = _down(prog)
    up = down.subgraph.fold.up
    assert up.mlp_fold is down.subgraph.fold and len(down.inputs) == 3 + len(up.inputs)
    launches = _check(cm.create_infer_request(), model, rng, [1, 5, 1, 1])
    assert launches[0] == launches[2] == launches[3] == 1
    assert launches[1] == 2


def test_an_mlp_without_a_norm_runs_in_one_launch(rng):
    """x read as it is (no norm staged in front of the up projection)."""
    model = _mlp_model(rng, norm=False)
    cm, prog = _compiled(model)
    assert len(_down(prog)) == 1
    assert _check(cm.create_infer_request(), model, rng, [1, 4, 1]) == [1, 2, 1]


@pytest.mark.parametrize("act, hidden", [("silu", 3 * D // 2), ("silu", 32 * 9)]
                         + [(a, 3 * D // 2) for a in sorted(ACTIVATIONS)] + [("gelu_tanh", 32 * 9)])
def test_a_gated_mlp_runs_in_one_launch(rng, act, hidden):
    """LLaMA's block (RMSNorm, stacked gate and up projection, SiLU product, down projection),
    Gemma's (a tanh-GELU gate), erf-GELU and ReLU gates: one launch at one row; a prompt's
    rows two (the stacked GEMM, the down projection's GEMVs taking the activation as they
    read them), on PoCL three past GEMV_ROWS (the GatedActivation's rows, the GEMM); relative
    L2 error 1e-5 at most."""
    model = _gated_model(rng, hidden=hidden, act=act)
    cm, prog = _compiled(model)
    (down,) = _down(prog)
    assert down.subgraph.gated and down.subgraph.fold.up.inputs[1][0].value.shape[0] == 2 * hidden
    ops = {f.row.name for f in down.subgraph.inner.gate.act}
    assert ops == {"silu": {"Swish"}, "gelu_tanh": {"Multiply", "Add", "Tanh", "Power"},
                   "gelu_erf": {"Gelu"}, "relu": {"Relu"}}[act]
    launches = _check(cm.create_infer_request(), model, rng, [1, 3, 1, 12, 1], rel_l2=1e-5)
    assert launches[:3] == [1, 2, 1] and launches[4] == 1
    if RUNTIME_DEVICE == "CPU":  # (PoCL: no tensor cores; a GPU may take other kernels)
        assert launches[3] == 3


def test_the_fold_saves_a_launch_and_gives_the_same_values(rng):
    """Without the fold, one row takes two launches; the outputs agree within float32 sums."""
    model = _mlp_model(rng)
    feeds = {"x": 1.0 + randn_f32(rng, 1, 1, D)}
    folded = _compiled(model)[0].create_infer_request()
    got = folded.infer(feeds)["y"]
    apart = _compiled(model, "none")[0].create_infer_request()
    want = apart.infer(feeds)["y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert apart.stats["kernels_enqueued"] - folded.stats["kernels_enqueued"] == 1


@pytest.mark.parametrize("which, gelu, gated", [("gated", False, True), ("all", True, True),
                                                ("none", False, False)])
def test_the_config_picks_the_mlps_folded(rng, which, gelu, gated):
    """``DECODE_MLP_FUSION``: gated MLPs by default, GPT-2's too with "all", none with "none"."""
    assert bool(_down(_compiled(_mlp_model(rng), which)[1])) == gelu
    assert bool(_down(_compiled(_gated_model(rng), which)[1])) == gated


def test_the_default_is_gated_only(rng):
    model = _mlp_model(rng)
    cm = netpass.compile_model(model, RUNTIME_DEVICE, {"TRANSFORMATIONS": "NONE"})
    assert not _down(cm.runtime.program)
    assert _check(cm.create_infer_request(), model, rng, [1]) == [2]


def test_an_unknown_config_value_is_refused(rng):
    with pytest.raises(NetpassError, match="DECODE_MLP_FUSION 'some'"):
        _compiled(_mlp_model(rng), "some")


def test_two_requests_keep_their_own_sums(rng):
    """Each request owns the kernel's arrival counts: interleaved single-row steps of two
    requests stay equal to the reference (the last work-groups leave the counts zero)."""
    model = _mlp_model(rng)
    cm, _ = _compiled(model)
    a, b = cm.create_infer_request(), cm.create_infer_request()
    for _ in range(3):
        for req in (a, b, a):
            assert _check(req, model, rng, [1]) == [1]


def test_the_sums_are_the_same_bits_every_run(rng):
    """The partial rows are summed in a fixed order whatever order the work-groups end in:
    the same input gives the same bits, step after step and request after request."""
    model = _mlp_model(rng, hidden=32 * 11)
    cm, _ = _compiled(model)
    feeds = {"x": 1.0 + randn_f32(rng, 1, 1, D)}
    runs = [cm.create_infer_request().infer(feeds)["y"] for _ in range(2)]
    req = cm.create_infer_request()
    runs += [req.infer(feeds)["y"] for _ in range(4)]
    for r in runs[1:]:
        np.testing.assert_array_equal(r, runs[0])


def test_widths_the_kernel_does_not_take_run_apart(rng):
    """K not a multiple of 4: no fused kernel, the two projections as before, correct."""
    model = _mlp_model(rng, d=D + 2, hidden=4 * D)
    cm, prog = _compiled(model)
    assert len(_down(prog)) == 1
    assert _check(cm.create_infer_request(), model, rng, [1, 2]) == [2, 2]


def test_an_up_projection_read_elsewhere_is_not_folded(rng):
    """The up projection's activation is also a model output: nothing folds."""
    x = opset.parameter([1, -1, D], np.float32, name="x")
    act = _gelu_tanh(opset.matmul(_layer_norm(x, rng), randn_f32(rng, D, 4 * D), False, False))
    y = opset.matmul(act, randn_f32(rng, 4 * D, D), False, False)
    model = Model([opset.result(y, name="y"), opset.result(act, name="h")], [x])
    _, prog = _compiled(model)
    assert not _down(prog)
    assert not any(n.mlp_fold is not None for n in prog.nodes)


def test_a_projection_without_an_mlp_before_it_is_not_folded(rng):
    """A FullyConnected reading a model input or a non-projection keeps its own desc."""
    x = opset.parameter([1, -1, D], np.float32, name="x")
    y = opset.matmul(opset.relu(x), randn_f32(rng, D, D), False, False)
    _, prog = _compiled(Model([opset.result(y, name="y")], [x]))
    assert not _down(prog)


def test_desc_reference_and_shape_rule(rng):
    """MlpDesc's shape rule and host reference read the down projection's own three inputs."""
    model = _mlp_model(rng, norm=False)
    _, prog = _compiled(model)
    (down,) = _down(prog)
    w, b = down.inputs[1][0].value, down.inputs[2][0].value
    h = randn_f32(rng, 2, 3, w.shape[1])
    extra = [np.zeros(1, np.float32)] * (len(down.inputs) - 3)
    assert down.subgraph.infer_shapes([h.shape, w.shape, b.shape, *(e.shape for e in extra)],
                                      {}) == [(2, 3, D)]
    np.testing.assert_allclose(down.subgraph.evaluate([h, w, b, *extra])[0], h @ w.T + b,
                               rtol=1e-5, atol=1e-5)


def test_the_fold_is_idempotent_on_a_program(rng):
    """A second fold over a folded program changes nothing (its up projection is marked)."""
    _, prog = _compiled(_mlp_model(rng))
    (down,) = _down(prog)
    inputs = list(down.inputs)
    fold_decode_mlps(prog.nodes, "all")
    assert down.inputs == inputs


@pytest.mark.parametrize("k, h, n, gated, units, want", [
    (768, 3072, 768, False, 132, 32),    # GPT-2 on the H200: 96 work-groups of 32
    (768, 1152, 768, True, 132, 16),     # LLaMA's gated MLP: 72 of 16
    (768, 3072, 768, False, 2, 32),      # a two-core CPU
    (770, 3072, 770, False, 132, 0),     # K not a multiple of 4
    (768, 3074, 768, False, 132, 0),     # H not a multiple of 4
    (8192, 28672, 8192, True, 132, 0),   # weights past the registers at every chunk
])
def test_chunk_rule(k, h, n, gated, units, want):
    got = mlp_chunk(k, h, n, gated, units)
    assert got == want
    if got:
        rows1 = 2 * got if gated else got
        assert -(-(k // 4) // (256 // rows1)) + -(-n // 256) * (got // 4) <= MLP_REGS
