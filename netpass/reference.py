"""Reference evaluation of a whole model with the ops' numpy ``evaluate``."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from .core.model import Model
from .errors import InputError, NetpassError, OutOfMemoryError
from .ops.io import Parameter, Result


def check_inputs(model: Model, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Match ``inputs`` to the model's parameters by name; check dtype, rank and static dims."""
    names = model.input_names
    unknown = sorted(set(inputs) - set(names))
    if unknown:
        raise InputError(unknown[0], f"not an input of the model; inputs are {names}")
    out: dict[str, np.ndarray] = {}
    for name, param in zip(names, model.parameters):
        if name not in inputs:
            raise InputError(name, "missing")
        arr = np.asarray(inputs[name])
        et = param.output(0).element_type
        if et.dtype is not None and arr.dtype != et.dtype:
            raise InputError(name, f"dtype {arr.dtype}, expected {et.dtype} ({et})")
        ps = param.output(0).partial_shape
        if ps.rank_is_static:
            if arr.ndim != len(ps):
                raise InputError(name, f"rank {arr.ndim} (shape {list(arr.shape)}), expected {ps}")
            for axis, (d, n) in enumerate(zip(ps, arr.shape)):
                if not (d.min <= n <= d.max):
                    raise InputError(name, f"dim {axis} is {n}, expected {d} (shape {ps})")
        out[name] = arr
    return out


def infer(model: Model, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Run ``model`` on numpy inputs; returns ``{output name: array}``."""
    feeds = check_inputs(model, inputs)
    by_param = {id(p): feeds[n] for n, p in zip(model.input_names, model.parameters)}
    ops = model.get_ordered_ops()
    remaining: dict[int, int] = {}
    for node in ops:
        for src in node._inputs:
            remaining[id(src.node)] = remaining.get(id(src.node), 0) + 1
    values: dict[int, list[np.ndarray]] = {}
    for node in ops:
        if isinstance(node, Parameter):
            if id(node) not in by_param:
                raise NetpassError(f"Parameter '{node.friendly_name}' is not a model input")
            values[id(node)] = [by_param[id(node)]]
            continue
        args = [values[id(s.node)][s.index] for s in node._inputs]
        try:
            outs = node.evaluate(args)
        except NetpassError:
            raise
        except MemoryError as e:
            shapes = ", ".join(str(list(a.shape)) for a in args)
            raise OutOfMemoryError(f"{node.type_name} '{node.friendly_name}' ran out of memory "
                                   f"on inputs [{shapes}]: {e}") from e
        except Exception as e:
            shapes = ", ".join(str(list(a.shape)) for a in args)
            raise NetpassError(f"{node.type_name} '{node.friendly_name}' failed on inputs "
                               f"[{shapes}]: {type(e).__name__}: {e}") from e
        values[id(node)] = list(outs)
        for s in node._inputs:
            k = id(s.node)
            remaining[k] -= 1
            if remaining[k] == 0 and not isinstance(s.node, Parameter):
                values.pop(k, None)
    result: dict[str, np.ndarray] = {}
    for name, r in zip(model.output_names, model.results):
        result[name] = values[id(r)][0] if id(r) in values else None
    return result


__all__ = ["infer", "check_inputs"]
