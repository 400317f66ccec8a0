"""Common sub-expressions (runtime.cse): a computation repeated over the same inputs (each
layer turning one boolean mask into an additive one) runs once."""
from __future__ import annotations

import numpy as np
from graph_blocks import randn_f32

from netpass import Model, opset
from netpass.runtime import Program


def _layers(rng, n=3, output_mask=False):
    """n layers each doing x = relu(x + where(m, 0, -1e9)) with its own constants."""
    x = opset.parameter([-1, 6], np.float32, name="x")
    m = opset.parameter([-1, 6], np.bool_, name="m")
    h, results = x, []
    for _ in range(n):
        add = opset.select(m, np.array([0.0], np.float32), np.array([-1e9], np.float32))
        if output_mask:
            results.append(opset.result(add, name=f"mask{len(results)}"))
        h = opset.relu(opset.add(h, add))
    return Model([opset.result(h, name="y"), *results], [x, m])


def test_repeated_mask_runs_once(run_shapes, rng):
    model = _layers(rng)
    prog = Program.from_model(model)
    assert sum(n.kind == "Select" for n in prog.nodes) == 1
    m = rng.random((4, 6)) > 0.3
    run_shapes(model, [{"x": randn_f32(rng, 4, 6), "m": m}, {"x": randn_f32(rng, 2, 6), "m": m[:2]}])


def test_values_read_by_results_stay_apart(run_shapes, rng):
    model = _layers(rng, output_mask=True)
    assert sum(n.kind == "Select" for n in Program.from_model(model).nodes) == 3
    run_shapes(model, [{"x": randn_f32(rng, 3, 6), "m": rng.random((3, 6)) > 0.5}])
