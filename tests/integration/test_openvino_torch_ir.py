"""The IR OpenVINO writes for transformers models converted from torch
(``openvino.convert_model(module)`` then ``save_model``, weights compressed to f16 as by
default): netpass reads it (ScaledDotProductAttention, f16 weights decompressed by Convert)
and, under each TRANSFORMATIONS setting on RUNTIME_DEVICE, gives OpenVINO's CPU outputs on the
same IR over three input shapes in one request (rel. L2 <= 1e-4). The models are the zoo's
small configs with random weights (``tools/export_zoo.py``)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import netpass
from netpass.testing import RUNTIME_DEVICE

ov = pytest.importorskip("openvino")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import export_zoo  # noqa: E402

REL_L2 = 1e-4


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """name -> (IR path, spec), converted once per module."""
    out, cache = tmp_path_factory.mktemp("ov_torch_ir"), {}

    def get(name: str):
        if name not in cache:
            spec = export_zoo.SPECS[name]
            feeds = export_zoo.feeds(spec.domain, spec.export_sizes(), np.random.default_rng(0))
            args = tuple(torch.from_numpy(feeds[i.name]) for i in spec.inputs)
            path = out / f"{name}.xml"
            ov.save_model(ov.convert_model(export_zoo.build(spec), example_input=args), path)
            cache[name] = path, spec
        return cache[name]
    return get


@pytest.mark.parametrize("transformations", ["NONE", "COMMON", "GNA"])
@pytest.mark.parametrize("name", ["bert", "gpt2", "llama", "vit"])
def test_torch_frontend_ir_matches_openvino(converted, name, transformations):
    path, spec = converted(name)
    model = netpass.read_model(path)
    assert "ScaledDotProductAttention" in {n.type_name for n in model.get_ordered_ops()}
    ov_model = ov.Core().read_model(path)
    compiled = ov.Core().compile_model(ov_model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    req = netpass.compile_model(model, RUNTIME_DEVICE,
                                {"TRANSFORMATIONS": transformations}).create_infer_request()
    rng = np.random.default_rng(5)
    for sizes in export_zoo.default_sequence(spec)[:3]:
        feeds = export_zoo.feeds(spec.domain, sizes, rng)
        args = [feeds[i.name] for i in spec.inputs]
        want = list(compiled(args).values())
        got = list(req.infer(dict(zip(model.input_names, args))).values())
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == w.shape, f"{sizes}: {g.shape} != {w.shape}"
            err = export_zoo.rel_l2(g, w)
            assert err <= REL_L2, f"{name} {transformations} at {sizes}: rel. L2 {err:.2e}"
