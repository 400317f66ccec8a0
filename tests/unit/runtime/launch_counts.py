"""The kernels a compiled model enqueues per inference, its outputs checked against the
reference on the way (the launch-count tests' shared runner)."""
from __future__ import annotations

import numpy as np

import netpass
from netpass.runtime import compile_program
from netpass.testing import RUNTIME_DEVICE


def run_counted(model, feeds_list):
    """(request, kernels per infer) after each feeds, outputs checked against the reference."""
    req = compile_program(model, RUNTIME_DEVICE).create_infer_request()
    launches = []
    for feeds in feeds_list:
        k0 = req.stats["kernels_enqueued"]
        out = req.infer(feeds)
        launches.append(req.stats["kernels_enqueued"] - k0)
        for name, want in netpass.reference.infer(model, feeds).items():
            assert out[name].dtype == want.dtype, name
            np.testing.assert_allclose(out[name], want, rtol=1e-6, atol=1e-6)
    return req, launches
