"""Ported from the GNA plugin's unit tests (OpenVINO releases/2023/3,
``src/plugins/intel_gna/tests/unit/transformations/``): ``gna_remove_convert.cpp``,
``gna_remove_single_input_concat.cpp``, ``gna_reorder_activation_and_pooling.cpp`` and
``gna_decompose_mvn.cpp``; structure and values where the rewrite keeps them.

Found and fixed: RemoveOutputConvert renamed the model output (the Result's new producer kept
its own names; it now takes the Convert's, as OpenVINO's ``replace_output_update_name``).
ReorderActivationAndPooling did not move ``Sign`` (non-decreasing, so ``max(sign(x)) ==
sign(max(x))``), one of OpenVINO's cases, and moved an activation past a MaxPool whose windows
cover padding only, changing those outputs from -inf to ``act(-inf)`` (OpenVINO's own case,
a 1x1 pool padded by 1; the accuracy check, ``netpass.testing.check_accuracy``, accepted any
value against an infinite reference and now requires infinities to match).

Marked, netpass deliberately differs:
- RemoveInputConvert / RemoveOutputConvert drop float Converts only (docs/transformations.md:
  the model input or output takes the other float type). The GNA plugin also drops integer
  pairs from its ``kSupportedInputConverts`` list (u8 -> i8, f32 -> i16, ...), whose input data
  it quantizes itself; in a netpass model that would change what the user feeds, so those
  Converts stay (the cases expect netpass's rule).
- ReorderActivationAndPooling moves non-decreasing activations only (MONOTONIC_ACTIVATIONS).
  OpenVINO's cases also move Abs (not monotonic: ``max|x| != |max x|``; the case uses a 1x1
  pool, where any activation commutes) and Log (NaN below 0, which MaxPool would propagate
  differently): netpass keeps them before the pool.
- DecomposeMVN: OpenVINO's GNA decomposition is built of convolutions for GNA's limits;
  netpass's is ReduceMean/Subtract/Multiply/Sqrt/Divide over the MVN's own axes, checked by
  value. OpenVINO's expected graph for the 4-D case (axes {2, 1} of [1, 1, 5, 300]) normalizes
  each row over W, which is not MVN over axes {2, 1}; netpass keeps MVN's values.
"""
from __future__ import annotations

import numpy as np
import pytest
from ov_port import model_of
from ov_values import port, port_by_value

from netpass import opset
from netpass.ngraph_passes.gna import (
    DecomposeMVN,
    RemoveInputConvert,
    RemoveOutputConvert,
    RemoveSingleInputConcat,
    ReorderActivationAndPooling,
)

NOT_PORTED = {
    "ReorderActivationAndPoolingTestConvFqMp / ConvAddFqMp":
        "FakeQuantize between the convolution and the pool: netpass's reordering moves "
        "activations only",
    "DecomposeMVNTest with MVN-1": "ConvertMVN1ToMVN6 / MVN-1 are not in netpass",
}

TYPES = [np.float16, np.float32, np.int8, np.uint8, np.int16, np.int32, np.int64]


def _float(t):
    return np.issubdtype(t, np.floating)


def _add_const(x, et, shape):
    return opset.add(x, opset.constant(np.full(shape, 10, et)))


@pytest.mark.parametrize("net", TYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("target", TYPES, ids=lambda t: np.dtype(t).name)
def test_remove_input_convert(net, target):
    """``Parameter(target) -> Convert(net) -> Add``: dropped when both types are floats."""
    x = opset.parameter([10], target)
    model = model_of([_add_const(opset.convert(x, net), net, [10])], [x])
    ref = None
    if _float(net) and _float(target):
        x = opset.parameter([10], net)
        ref = model_of([_add_const(x, net, [10])], [x])
    port(model, ref, RemoveInputConvert(), numeric=False)


@pytest.mark.parametrize("net", TYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("target", TYPES, ids=lambda t: np.dtype(t).name)
def test_remove_output_convert(net, target):
    x = opset.parameter([10], net)
    model = model_of([opset.convert(_add_const(x, net, [10]), target)], [x])
    ref = None
    if _float(net) and _float(target):
        x = opset.parameter([10], net)
        ref = model_of([_add_const(x, net, [10])], [x])
    port(model, ref, RemoveOutputConvert(), numeric=False)


@pytest.mark.parametrize("net", TYPES, ids=lambda t: np.dtype(t).name)
def test_leave_convert(net):
    """A Convert between two ops stays (neither at an input nor at an output)."""
    x = opset.parameter([10], net)
    model = model_of([_add_const(opset.convert(_add_const(x, net, [10]), net), net, [10])], [x])
    port(model, None, RemoveInputConvert(), RemoveOutputConvert(), numeric=False)


@pytest.mark.parametrize("net, target", [(np.float32, np.float16), (np.float16, np.float32),
                                         (np.float32, np.float32), (np.float32, np.int8)])
def test_remove_multi_inputs_convert(net, target):
    def build(removed):
        xs = [opset.parameter([1, 10], net if removed else target) for _ in range(3)]
        c = xs if removed else [opset.convert(x, net) for x in xs]
        return model_of([opset.add(c[2], opset.add(c[0], c[1]))], xs)
    port(build(False), build(True) if _float(target) else None, RemoveInputConvert(),
         numeric=False)


@pytest.mark.parametrize("net, target", [(np.float32, np.float16), (np.float32, np.int32)])
@pytest.mark.parametrize("connected", [False, True])
def test_remove_multi_outputs_convert(net, target, connected):
    """``RemoveMultiOutputsConvert`` and ``RemoveOutputConvertConnectedToLayer`` (an Add
    reading two converted outputs' producers gives a third output)."""
    def build(removed):
        xs = [opset.parameter([1, 10], net) for _ in range(4)]
        outs = [opset.add(xs[0], xs[1]), opset.add(xs[2], xs[3])]
        if connected:
            outs.append(opset.add(outs[0], outs[1]))
        return model_of([o if removed else opset.convert(o, target) for o in outs], xs)
    port(build(False), build(True) if _float(target) else None, RemoveOutputConvert(),
         numeric=False)


def _concat_graph(n_inputs, has_concat, n_outputs):
    xs = [opset.parameter([1, 3, 64], np.int64) for _ in range(n_inputs)]
    outs = [opset.add(x, opset.constant(np.full([1, 1, 1], 2, np.int64))) for x in xs]
    if has_concat:
        outs = [opset.concat(outs, 0)]
    outs = [opset.add(o, opset.constant(np.full([1, 1, 1], 3, np.int64)))
            for o in outs for _ in range(n_outputs)]
    return model_of(outs, xs)


@pytest.mark.parametrize("n_inputs, n_outputs", [(1, 1), (1, 2), (2, 1)])
def test_remove_single_input_concat(n_inputs, n_outputs):
    ref = _concat_graph(n_inputs, n_inputs > 1, n_outputs)
    port(_concat_graph(n_inputs, True, n_outputs), ref, RemoveSingleInputConcat())


ACTIVATIONS = {"Relu": opset.relu, "Sigmoid": opset.sigmoid, "Tanh": opset.tanh,
               "Abs": opset.abs, "Log": opset.log, "Exp": opset.exp, "Sign": opset.sign,
               "Clamp": lambda x: opset.clamp(x, 0.1, 0.2)}
NOT_MOVED = {"Abs", "Log"}  # marked: see the module doc


def _conv_act_pool(act, with_add, reordered, pad=1):
    x, y = opset.parameter([1, 3, 64, 64], np.float32), opset.parameter([1, 3, 64, 64],
                                                                         np.float32)
    w = opset.constant(np.ones([3, 3, 1, 1], np.float32))
    last = opset.convolution(x, w, [1, 1], [0, 0], [0, 0], [1, 1])
    if with_add:
        last = opset.add(last, y)

    def pool(v):
        return opset.max_pool(v, [1, 1], [1, 1], [pad, pad], [pad, pad], [1, 1]).output(0)
    out = ACTIVATIONS[act](pool(last)) if reordered else pool(ACTIVATIONS[act](last))
    return model_of([out], [x, y])


@pytest.mark.parametrize("pad", [1, 0])
@pytest.mark.parametrize("with_add", [True, False])
@pytest.mark.parametrize("act", list(ACTIVATIONS))
def test_reorder_activation_and_pooling(act, with_add, pad):
    """OpenVINO's case pads the 1x1 pool by 1 (``pad`` 1): its border windows hold padding
    only (-inf), which the moved activation would turn into ``act(-inf)`` (a Relu: 0 instead
    of -inf). OpenVINO moves the activation anyway; netpass keeps the order then (marked, a
    fix: it moved it too) and moves it without that padding (``pad`` 0)."""
    model = _conv_act_pool(act, with_add, False, pad)
    moved = act not in NOT_MOVED and pad == 0
    ref = _conv_act_pool(act, with_add, True, pad) if moved else None
    port(model, ref, ReorderActivationAndPooling(), numeric=act != "Log", rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape, axes", [([1, 1, 5, 300], [2, 1]), ([1, 6, 256], [2])])
@pytest.mark.parametrize("normalize_variance", [True, False])
def test_decompose_mvn(shape, axes, normalize_variance):
    x = opset.parameter(shape, np.float32)
    mvn = opset.mvn(x, opset.constant(np.array(axes, np.int64)), normalize_variance, 1e-9,
                    "inside_sqrt")
    port_by_value(model_of([mvn], [x]), DecomposeMVN(), gone=("MVN",), rtol=1e-4, atol=1e-5)
