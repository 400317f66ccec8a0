"""Shared helpers of the transformation tests: running passes, checking outputs numerically,
counting ops, and building small graphs."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from netpass import Model, opset
from netpass.core.changes import same_state
from netpass.core.node import port_states
from netpass.passes import Manager, PassConfig
from netpass.testing import check_accuracy, compare_models, random_inputs

RTOL, ATOL = 1e-5, 1e-6


def run(model: Model, *passes: Any, config: PassConfig | None = None) -> Manager:
    manager = Manager(config)
    for p in passes:
        manager.register_pass(p)
    manager.run_passes(model)
    return manager


def run_checked(model: Model, *passes: Any, config: PassConfig | None = None,
                rtol: float = RTOL, atol: float = ATOL) -> Model:
    """Run ``passes`` on ``model`` and assert its outputs on random non-zero inputs equal
    those of the model before; returns the original (a clone)."""
    original = model.clone()
    run(model, *passes, config=config)
    acc = check_accuracy(model, original, random_inputs(original, seed=3), rtol=rtol, atol=atol)
    assert acc.valid, acc.message
    return original


def assert_same_graph(model: Model, ref: Model, **flags: Any) -> None:
    res = compare_models(model, ref, **flags)
    assert res.valid, res.message


def count(model: Model, *type_names: str) -> int:
    return sum(1 for n in model.get_ordered_ops() if n.type_name in type_names)


def types(model: Model) -> list[str]:
    return [n.type_name for n in model.get_ordered_ops()]


def param(shape: Iterable[Any], name: str = "x") -> Any:
    return opset.parameter(list(shape), np.float32, name)


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.uniform(0.2, 1.0, shape) * np.where(rng.integers(0, 2, shape) == 0, -1, 1)).astype(np.float32)


def model_of(outputs: Any, params: Any, name: str = "m") -> Model:
    outs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    results = [opset.result(o, f"out{i}") for i, o in enumerate(outs)]
    return Model(results, list(params) if isinstance(params, (list, tuple)) else [params], name)


def against_inference(shortcut: Any, checked: list) -> Any:
    """``shortcut(main, ...)``, a rewrite's way of giving ``main`` its shapes without inference
    (True when it did), wrapped so that each time it acts ``main`` is inferred again and
    ``(main's type, whether both agree)`` is appended to ``checked``."""
    def check(main: Any, *args: Any) -> bool:
        done = shortcut(main, *args)
        if done:
            got = port_states(main)
            main.validate_and_infer_types()
            checked.append((main.type_name,
                            all(same_state(a, b) for a, b in zip(got, main._outs))))
        return done
    return check
