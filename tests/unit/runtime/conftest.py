"""Fixtures of the runtime tests: run a model on the OpenCL CPU device (PoCL) with ONE infer
request over several input shapes and compare with the numpy reference (relative L2)."""
from __future__ import annotations

import numpy as np
import pytest
from graph_blocks import rel_l2

import netpass
from netpass.runtime import compile_program
from netpass.testing import RUNTIME_DEVICE


def _run_shapes(model, feeds_list, device: str = RUNTIME_DEVICE, config=None, tol: float = 1e-4):
    cm = compile_program(model, device, config)
    req = cm.create_infer_request()
    for feeds in feeds_list:
        out = req.infer(feeds)
        ref = netpass.reference.infer(model, feeds)
        assert set(out) == set(ref)
        for k in ref:
            assert out[k].shape == ref[k].shape, (k, out[k].shape, ref[k].shape)
            if ref[k].dtype.kind in "biu":
                np.testing.assert_array_equal(out[k], ref[k])
            else:
                assert rel_l2(out[k], ref[k]) <= tol, (k, rel_l2(out[k], ref[k]))
    return req


@pytest.fixture(autouse=True)
def _debug_checks(monkeypatch):
    """Every runtime test runs with the invariant checks of debug mode on
    (netpass.runtime.invariants: each value a primitive reads was produced in that infer)."""
    monkeypatch.setenv("NETPASS_DEBUG", "1")


@pytest.fixture
def run_shapes():
    """``run_shapes(model, [feeds, ...]) -> request``; asserts outputs match the reference."""
    return _run_shapes


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
