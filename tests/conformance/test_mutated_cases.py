"""Mutated ONNX backend cases: bad models and bad feeds end in a NetpassError, never in a bare
exception.

Each draw takes a backend node case and its first data set and makes one mutation, as a user's
broken export or wrong feed would: an int or ints attribute set to a hostile value (negative,
zero, 2**31, 10**12) or shortened or lengthened, an attribute dropped, a node input dropped,
renamed to an undefined tensor, emptied or repeated, a graph input's element type or rank
changed, an initializer's first dim grown past its data, a feed flattened or cast to another
dtype. The model is read and run (reference evaluator; a smaller draw on the runtime device);
each must either succeed or raise :class:`netpass.errors.NetpassError`. A fixed seed per test
(the draws are the same each run); the mutation kinds are data, one line each.
"""
from __future__ import annotations

import copy
import random

import numpy as np
import onnx
import pytest
from _cases import CASES, case_data

import netpass
from netpass.errors import NetpassError
from netpass.testing import RUNTIME_DEVICE

HOSTILE_INTS = (-1, 0, 1, 2, 3, 7, -5, 2 ** 31, -2 ** 31, 10 ** 12)
INT, INTS = onnx.AttributeProto.INT, onnx.AttributeProto.INTS


def _set_int(m, feeds, rng):
    attrs = [a for n in m.graph.node for a in n.attribute if a.type == INT]
    if attrs:
        rng.choice(attrs).i = rng.choice(HOSTILE_INTS)


def _change_ints(m, feeds, rng):
    attrs = [a for n in m.graph.node for a in n.attribute if a.type == INTS]
    if attrs:
        a = rng.choice(attrs)
        vals = list(a.ints)
        how = rng.randrange(3)
        if how == 0 and vals:
            vals[rng.randrange(len(vals))] = rng.choice(HOSTILE_INTS)
        elif how == 1 and vals:
            vals.pop()
        else:
            vals.append(rng.choice(HOSTILE_INTS))
        del a.ints[:]
        a.ints.extend(vals)


def _node_with(m, rng, what):
    nodes = [n for n in m.graph.node if len(getattr(n, what))]
    return rng.choice(nodes) if nodes else None


def _edit_input(edit):
    def mutate(m, feeds, rng):
        n = _node_with(m, rng, "input")
        if n is not None:
            edit(n.input, rng.randrange(len(n.input)))
    return mutate


def _drop_attribute(m, feeds, rng):
    n = _node_with(m, rng, "attribute")
    if n is not None:
        n.attribute.pop(rng.randrange(len(n.attribute)))


def _input_type(m, feeds, rng):
    if len(m.graph.input):
        rng.choice(list(m.graph.input)).type.tensor_type.elem_type = \
            rng.choice((1, 2, 3, 6, 7, 9, 10, 11))


def _input_rank(m, feeds, rng):
    if len(m.graph.input):
        dims = rng.choice(list(m.graph.input)).type.tensor_type.shape.dim
        if len(dims) and rng.random() < 0.5:
            dims.pop()
        else:
            dims.add().dim_value = rng.choice((1, 3))


def _initializer_dims(m, feeds, rng):
    inits = [t for t in m.graph.initializer if len(t.dims)]
    if inits:
        t = rng.choice(inits)
        t.dims[0] += 1


def _feed_shape(m, feeds, rng):
    arrays = [k for k, v in feeds.items() if isinstance(v, np.ndarray)]
    if arrays:
        k = rng.choice(arrays)
        feeds[k] = feeds[k].reshape(-1) if feeds[k].ndim != 1 else feeds[k].reshape(1, -1)


def _feed_dtype(m, feeds, rng):
    arrays = [k for k, v in feeds.items() if isinstance(v, np.ndarray) and v.dtype != object]
    if arrays:
        k = rng.choice(arrays)
        feeds[k] = feeds[k].astype(rng.choice((np.float64, np.int32, np.int64, np.float16,
                                               np.bool_)))


MUTATIONS = {
    "int attribute": _set_int,
    "ints attribute": _change_ints,
    "attribute dropped": _drop_attribute,
    "input dropped": _edit_input(lambda ins, i: ins.pop(i)),
    "input undefined": _edit_input(lambda ins, i: ins.__setitem__(i, "no_such_tensor")),
    "input emptied": _edit_input(lambda ins, i: ins.__setitem__(i, "")),
    "input repeated": _edit_input(lambda ins, i: ins.append(ins[i])),
    "graph input type": _input_type,
    "graph input rank": _input_rank,
    "initializer dims": _initializer_dims,
    "feed shape": _feed_shape,
    "feed dtype": _feed_dtype,
}


def _draws(seed: int, count: int):
    rng = random.Random(seed)
    for _ in range(count):
        case = rng.choice(CASES)
        feeds = dict(next(iter(case_data(case)))[0])
        model = copy.deepcopy(case.model)
        kind = rng.choice(sorted(MUTATIONS))
        MUTATIONS[kind](model, feeds, rng)
        yield case.name, kind, model, feeds


def _escapes(seed: int, count: int, run) -> list[str]:
    escaped = []
    for name, kind, model, feeds in _draws(seed, count):
        try:
            run(netpass.read_model(model.SerializeToString()), feeds)
        except NetpassError:
            pass
        except Exception as e:  # (what the test looks for)
            escaped.append(f"{name} ({kind}): {type(e).__name__}: {e}"[:300])
    return escaped


def test_mutated_cases_on_the_reference_raise_netpass_errors():
    assert _escapes(7, 600, lambda model, feeds: netpass.reference.infer(model, feeds)) == []


def test_mutated_cases_on_the_runtime_raise_netpass_errors():
    pytest.importorskip("pyopencl")

    def run(model, feeds):
        netpass.compile_model(model, RUNTIME_DEVICE).create_infer_request().infer(feeds)
    assert _escapes(11, 150, run) == []
