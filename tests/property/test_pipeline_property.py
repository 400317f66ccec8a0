"""Property: TSGeneral and GnaTransformationsPipeline never change what a model computes.

Hypothesis builds small random graphs of Transposes, elementwise ops (with constants and
between branches), Concat/Split, Reshape and reductions over 2-D to 4-D tensors; both
pipelines run on a copy and the reference evaluator's outputs must agree (rtol 1e-5) on
random non-zero inputs. 200 graphs per pipeline.
"""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netpass import Model, opset
from netpass.ngraph_passes.gna import GnaTransformationsPipeline
from netpass.ngraph_passes.transpose_sinking import TSGeneral
from netpass.passes import Manager
from netpass.testing import check_accuracy, random_inputs

UNARY = (opset.relu, opset.sigmoid, opset.tanh, opset.abs)
BINARY = (opset.add, opset.multiply, opset.subtract, opset.maximum)
REDUCE = (opset.reduce_sum, opset.reduce_mean, opset.reduce_max)


@st.composite
def graphs(draw) -> Model:
    rank = draw(st.integers(2, 4))
    shape = [draw(st.sampled_from([1, 2, 3, 4])) for _ in range(rank)]
    x = opset.parameter(shape, np.float32, "x")
    values = [x.output(0)]
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 16)))
    for _ in range(draw(st.integers(3, 12))):
        v = draw(st.sampled_from(values))
        sh = list(v.shape)
        kind = draw(st.sampled_from(["transpose", "transpose", "unary", "binary", "concat",
                                     "split", "reshape", "reduce"]))
        if kind == "transpose" and len(sh) > 1:
            out = opset.transpose(v, draw(st.permutations(range(len(sh)))))
        elif kind == "unary":
            out = draw(st.sampled_from(UNARY))(v)
        elif kind == "binary":
            others = [o for o in values if list(o.shape) == sh and o != v]
            if others and draw(st.booleans()):
                other = draw(st.sampled_from(others))
            else:
                cshape = [d if draw(st.booleans()) else 1 for d in sh][draw(st.integers(0, len(sh))):]
                other = opset.constant(rng.uniform(0.5, 1.5, cshape).astype(np.float32))
            out = draw(st.sampled_from(BINARY))(v, other)
        elif kind == "concat":
            axis = draw(st.integers(-len(sh), len(sh) - 1))
            out = opset.concat([v, opset.relu(v)], axis)
        elif kind == "split" and any(d % 2 == 0 for d in sh):
            axis = draw(st.sampled_from([i for i, d in enumerate(sh) if d % 2 == 0]))
            parts = opset.split(v, axis, 2)
            out = opset.add(parts.output(0), opset.tanh(parts.output(1)))
        elif kind == "reshape":
            flat = int(np.prod(sh))
            out = opset.reshape(v, draw(st.sampled_from([[1, flat], [flat, 1], list(reversed(sh))])), False)
        elif kind == "reduce" and len(sh) > 2:
            axis = draw(st.integers(0, len(sh) - 1))
            out = draw(st.sampled_from(REDUCE))(v, [axis], draw(st.booleans()))
        else:
            continue
        values.append(out.output(0))
    n_out = draw(st.integers(1, min(2, len(values) - 1))) if len(values) > 1 else 0
    outs = values[-n_out:] if n_out else [opset.relu(x).output(0)]
    results = [opset.result(o, f"y{i}") for i, o in enumerate(outs)]
    return Model(results, [x], "random")


def _check(model: Model, pass_type: type) -> None:
    original = model.clone()
    manager = Manager()
    manager.register_pass(pass_type())
    manager.run_passes(model)
    acc = check_accuracy(model, original, random_inputs(original, seed=1), rtol=1e-5, atol=1e-6)
    assert acc.valid, acc.message


SETTINGS = settings(max_examples=200, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(graphs())
def test_ts_general_keeps_outputs(model):
    _check(model, TSGeneral)


@SETTINGS
@given(graphs())
def test_gna_pipeline_keeps_outputs(model):
    _check(model, GnaTransformationsPipeline)
