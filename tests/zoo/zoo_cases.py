"""What the transformers-zoo tests run on (``conftest.py`` puts ``tools/`` on the path): the
zoo's (model, exporter) pairs from ``tools/export_zoo.py`` and ``tools/zoo_archs.py``, the
committed examples with the dynamic axes their ONNX files declare, exports made once per test
session, and the step-by-step check against onnxruntime."""
from __future__ import annotations

from pathlib import Path

import export_zoo
import numpy as np
import onnx
import zoo_archs

import netpass

ROOT = Path(__file__).resolve().parents[2]

REL_L2 = 1e-4
EXAMPLES_DIR = ROOT / "examples"

# (model, exporter) pairs the tool exports
ZOO_PAIRS = [(name, exporter) for name in export_zoo.SPECS for exporter in export_zoo.EXPORTERS
             if (name, exporter) not in export_zoo.EXPORT_FAILURES]
# ... and those of the more architectures (``tools/zoo_archs.py``)
ARCH_PAIRS = [(name, exporter) for name in zoo_archs.SPECS for exporter in export_zoo.EXPORTERS
              if (name, exporter) not in zoo_archs.EXPORT_FAILURES]
SPECS = {**export_zoo.SPECS, **zoo_archs.SPECS}
EXAMPLES = sorted(p.stem for p in EXAMPLES_DIR.glob("*.onnx"))

_FLOAT = {onnx.TensorProto.FLOAT}


def example_domain(name: str) -> export_zoo.Domain:
    """The inputs of ``examples/<name>.onnx`` and its named dynamic axes: a name with
    "batch" in it draws 1..3, any other 1..16."""
    graph = onnx.load(EXAMPLES_DIR / f"{name}.onnx", load_external_data=False).graph
    weights = {t.name for t in graph.initializer}
    inputs, axes = [], {}
    for value in graph.input:
        if value.name in weights:
            continue
        tensor = value.type.tensor_type
        if tensor.elem_type not in _FLOAT:
            raise ValueError(f"example '{name}': input '{value.name}' is not float32")
        dims = tuple(d.dim_param or d.dim_value for d in tensor.shape.dim)
        for d in dims:
            if isinstance(d, str) and d not in axes:
                axes[d] = export_zoo.Axis(d, 1, 3 if "batch" in d else 16, 2)
        inputs.append(export_zoo.InputSpec(value.name, dims))
    return export_zoo.Domain(tuple(inputs), tuple(axes.values()))


def case_id(name: str, exporter: str) -> str:
    return f"{name}.{exporter}"


class Zoo:
    """Exports, netpass models and onnxruntime sessions, each made once per session."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir
        self._paths: dict[str, Path] = {}
        self._models: dict[str, netpass.Model] = {}
        self._sessions: dict[str, object] = {}

    def path(self, name: str, exporter: str) -> Path:
        """The ONNX file of a zoo pair (exporter ``"example"``: ``examples/<name>.onnx``)."""
        key = case_id(name, exporter)
        if key not in self._paths:
            if exporter == "example":
                self._paths[key] = EXAMPLES_DIR / f"{name}.onnx"
            else:
                self._paths[key] = export_zoo.export(SPECS[name], exporter, self.out_dir)
        return self._paths[key]

    def domain(self, name: str, exporter: str) -> export_zoo.Domain:
        return example_domain(name) if exporter == "example" else SPECS[name].domain

    def model(self, name: str, exporter: str) -> netpass.Model:
        """The model as read (tests compile it; ``compile_model`` leaves it unchanged)."""
        key = case_id(name, exporter)
        if key not in self._models:
            self._models[key] = netpass.read_model(self.path(name, exporter))
        return self._models[key]

    def expected(self, name: str, exporter: str, feeds: dict) -> dict[str, np.ndarray]:
        """onnxruntime's outputs (CPU) on the exported file."""
        import onnxruntime as ort
        key = case_id(name, exporter)
        if key not in self._sessions:
            self._sessions[key] = ort.InferenceSession(str(self.path(name, exporter)),
                                                       providers=["CPUExecutionProvider"])
        sess = self._sessions[key]
        names = [o.name for o in sess.get_outputs()]
        return dict(zip(names, sess.run(None, feeds)))


def assert_close(got: dict, want: dict, what: str, tol: float = REL_L2) -> None:
    """Same output names and shapes, and each output within ``tol`` relative L2."""
    assert set(got) == set(want), f"{what}: outputs {sorted(got)} != {sorted(want)}"
    for key, ref in want.items():
        assert got[key].shape == ref.shape, f"{what}: {key} shape {got[key].shape} != {ref.shape}"
        err = export_zoo.rel_l2(got[key], ref)
        assert err <= tol, f"{what}: {key} relative L2 error {err:.3g} > {tol}"
