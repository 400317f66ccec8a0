"""Running a ported OpenVINO case both ways: structurally (``ov_port.check``) and by value.

OpenVINO's ``TransformationTestsF`` compares graphs only; a port also runs the model before
and after the passes with netpass's reference evaluator on the same random non-zero data, for
rewrites that keep values (every common optimization does).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from ov_port import check

from netpass import Model
from netpass.passes import Manager
from netpass.testing import (
    check_accuracy,
    check_rt_info,
    check_unique_names,
    init_node_info,
    init_unique_names,
    random_inputs,
)


def same_values(model: Model, original: Model, inputs: Mapping[str, Any] | None = None,
                rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """``model`` computes what ``original`` computed, on ``inputs`` (random by default). The
    inputs are matched by position, so ``original`` may be a separately built model whose
    inputs have other names."""
    feeds = dict(inputs) if inputs is not None else random_inputs(original, seed=7)
    by_position = [feeds[n] for n in (model.input_names if inputs is not None
                                      else original.input_names)]
    both = dict(zip(model.input_names, by_position)) | dict(zip(original.input_names,
                                                                by_position))
    acc = check_accuracy(model, original, both, rtol=rtol, atol=atol)
    assert acc.valid, acc.message


def run(model: Model, *passes: Any) -> Model:
    """Run ``passes`` on ``model`` in one Manager (validated, as every netpass Manager)."""
    manager = Manager()
    for p in passes:
        manager.register_pass(p)
    manager.run_passes(model)
    return model


def port(model: Model, model_ref: Model | None, *passes: Any,
         inputs: Mapping[str, Any] | None = None, numeric: bool = True,
         rtol: float = 1e-5, atol: float = 1e-6, **check_kw: Any) -> Model:
    """``check(model, model_ref, *passes)`` then, with ``numeric``, compare the values of the
    transformed model with those of the original one; returns the transformed model."""
    init_unique_names(model)  # (as check does first: both models then name inputs alike)
    original = model.clone()
    check(model, model_ref, *passes, **check_kw)
    if numeric:
        same_values(model, original, inputs, rtol, atol)
    return model


def feeds(model: Model, shapes: Mapping[str, Any], seed: int = 7) -> dict[str, np.ndarray]:
    """Random non-zero inputs with the given concrete shapes (for dynamic Parameters),
    keyed by input name; ``shapes`` maps an input name (or index) to its shape."""
    init_unique_names(model)  # (the names port's check gives the inputs)
    rng = np.random.default_rng(seed)
    out = {}
    for i, (name, p) in enumerate(zip(model.input_names, model.parameters)):
        ps = p.output(0).partial_shape
        shape = shapes[i] if i in shapes else shapes.get(name, ps.to_shape() if ps.is_static
                                                         else None)
        dtype = p.output(0).element_type.dtype
        if np.issubdtype(dtype, np.floating):
            v = rng.uniform(0.1, 1.0, shape) * np.where(rng.integers(0, 2, shape) == 0, -1, 1)
        else:
            v = rng.integers(1, 4, shape)
        out[name] = np.asarray(v).astype(dtype)
    return out


def port_by_value(model: Model, *passes: Any, gone: tuple[str, ...] = (),
                  inputs: Mapping[str, Any] | None = None, rtol: float = 1e-5,
                  atol: float = 1e-6) -> Model:
    """For a case whose expected graph netpass builds differently (documented per test file):
    run ``passes`` after InitNodeInfo, check that no op of the types ``gone`` is left, that
    every op carries ``fused_names`` and names stay unique (OpenVINO's TransformationTestsF
    checks), and that the values equal the original model's."""
    init_unique_names(model)
    original = model.clone()
    init_node_info(model)
    run(model, *passes)
    problems = check_unique_names(model) + check_rt_info(model)
    assert not problems, "\n".join(problems)
    left = [n.type_name for n in model.get_ordered_ops() if n.type_name in gone]
    assert not left, f"left in the model: {left}"
    same_values(model, original, inputs, rtol, atol)
    return model
