"""HOST_FALLBACK (DESIGN section 11): by default ops without a device kernel run on the host and
are counted in ``stats["host_fallbacks"]`` / ``["host_fallback_kinds"]``, data-sized ones
(NonZero) included; with HOST_FALLBACK False such a model fails to compile with a
HostFallbackError naming every such op, and a model whose ops all have kernels compiles."""
from __future__ import annotations

import numpy as np
import pytest

import netpass
from netpass import Model, opset
from netpass.errors import HostFallbackError
from netpass.testing import RUNTIME_DEVICE

FEED = {"x": np.random.default_rng(1).standard_normal((2, 6)).astype(np.float32)}


def _fallback_model():
    x = opset.parameter([2, 6], "f32", "x")
    h = opset.hardmax(opset.relu(x), 1)
    nz = opset.non_zero(opset.greater(x, np.float32(0)))
    return Model([h.output(0), opset.convert(nz, "f32").output(0)], [x])


def test_fallbacks_are_counted_by_kind():
    req = netpass.compile_model(_fallback_model(), device=RUNTIME_DEVICE).create_infer_request()
    for _ in range(2):
        req.infer(FEED)
    assert req.stats["host_fallback_kinds"] == {"Hardmax": 2, "NonZero": 2}
    assert req.stats["host_fallbacks"] == 4


def test_forbidden_fallback_names_the_ops():
    with pytest.raises(HostFallbackError) as info:
        netpass.compile_model(_fallback_model(), device=RUNTIME_DEVICE,
                              config={"HOST_FALLBACK": False})
    kinds = {k for k, _, _ in info.value.ops}
    assert kinds == {"Hardmax", "NonZero"}
    assert "Hardmax" in str(info.value) and "no kernel" in str(info.value)


def test_models_with_kernels_compile_without_fallback():
    x = opset.parameter([2, 6], "f32", "x")
    model = Model([opset.softmax(opset.relu(x), 1)], [x])
    req = netpass.compile_model(model, device=RUNTIME_DEVICE,
                                config={"HOST_FALLBACK": False}).create_infer_request()
    out = next(iter(req.infer(FEED).values()))
    np.testing.assert_allclose(out, next(iter(netpass.reference.infer(model, FEED).values())),
                               rtol=1e-5)
    assert req.stats["host_fallbacks"] == 0
