"""IR that the real OpenVINO writes, read by ``netpass.read_model`` and run on the reference
evaluator and on ``RUNTIME_DEVICE`` against OpenVINO's CPU plugin on the same files
(``INFERENCE_PRECISION_HINT`` f32; floats within rtol 1e-4, atol 1e-5, also for the files with
f16-compressed weights, since both sides decompress the same f16 values; other types exact;
every input-shape step in ONE infer request). Helpers: ``ov_written_ir.py``.

- Differential fuzz: the ONNX operator-fuzz families (``tests/property/op_fuzz_*``, static
  and dynamic dims), each case converted by ``ov.convert_model`` and written three ways
  (``save_model`` without and with f16 weight compression, ``serialize``); where OpenVINO CPU
  disagrees with onnxruntime on the source model (it departs from the spec there), the case is
  discarded. Derandomized: ``CI_EXAMPLES`` a family in CI, ``SLOW_EXAMPLES`` under ``-m slow``.
- Torch modules (``ov_torch_modules.py``) converted with example inputs and dynamic dims.
- Ops of older opsets that OpenVINO's Python API still builds (Range-1, GatherND-5,
  Broadcast-1), a stateful model (LowLatency2 over torch LSTM / GRU; MakeStateful over a torch
  KV-cache block) run with its state, and netpass's own Serialize of what it read, read back by
  OpenVINO.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import netpass
from netpass.testing import RUNTIME_DEVICE

ov = pytest.importorskip("openvino")
onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "property"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import ov_torch_modules  # noqa: E402
import ov_written_ir as h  # noqa: E402
from op_fuzz_families import FAMILIES  # noqa: E402
from op_fuzz_harness import Invalid as OrtInvalid  # noqa: E402
from op_fuzz_harness import expected as ort_expected  # noqa: E402

CI_EXAMPLES, SLOW_EXAMPLES = 2, 40
HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
CI_TORCH = ("attention", "shapes", "recurrent", "misc")
RNG = np.random.default_rng(11)


def _check_onnx_case(case, folder: Path, variants) -> None:
    """One operator-fuzz case through OpenVINO's ONNX frontend and its writers (``variants``
    of ``ov_written_ir.save_variants``) into netpass."""
    model = case.model()
    try:
        ort = ort_expected(model, case.steps)
    except OrtInvalid:
        assume(False)
    path = folder / "source.onnx"
    onnx.save(model, str(path))
    try:
        converted = ov.convert_model(str(path))
    except Exception:  # (OpenVINO's frontend refuses it: OpConversionFailure and others)
        assume(False)
    steps = [[s[n] for n, _, _ in case.inputs] for s in case.steps]
    try:
        h.refuse_cpu_departures(converted)
        for xml in h.save_variants(converted, folder, variants).values():
            h.check_against_both(xml, steps, ort)
    except h.Invalid:
        assume(False)


def _run_family(family: str, examples: int, every_variant: bool, tmp_path_factory) -> None:
    """``examples`` cases of ``family``, each written by OpenVINO every way (or one drawn)."""
    one = st.sampled_from([(v,) for v in h.VARIANTS])

    @settings(max_examples=examples, derandomize=True, deadline=None, database=None,
              suppress_health_check=HEALTH)
    @given(FAMILIES[family](), st.just(h.VARIANTS) if every_variant else one)
    def run(case, variants):
        _check_onnx_case(case, tmp_path_factory.mktemp(family), variants)

    run()


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_onnx_ops_through_openvino_ir(family, tmp_path_factory):
    _run_family(family, CI_EXAMPLES, False, tmp_path_factory)


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_onnx_ops_through_openvino_ir_slow(family, tmp_path_factory):
    _run_family(family, SLOW_EXAMPLES, True, tmp_path_factory)


def _convert_torch(name: str) -> tuple[object, list[list[np.ndarray]]]:
    """Module ``name`` converted with example inputs and its dynamic dims, and its steps."""
    cls, dynamic, step_shapes = ov_torch_modules.CASES[name]
    torch.manual_seed(0)
    module = cls().eval()
    steps = [ov_torch_modules.feeds(name, shapes, RNG) for shapes in step_shapes]
    example = tuple(torch.from_numpy(a) for a in steps[0])
    inputs = [(ov.PartialShape(list(d)), ov.Type.f32 if a.dtype == np.float32 else ov.Type.i64)
              for d, a in zip(dynamic, steps[0])]
    return ov.convert_model(module, example_input=example, input=inputs), steps


def _check_torch(name: str, folder: Path) -> None:
    converted, steps = _convert_torch(name)
    h.refuse_cpu_departures(converted)
    for xml in h.save_variants(converted, folder).values():
        h.check_ir(xml, steps)


@pytest.mark.parametrize("name", CI_TORCH)
def test_torch_module_ir(name, tmp_path):
    _check_torch(name, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(ov_torch_modules.CASES) - set(CI_TORCH)))
def test_torch_module_ir_slow(name, tmp_path):
    _check_torch(name, tmp_path)


def test_torch_squeeze_of_a_dim_not_one(tmp_path):
    """Regression: ``torch.stack([x, -x]).squeeze(0)`` is a no-op in torch; OpenVINO writes a
    Squeeze-1 listing axis 0 (size 2), which its spec since 2024.3 keeps. netpass refused the
    IR at read ('only axes of size 1 may be removed')."""
    class StackSqueeze(torch.nn.Module):
        def forward(self, x):
            return torch.stack([x, -x], 0).squeeze(0) * 2

    x = np.float32(RNG.uniform(0.5, 2, (2, 3)))
    converted = ov.convert_model(StackSqueeze(), example_input=torch.from_numpy(x))
    xml = h.save_variants(converted, tmp_path, ("f32",))["f32"]
    h.check_ir(xml, [[x], [np.float32(RNG.uniform(0.5, 2, (4, 1)))]])


def _older_opset_models() -> dict[str, tuple[object, list[np.ndarray]]]:
    """Models of ops whose IR version netpass reads with a class of another version (the
    OpenVINO Python API builds these versions; older IR holds them)."""
    import openvino.opset1 as o1
    import openvino.opset5 as o5
    x4 = o1.parameter([-1, -1, 4, 5], np.float32, name="x")
    idx = np.array([[[1], [2], [0]], [[0], [1], [3]]], np.int64)
    gnd = o5.gather_nd(x4, o1.constant(idx), 2)  # v5: batch dims [2, 3] flattened to [6]
    rng = o1.range(o1.constant(np.float32(1.0)), o1.constant(np.float32(7.0)),
                   o1.constant(np.float32(1.5)))  # v1: f32 out, as its inputs
    x2 = o1.parameter([3, 1], np.float32, name="x")
    bc = o1.broadcast(x2, o1.constant(np.array([2, 3, 4], np.int64)))  # v1: 3 inputs, numpy
    ex = o1.broadcast(x2, o1.constant(np.array([3, 2, 4], np.int64)),
                      o1.constant(np.array([0, 2], np.int64)), "explicit")  # mode "none"
    feed4 = np.float32(RNG.standard_normal((2, 3, 4, 5)))
    feed2 = np.float32(RNG.standard_normal((3, 1)))
    return {"gather_nd5": (ov.Model([gnd], [x4]), [feed4]),
            "range1": (ov.Model([rng, o1.relu(x2)], [x2]), [feed2]),
            "broadcast1": (ov.Model([bc, ex], [x2]), [feed2])}


@pytest.mark.parametrize("name", ["gather_nd5", "range1", "broadcast1"])
def test_older_opset_versions(name, tmp_path):
    """Regressions: GatherND-5 was read as v8 (batch dims not flattened: output [2,3,5] for
    OpenVINO's [6,5]); Range-1 as v4 (i64 output for f32 inputs); Broadcast-1 refused (it has
    an axes_mapping input in numpy mode, and spells explicit "none"). Also netpass's own
    Serialize of what it read runs in OpenVINO with the same outputs."""
    model, feeds = _older_opset_models()[name]
    xml = h.save_variants(model, tmp_path, ("f32",))["f32"]
    want = h.openvino_outputs(xml, [feeds])
    h.check_ir(xml, [feeds], want)


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_low_latency_recurrent_ir_runs_with_state(cell, compress, tmp_path):
    """OpenVINO's LowLatency2 over a torch LSTM / GRU (states become variables whose first
    value is the h / c input), saved by OpenVINO: netpass's reference and runtime requests give
    OpenVINO's outputs step by step and its variables' values at the end."""
    from openvino import passes

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = (torch.nn.LSTM if cell == "lstm" else torch.nn.GRU)(4, 6, batch_first=True)
            self.fc = torch.nn.Linear(6, 3)

        def forward(self, x, h, *c):
            y, state = self.rnn(x, (h, c[0]) if c else h)
            return (self.fc(y),) + (state if c else (state,))

    torch.manual_seed(0)
    n_states = 2 if cell == "lstm" else 1
    example = (torch.randn(1, 5, 4),) + tuple(torch.zeros(1, 1, 6) for _ in range(n_states))
    model = ov.convert_model(Net().eval(), example_input=example,
                             input=[ov.PartialShape([1, -1, 4])] +
                             [ov.PartialShape([1, 1, 6])] * n_states)
    manager = passes.Manager()
    manager.register_pass(passes.LowLatency2())
    manager.run_passes(model)
    assert len(model.get_sinks()) == n_states
    xml = h.save_variants(model, tmp_path, ("f16" if compress else "f32",))
    steps = [[np.float32(RNG.standard_normal((1, n, 4)))] +
             [np.float32(RNG.standard_normal((1, 1, 6))) for _ in range(n_states)]
             for n in (3, 1, 2)]
    _check_stateful(next(iter(xml.values())), steps)


def test_make_stateful_kv_cache_ir_runs_with_state(tmp_path):
    """A torch KV-cache block (past keys in, present keys out) converted by OpenVINO, made
    stateful by its MakeStateful and saved with f16 weights: netpass runs it with state."""
    from openvino._offline_transformations import apply_make_stateful_transformation

    class Cache(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.k, self.q = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)

        def forward(self, x, past):
            present = torch.cat([past, self.k(x)], 1)
            scores = torch.softmax(self.q(x) @ present.transpose(1, 2) / 3.0, -1)
            return scores @ present, present

    torch.manual_seed(0)
    model = ov.convert_model(Cache().eval(), example_input=(torch.randn(1, 2, 8),
                                                            torch.randn(1, 3, 8)),
                             input=[ov.PartialShape([1, -1, 8])] * 2)
    model.inputs[1].get_tensor().set_names({"past"})
    model.outputs[1].get_tensor().set_names({"present"})
    apply_make_stateful_transformation(model, {"past": "present"})
    xml = h.save_variants(model, tmp_path, ("f16",))["f16"]
    _check_stateful(xml, [[np.float32(RNG.standard_normal((1, n, 8)))] for n in (3, 1, 2, 1)])


def _check_stateful(xml: Path, steps: list[list[np.ndarray]]) -> None:
    """Step by step outputs and the final variables of netpass's reference and runtime
    requests against OpenVINO CPU's, on the IR at ``xml``."""
    core = ov.Core()
    compiled = core.compile_model(core.read_model(str(xml)), "CPU",
                                  {"INFERENCE_PRECISION_HINT": "f32"})
    ov_req = compiled.create_infer_request()
    want = []
    for feeds in steps:
        res = ov_req.infer(feeds)  # (once per step: each infer advances the state)
        want.append([np.array(res[o]) for o in compiled.outputs])
    want_state = {s.name: np.array(s.state.data) for s in ov_req.query_state()}
    model = netpass.read_model(xml)
    for req in (netpass.reference.create_infer_request(model),
                netpass.compile_model(model, RUNTIME_DEVICE).create_infer_request()):
        for i, (feeds, expected) in enumerate(zip(steps, want)):
            got = list(req.infer(dict(zip(model.input_names, feeds))).values())
            assert len(got) == len(expected)
            for g, w in zip(got, expected):
                h.compare(g, w, f"step {i}")
        state = {s.name: np.asarray(s.state) for s in req.query_state()}
        assert sorted(state) == sorted(want_state)
        for name, value in want_state.items():
            h.compare(state[name], value, f"variable {name}")
