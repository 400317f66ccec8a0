"""The zoo's encoders on the tensor-core flash attention kernel (emulated on PoCL): BERT (key
padding mask), ViT (no mask, interpolated positions), Whisper's encoder (fixed frames) and
Swin (window attention: a relative position bias and the shifted windows' mask, two side
inputs), each as both exporters write it at the export sizes. One request runs three other
input sizes; each attention block is one FusedAttention node that ran the flash kernel, and
the outputs are within 1e-4 relative L2 of onnxruntime's (float32: 3xTF32 fragments).
``test_transformers_zoo.py`` checks the same exports on the row kernels."""
from __future__ import annotations

from collections import Counter

import export_zoo
import numpy as np
import pytest
from zoo_cases import assert_close, case_id

import netpass
from netpass.testing import RUNTIME_DEVICE

ENCODERS = ["bert", "vit", "whisper_encoder", "swin"]
pytestmark = [pytest.mark.skipif(RUNTIME_DEVICE != "CPU", reason="emulated tensor cores on PoCL"),
              pytest.mark.slow]


def _other_sizes(spec: export_zoo.ZooSpec, count: int = 3) -> list[dict[str, int]]:
    """``count`` seeded axis sizes, each axis away from its export size where it has others."""
    rng = np.random.default_rng(5)
    out = []
    for _ in range(count):
        out.append({a.name: int(rng.choice([s for s in a.sizes() if s != a.export] or [a.export]))
                    for a in spec.axes})
    return out


@pytest.mark.parametrize("zoo_case", [pytest.param((n, e), id=case_id(n, e))
                                      for n in ENCODERS for e in export_zoo.EXPORTERS],
                         indirect=True)
def test_encoder_attention_on_the_flash_kernel(zoo, zoo_case, emulated_flash):
    name, exporter = zoo_case
    spec = export_zoo.SPECS[name]
    compiled = netpass.compile_model(zoo.model(name, exporter), RUNTIME_DEVICE,
                                     {"TRANSFORMATIONS": "NONE"})
    kinds = Counter(n.kind for n in compiled.runtime.program.nodes if not n.shape_only)
    assert (kinds["FusedAttention"], kinds["Softmax"]) == (spec.attention, 0)
    req = compiled.create_infer_request()
    rng = np.random.default_rng(1)
    for step, sizes in enumerate(_other_sizes(spec)):
        feeds = export_zoo.feeds(spec.domain, sizes, rng)
        assert_close(req.infer(feeds), zoo.expected(name, exporter, feeds), f"step {step} {sizes}")
    network = req._runtime_request.network
    assert any("flash_attention(" in key[2] for key in network.kernel_objects)
