"""Suite-wide pytest settings: xdist's worker count, the ONNX backend conformance counts
printed after a run that ran conformance cases (tests/conformance), also when xdist workers
ran them, and onnxruntime sessions for models of an IR version newer than it reads."""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

# pyproject's addopts run the suite on `-n auto` xdist workers, whole files per worker
# (`--dist loadfile`): a session fixture (the zoo's exports) is made at most once per worker.
MAX_WORKERS = 4  # each worker holds torch, onnxruntime and its own compiled models

def _newest_ir_version(ort, onnx) -> int:
    """The newest IR version the installed onnxruntime loads (onnx's own, or lower)."""
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    for version in range(onnx.IR_VERSION, 7, -1):
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                                  ir_version=version)
        try:
            ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        except Exception:
            continue
        return version
    return onnx.IR_VERSION


def _onnxruntime_reads_our_models() -> None:
    """``onnx.helper.make_model`` writes onnx's IR version, and an onnxruntime older than the
    installed onnx refuses it ("Unsupported model IR version") although the tests' models use
    nothing of the newer IR (the GPU machine's onnxruntime reads IR 13, its onnx writes 14). A
    session there gets its model at the newest version that onnxruntime reads."""
    try:
        import onnx
        import onnxruntime as ort
    except ImportError:
        return
    newest = _newest_ir_version(ort, onnx)
    if newest >= onnx.IR_VERSION:
        return
    init = ort.InferenceSession.__init__

    def readable(model):
        if isinstance(model, (str, os.PathLike)):
            proto = onnx.load(os.fspath(model))
        elif isinstance(model, (bytes, bytearray)):
            proto = onnx.load_from_string(bytes(model))
        else:
            return model
        if proto.ir_version <= newest:
            return model
        proto.ir_version = newest
        return proto.SerializeToString()

    def session_init(self, path_or_bytes, *args, **kwargs):
        init(self, readable(path_or_bytes), *args, **kwargs)

    ort.InferenceSession.__init__ = session_init


_onnxruntime_reads_our_models()


# what xdist workers sent of their conformance outcomes: target -> case -> (status, reason)
_from_workers: dict[str, dict[str, tuple[str, str]]] = {}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Workers for ``-n auto``: one per CPU, at most MAX_WORKERS (PoCL's kernels already use
    every core, and a worker takes a few GiB)."""
    return max(1, min(MAX_WORKERS, os.cpu_count() or 1))


def _outcomes_here() -> dict[str, dict[str, tuple[str, str]]]:
    """This process's conformance outcomes (tests/conformance/_cases.py, when it ran)."""
    cases = sys.modules.get("_cases")
    if cases is None:
        return {}
    return {target: {name: (o.status, o.reason) for name, o in outcomes.items()}
            for target, outcomes in cases.OUTCOMES.items() if outcomes}


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # (an xdist worker: its outcomes go to the controller)
        workeroutput["conformance"] = _outcomes_here()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    for target, outcomes in getattr(node, "workeroutput", {}).get("conformance", {}).items():
        _from_workers.setdefault(target, {}).update(outcomes)


def _tool():
    """tools/conformance.py (the counts' format and the passing lists)."""
    if "netpass_conformance_tool" in sys.modules:
        return sys.modules["netpass_conformance_tool"]
    path = Path(__file__).resolve().parents[1] / "tools" / "conformance.py"
    spec = importlib.util.spec_from_file_location("netpass_conformance_tool", path)
    tool = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = tool  # (dataclasses resolve their module by name)
    spec.loader.exec_module(tool)
    return tool


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """The counts by status and reason per target; names passing cases the lists lack."""
    seen = _from_workers or _outcomes_here()
    if not seen:
        return
    tool = _tool()
    for target, pairs in seen.items():
        outcomes = {name: tool.Outcome(status, reason) for name, (status, reason) in pairs.items()}
        terminalreporter.write_sep("-", f"ONNX backend conformance: {target}")
        terminalreporter.write_line(tool.summary(outcomes, target))
        listed = set(tool.read_list(tool.list_path(target))) & set(outcomes)
        _, new = tool.compare_to_list(outcomes, listed)
        if new:
            terminalreporter.write_line(
                f"  {len(new)} passing cases are not in {tool.list_path(target).name}: "
                "run `python tools/conformance.py --update`")


@pytest.fixture
def emulated_flash(monkeypatch):
    """The PoCL engine with emulated tensor cores (``kernels.mma``'s MMA and shuffles through
    local memory) and the flash attention kernel taken from 4 query rows: the tensor-core
    attention's tests run it on the CPU."""
    from netpass.runtime.device import Engine, select_device
    from netpass.runtime.kinds import attention as attention_kind
    eng = Engine.get(select_device("CPU"))
    monkeypatch.setattr(eng, "mma", "emulated")
    monkeypatch.setattr(attention_kind, "FLASH_MIN_M", 4)
    return eng
