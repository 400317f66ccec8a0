"""Parallel GEMMs merged (netpass.runtime.parallel_gemms): q, k and v projections of one input
become one FullyConnected whose split pieces the heads read, a gated MLP's gate and up one
FullyConnected read by a GatedActivation, the norm in front folds into it, and the results are the
reference's."""
from __future__ import annotations

import numpy as np
import pytest
from graph_blocks import randn_f32, repeat_kv

import netpass
from netpass import Model, opset
from netpass.runtime import program as program_module
from netpass.runtime.kernels.decode_gemv import GEMV_ROWS
from netpass.runtime.norm_gemm import NormDesc
from netpass.runtime.parallel_gemms import GatedDesc, merge_gated_mlps, merge_parallel_gemms
from netpass.testing import RUNTIME_DEVICE

D, HEADS, KV_HEADS = 32, 4, 2
HD = D // HEADS


def _rms(x, rng):
    """transformers' RMSNorm as an export writes it, then its scale."""
    ms = opset.reduce_mean(opset.power(x, np.float32(2.0)), np.array([-1], np.int64), True)
    h = opset.multiply(x, opset.divide(np.float32(1.0), opset.sqrt(opset.add(ms, np.float32(1e-6)))))
    return opset.multiply(h, (1.0 + randn_f32(rng, D, scale=0.2)))


def _heads(y, shape_src, heads):
    """[b, s, heads * HD] -> [b, heads, s, HD], the target's b and s read off ``shape_src``."""
    bs = opset.gather(opset.shape_of(shape_src), np.array([0, 1], np.int64), np.int64(0))
    target = opset.concat([bs, np.array([heads, HD], np.int64)], 0)
    return opset.transpose(opset.reshape(y, target, False), np.array([0, 2, 1, 3], np.int64))


def _attention_model(rng):
    """A LLaMA-style attention block: RMSNorm, separate q / k / v Linears (grouped k and v),
    the heads' reshapes (their target from the norm's shape), attention over the heads."""
    x = opset.parameter([1, -1, D], np.float32, name="x")
    h = _rms(x, rng)
    q = _heads(opset.matmul(h, randn_f32(rng, D, HEADS * HD), False, False), h, HEADS)
    k, v = (repeat_kv(_heads(opset.matmul(h, randn_f32(rng, D, KV_HEADS * HD), False, False), h,
                             KV_HEADS), KV_HEADS, HEADS // KV_HEADS, HD) for _ in range(2))
    s = opset.multiply(opset.matmul(q, k, False, True), np.float32(HD ** -0.5))
    y = opset.matmul(opset.softmax(s, -1), v, False, False)
    return Model([opset.result(y, name="y")], [x])


def _gated_mlp_model(rng, silu="swish"):
    """RMSNorm, then LLaMA's MLP: down(silu(gate(h)) * up(h)), the SiLU as a Swish op or as
    ``g * sigmoid(g)`` (``"sigmoid"``; ``"sigmoid_first"``: the operands the other way)."""
    x = opset.parameter([1, -1, D], np.float32, name="x")
    h = _rms(x, rng)
    gate = opset.matmul(h, randn_f32(rng, D, 2 * D), False, False)
    up = opset.matmul(h, randn_f32(rng, D, 2 * D), False, False)
    if silu == "swish":
        act = opset.swish(gate)
    elif silu == "sigmoid":
        act = opset.multiply(gate, opset.sigmoid(gate))
    else:
        act = opset.multiply(opset.sigmoid(gate), gate)
    y = opset.matmul(opset.multiply(up, act), randn_f32(rng, 2 * D, D), False, False)
    return Model([opset.result(y, name="y")], [x])


def _compiled(model):
    cm = netpass.compile_model(model, RUNTIME_DEVICE, {"TRANSFORMATIONS": "NONE"})
    return cm, cm.runtime.program


def _kinds(program) -> list[str]:
    return [n.kind for n in program.nodes]


def _gated(n) -> bool:
    """Whether ``n`` reads a gated MLP's halves (GatedDesc), itself or under the fold of its
    up projection (fused_mlp.MlpDesc)."""
    return isinstance(n.subgraph, GatedDesc) or isinstance(getattr(n.subgraph, "inner", None),
                                                           GatedDesc)


def test_q_k_v_merge_into_one_normalized_gemm(rng):
    _, prog = _compiled(_attention_model(rng))
    fcs = [n for n in prog.nodes if n.kind == "FullyConnected"]
    assert len(fcs) == 1 and isinstance(fcs[0].subgraph, NormDesc)  # the norm folded into it
    assert fcs[0].inputs[1][0].value.shape == (D + 2 * KV_HEADS * HD, D)
    split = next(n for n in prog.nodes if n.kind == "VariadicSplit")
    assert "RmsNorm" not in _kinds(prog) and split.strided_view  # (views: no launch)


@pytest.mark.parametrize("rows", [[1, 5, 1], [7, 1, 2]])
def test_merged_gemm_matches_the_reference(rng, rows):
    """Prompts and single-token steps through one request, rows with a large mean."""
    model = _attention_model(rng)
    cm, _ = _compiled(model)
    req = cm.create_infer_request()
    for s in rows:
        feeds = {"x": (5.0 + randn_f32(rng, 1, s, D)).astype(np.float32)}
        np.testing.assert_allclose(req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"],
                                   rtol=1e-4, atol=1e-5)


def test_merging_saves_launches(rng, monkeypatch):
    """One launch for the three projections' three; the split pieces are views. (Apart, each
    projection folds the norm itself: norm_gemm folds a norm into all the GEMMs reading it.)"""
    model = _attention_model(rng)
    feeds = {"x": randn_f32(rng, 1, 3, D)}
    merged = _compiled(model)[0].create_infer_request()
    merged.infer(feeds)
    passes = tuple(p for p in program_module.NODE_PASSES if p is not merge_parallel_gemms)
    monkeypatch.setattr(program_module, "NODE_PASSES", passes)
    apart = _compiled(model)[0].create_infer_request()
    apart.infer(feeds)
    assert apart.stats["kernels_enqueued"] - merged.stats["kernels_enqueued"] == 2


@pytest.mark.parametrize("silu", ["swish", "sigmoid", "sigmoid_first"])
def test_gated_mlp_merges_into_one_normalized_gemm(rng, monkeypatch, silu):
    """gate and up stacked into one FullyConnected with the norm folded in, the down
    projection reading its halves (GatedDesc: no GatedActivation left): two launches where gate,
    up and down took three (four before norm_gemm folded a norm into each of its readers); the
    reference's results over prompts and single rows."""
    model = _gated_mlp_model(rng, silu)
    cm, prog = _compiled(model)
    fcs = [n for n in prog.nodes if n.kind == "FullyConnected"]
    assert len(fcs) == 2 and isinstance(fcs[0].subgraph, NormDesc)
    assert _gated(fcs[1]) and fcs[1].inputs[0] == (fcs[0], 0)
    assert fcs[0].inputs[1][0].value.shape == (4 * D, D)
    assert "GatedActivation" not in _kinds(prog) and "RmsNorm" not in _kinds(prog)
    req = cm.create_infer_request()
    for s in (1, 4, 1):
        feeds = {"x": (3.0 + randn_f32(rng, 1, s, D)).astype(np.float32)}
        want = netpass.reference.infer(model, feeds)["y"]
        # (outputs up to ~1e3 with some near 0: float32 sums of that scale differ by ~1e-4
        # absolute with the device's FMA contraction, so atol follows the outputs' scale)
        np.testing.assert_allclose(req.infer(feeds)["y"], want, rtol=1e-4,
                                   atol=1e-6 * float(np.abs(want).max()))
    passes = tuple(p for p in program_module.NODE_PASSES if p is not merge_gated_mlps)
    monkeypatch.setattr(program_module, "NODE_PASSES", passes)
    apart = _compiled(model)[0].create_infer_request()
    for s in (1, 4, 1):
        apart.infer({"x": randn_f32(rng, 1, s, D)})
    # (one row: one launch, the up projection folded into the down one: fused_mlp)
    assert req.stats["kernels_enqueued"] == 4
    # (apart: gate and up each fold the norm, norm_gemm, the up one's epilogue the product;
    # then down: three launches a step)
    assert apart.stats["kernels_enqueued"] == 9


@pytest.mark.parametrize("rows", [1, 3, 20])
def test_gated_down_projection_over_prompts_and_steps(rng, rows):
    """The down projection of a gated MLP reads the stacked GEMM's halves: a few rows as GEMVs
    taking act(g) * u as they read them (one launch), more as a GatedActivation's rows made in the
    projection's own impl, then the GEMM (two); equal to the reference, odd K too."""
    k = 2 * D + 3  # (the scalar loads: K not a multiple of 4)
    x = opset.parameter([1, -1, D], np.float32, name="x")
    h = _rms(x, rng)
    gate = opset.matmul(h, randn_f32(rng, D, k), False, False)
    up = opset.matmul(h, randn_f32(rng, D, k), False, False)
    y = opset.matmul(opset.multiply(opset.swish(gate), up), randn_f32(rng, k, D), False, False)
    model = Model([opset.result(y, name="y")], [x])
    cm, prog = _compiled(model)
    assert any(_gated(n) for n in prog.nodes)
    req = cm.create_infer_request()
    feeds = {"x": (1.0 + randn_f32(rng, 1, rows, D)).astype(np.float32)}
    want = netpass.reference.infer(model, feeds)["y"]
    np.testing.assert_allclose(req.infer(feeds)["y"], want, rtol=1e-4,
                               atol=1e-6 * float(np.abs(want).max()))
    if RUNTIME_DEVICE == "CPU":  # (PoCL: no tensor cores; a GPU may take other kernels)
        assert req.stats["kernels_enqueued"] == (2 if rows <= GEMV_ROWS else 3)


def test_gated_down_projection_reference_on_the_host(rng):
    """GatedDesc's shape rule and host reference: the GatedActivation's, then the projection's."""
    model = _gated_mlp_model(rng)
    _, prog = _compiled(model)
    down = next(n for n in prog.nodes if _gated(n))
    stacked = randn_f32(rng, 2, 3, 4 * D)
    w, b = down.inputs[1][0].value, down.inputs[2][0].value
    assert down.subgraph.infer_shapes([stacked.shape, w.shape, b.shape], {}) == [(2, 3, D)]
    g, u = stacked[..., :2 * D], stacked[..., 2 * D:]
    act = g / (1 + np.exp(-g)) * u
    np.testing.assert_allclose(down.subgraph.evaluate([stacked, w, b])[0],
                               act @ w.T + b, rtol=1e-5, atol=1e-4)


def test_a_gate_read_elsewhere_stays_apart(rng):
    """A gate projection with another reader (its output a model output too) is not merged."""
    x = opset.parameter([1, -1, D], np.float32, name="x")
    gate = opset.matmul(x, randn_f32(rng, D, 2 * D), False, False)
    up = opset.matmul(x, randn_f32(rng, D, 2 * D), False, False)
    model = Model([opset.result(opset.multiply(opset.swish(gate), up), name="y"),
                   opset.result(gate, name="g")], [x])
    cm, prog = _compiled(model)
    assert "GatedActivation" not in _kinds(prog)
    feeds = {"x": randn_f32(rng, 1, 3, D)}
    got, want = cm.create_infer_request().infer(feeds), netpass.reference.infer(model, feeds)
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-4, atol=1e-5)


def test_shape_reads_move_upstream(rng):
    """The heads' ShapeOf reads the norm's input, not its output (same shape)."""
    _, prog = _compiled(_attention_model(rng))
    shape_ofs = [n for n in prog.nodes if n.kind == "ShapeOf"]
    assert shape_ofs and all(n.inputs[0][0].is_parameter for n in shape_ofs)


def _chunked_gated_mlp(rng, first=(0, 2 * D), second=(2 * D, 1 << 62), how="slices"):
    """Phi-3's MLP: one projection to gate and up side by side, chunked in two along the
    last axis (``how``: Slices ``first`` and ``second`` as TorchScript exports them, a Split
    in two as dynamo does, a VariadicSplit), ``up * silu(gate)``, then down."""
    x = opset.parameter([1, -1, D], np.float32, name="x")
    gate_up = opset.matmul(_rms(x, rng), randn_f32(rng, D, 4 * D), False, False)
    if how == "slices":
        gate, up = (opset.slice(gate_up, [b[0]], [b[1]], [1], [-1]) for b in (first, second))
    else:
        cut = opset.split(gate_up, -1, 2) if how == "split" else \
            opset.variadic_split(gate_up, -1, [2 * D, -1])
        gate, up = cut.output(0), cut.output(1)
    act = opset.multiply(up, opset.multiply(gate, opset.sigmoid(gate)))
    y = opset.matmul(act, randn_f32(rng, first[1] - first[0], D), False, False)
    return Model([opset.result(y, name="y")], [x])


@pytest.mark.parametrize("how", ["slices", "split", "variadic"])
@pytest.mark.parametrize("rows", [1, 20])
def test_chunked_gate_and_up_read_by_the_down_projection(rng, rows, how):
    """The halves of one projection (Phi-3) as gate and up: no Slice, Split or GatedActivation left,
    the down projection reads the projection's output (GatedDesc); equal to the reference."""
    model = _chunked_gated_mlp(rng, how=how)
    cm, prog = _compiled(model)
    assert not {"Slice", "Split", "VariadicSplit", "GatedActivation"} & set(_kinds(prog))
    assert sum(_gated(n) for n in prog.nodes) == 1
    req = cm.create_infer_request()
    feeds = {"x": (2.0 + randn_f32(rng, 1, rows, D)).astype(np.float32)}
    want = netpass.reference.infer(model, feeds)["y"]
    np.testing.assert_allclose(req.infer(feeds)["y"], want, rtol=1e-4,
                               atol=1e-6 * float(np.abs(want).max()))


def test_slices_that_are_not_halves_stay_apart(rng):
    """Gate and up cut at another place than the middle are not a GatedActivation's halves."""
    model = _chunked_gated_mlp(rng, first=(0, 2 * D - 4), second=(2 * D - 4, 4 * D - 8))
    cm, prog = _compiled(model)
    assert "GatedActivation" not in _kinds(prog)
    feeds = {"x": randn_f32(rng, 1, 3, D)}
    want = netpass.reference.infer(model, feeds)["y"]
    np.testing.assert_allclose(cm.create_infer_request().infer(feeds)["y"], want, rtol=1e-4,
                               atol=1e-6 * float(np.abs(want).max()))


# -- gates of other activations than SiLU --------------------------------------------------------
def _gelu_tanh_torchscript(g):
    """transformers' gelu_pytorch_tanh as the TorchScript export writes it (Gemma): the cube
    as two products, the constants on the left."""
    cube = opset.multiply(g, opset.multiply(g, g))
    inner = opset.add(g, opset.multiply(np.float32(0.044715), cube))
    t = opset.tanh(opset.multiply(np.float32(0.7978846), inner))
    return opset.multiply(np.float32(0.5), opset.multiply(g, opset.add(np.float32(1.0), t)))


def _gelu_tanh_dynamo(g):
    """The same as dynamo writes it: a Power of 3, the half taken before the product."""
    inner = opset.add(g, opset.multiply(np.float32(0.044715), opset.power(g, np.float32(3.0))))
    t = opset.tanh(opset.multiply(np.float32(0.7978846), inner))
    return opset.multiply(g, opset.multiply(np.float32(0.5), opset.add(t, np.float32(1.0))))


GATES = {"gelu_tanh_torchscript": _gelu_tanh_torchscript, "gelu_tanh_dynamo": _gelu_tanh_dynamo,
         "gelu_tanh_op": lambda g: opset.gelu(g, "tanh"), "gelu_erf": lambda g: opset.gelu(g, "erf"),
         "relu": opset.relu}


def _gate_model(rng, gate_act, k=2 * D, up_first=False):
    """RMSNorm, then ``down(act(gate(h)) * up(h))`` (``up_first``: the product's operands the
    other way)."""
    x = opset.parameter([1, -1, D], np.float32, name="x")
    h = _rms(x, rng)
    gate = opset.matmul(h, randn_f32(rng, D, k, scale=0.5), False, False)
    up = opset.matmul(h, randn_f32(rng, D, k, scale=0.5), False, False)
    act = GATES[gate_act](gate)
    prod = opset.multiply(up, act) if up_first else opset.multiply(act, up)
    y = opset.matmul(prod, randn_f32(rng, k, D), False, False)
    return Model([opset.result(y, name="y")], [x])


def _rel_l2(got, want) -> float:
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


@pytest.mark.parametrize("gate_act", sorted(GATES))
def test_a_gate_of_any_elementwise_activation_merges(rng, gate_act):
    """GELU (tanh written out as either exporter writes it, or a Gelu op of either mode) and
    ReLU gates merge as SiLU's do: one stacked, normalized GEMM whose halves the down
    projection reads (GatedDesc), the activation's ops in its desc and its key; prompts and
    single rows equal to the reference."""
    model = _gate_model(rng, gate_act, up_first=gate_act == "relu")
    cm, prog = _compiled(model)
    fcs = [n for n in prog.nodes if n.kind == "FullyConnected"]
    assert len(fcs) == 2 and isinstance(fcs[0].subgraph, NormDesc)
    assert _gated(fcs[1]) and fcs[1].inputs[0] == (fcs[0], 0)
    assert not {"GatedActivation", "Tanh", "Gelu", "Relu", "Power"} & set(_kinds(prog))
    gated = getattr(fcs[1].subgraph, "inner", fcs[1].subgraph)  # (under fused_mlp's fold)
    gate = gated.gate
    ops = {f.row.name for f in gate.act}
    assert ops == {"gelu_tanh_torchscript": {"Multiply", "Add", "Tanh"},
                   "gelu_tanh_dynamo": {"Multiply", "Add", "Tanh", "Power"},
                   "gelu_tanh_op": {"Gelu"}, "gelu_erf": {"Gelu"}, "relu": {"Relu"}}[gate_act]
    assert gated.key() == ("gated", gate.key())  # (impls of other gates are not shared)
    req = cm.create_infer_request()
    for s in (1, 4, 1, 11):
        feeds = {"x": (1.0 + randn_f32(rng, 1, s, D)).astype(np.float32)}
        assert _rel_l2(req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]) <= 1e-5


def test_gates_of_other_activations_key_apart(rng):
    """Two GELU modes over the same shapes: keys differ (each impl its own kernel)."""
    keys = set()
    for act in ("gelu_erf", "gelu_tanh_op"):
        _, prog = _compiled(_gate_model(np.random.default_rng(0), act))
        keys.add(next(n for n in prog.nodes if _gated(n)).subgraph.key())
    assert len(keys) == 2


@pytest.mark.parametrize("gate_act", ["gelu_tanh_torchscript", "gelu_erf", "relu"])
@pytest.mark.parametrize("rows", [1, 3, 20])
def test_a_gelu_gated_down_projection_over_prompts_and_steps(rng, gate_act, rows):
    """The gated down projection of a non-SiLU gate: a few rows as GEMVs taking act(g) * u as
    they read them, more as the GatedActivation's rows made in its impl then the GEMM; odd K
    (the scalar loads) too."""
    model = _gate_model(rng, gate_act, k=2 * D + 3)
    cm, prog = _compiled(model)
    assert any(_gated(n) for n in prog.nodes)
    feeds = {"x": (1.0 + randn_f32(rng, 1, rows, D)).astype(np.float32)}
    req = cm.create_infer_request()
    assert _rel_l2(req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"]) <= 1e-5
    if RUNTIME_DEVICE == "CPU":  # (PoCL: no tensor cores; a GPU may take other kernels)
        assert req.stats["kernels_enqueued"] == (2 if rows <= GEMV_ROWS else 3)


@pytest.mark.parametrize("gate_act", ["gelu_tanh_dynamo", "gelu_erf", "relu"])
def test_a_gated_activation_read_by_no_projection_runs_its_own_kernel(rng, gate_act):
    """A gated product that is the model's output: the GatedActivation's own launch after the
    stacked GEMM; equal to the reference, its host reference too."""
    x = opset.parameter([1, -1, D], np.float32, name="x")
    wg, wu = randn_f32(rng, D, 2 * D, scale=0.5), randn_f32(rng, D, 2 * D, scale=0.5)
    gate, up = opset.matmul(x, wg, False, False), opset.matmul(x, wu, False, False)
    model = Model([opset.result(opset.multiply(GATES[gate_act](gate), up), name="y")], [x])
    cm, prog = _compiled(model)
    (act,) = [n for n in prog.nodes if n.kind == "GatedActivation"]
    feeds = {"x": randn_f32(rng, 1, 5, D)}
    want = netpass.reference.infer(model, feeds)["y"]
    req = cm.create_infer_request()
    assert _rel_l2(req.infer(feeds)["y"], want) <= 1e-5
    assert req.stats["kernels_enqueued"] == 2
    stacked = np.concatenate([feeds["x"] @ wg, feeds["x"] @ wu], axis=-1)
    assert _rel_l2(act.subgraph.evaluate([stacked])[0], want) <= 1e-5


def _look_alike(rng, how):
    """Products of two projections that are no gated MLP the kernels take."""
    x = opset.parameter([1, -1, D], np.float32, name="x")
    gate = opset.matmul(x, randn_f32(rng, D, 2 * D, scale=0.5), False, False)
    up = opset.matmul(x, randn_f32(rng, D, 2 * D, scale=0.5), False, False)
    if how == "after_product":  # (the activation of the product: nothing gates)
        act = opset.gelu(opset.multiply(gate, up), "tanh")
    elif how == "both":  # (an activation of the up projection as well)
        act = opset.multiply(opset.gelu(gate, "tanh"), opset.relu(up))
    elif how == "softmax":  # (a non-elementwise op between the gate and its activation)
        act = opset.multiply(opset.gelu(opset.softmax(gate, -1), "erf"), up)
    elif how == "vector":  # (a per-channel constant: no literal)
        act = opset.multiply(opset.multiply(opset.relu(gate), randn_f32(rng, 2 * D)), up)
    elif how == "rank":  # (a scalar of more dims: the activation grows the gate's rank)
        act = opset.multiply(opset.multiply(opset.relu(gate), randn_f32(rng, 1, 1, 1, 1)), up)
    else:  # "other_tensor": (the activation reads another tensor than the gate)
        act = opset.multiply(opset.relu(opset.add(gate, opset.concat([x, x], -1))), up)
    y = opset.matmul(act, randn_f32(rng, 2 * D, D), False, False)
    return Model([opset.result(y, name="y")], [x])


@pytest.mark.parametrize("how", ["after_product", "both", "softmax", "vector", "rank",
                                 "other_tensor"])
def test_look_alikes_stay_unmerged(rng, how):
    """Products of two projections whose gate is not an elementwise function of the gate's
    output alone (or with no activation at all) keep their three projections."""
    model = _look_alike(rng, how)
    cm, prog = _compiled(model)
    assert "GatedActivation" not in _kinds(prog) and not any(_gated(n) for n in prog.nodes)
    assert sum(n.kind == "FullyConnected" for n in prog.nodes) == 3
    feeds = {"x": randn_f32(rng, 1, 3, D)}
    want = netpass.reference.infer(model, feeds)["y"]
    assert _rel_l2(cm.create_infer_request().infer(feeds)["y"], want) <= 1e-5
