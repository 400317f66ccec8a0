"""RemoveInputConvert, RemoveOutputConvert, ReorderActivationAndPooling,
RemoveSingleInputConcat and DecomposeMVN."""
from __future__ import annotations

import numpy as np
import pytest
from tr_helpers import count, model_of, param, rand, run, run_checked

from netpass import opset
from netpass.ngraph_passes.common import ConvertDivide
from netpass.ngraph_passes.gna import (
    DecomposeMVN,
    RemoveInputConvert,
    RemoveOutputConvert,
    RemoveSingleInputConcat,
    ReorderActivationAndPooling,
)
from netpass.ops import Clamp, Elu
from netpass.ops.elementwise import MONOTONIC_ACTIVATIONS


def test_remove_input_convert_changes_input_type():
    x = opset.parameter([2, 3], np.float16, "x")
    m = model_of(opset.relu(opset.convert(x, np.float32)), x)
    run(m, RemoveInputConvert())
    assert count(m, "Convert") == 0 and m.parameters[0].output(0).element_type.name == "f32"


def test_remove_output_convert():
    x = param([2, 3])
    m = model_of(opset.convert(opset.relu(x), np.float16), x)
    run(m, RemoveOutputConvert())
    assert count(m, "Convert") == 0 and m.results[0].output(0).element_type.name == "f32"


def test_integer_convert_stays():
    x = param([2, 3])
    m = model_of(opset.convert(opset.relu(x), np.int32), x)
    run(m, RemoveOutputConvert())
    assert count(m, "Convert") == 1


def _act(cls, x):
    return cls([x], min=-0.5, max=0.5) if cls is Clamp else cls([x], alpha=1.0) if cls is Elu \
        else cls([x])


@pytest.mark.parametrize("cls", MONOTONIC_ACTIVATIONS, ids=lambda c: c.type_name)
def test_reorder_activation_and_pooling(cls):
    x = param([1, 2, 6, 6])
    conv = opset.convolution(x, opset.constant(rand(3, 2, 3, 3)), [1, 1], [0, 0], [0, 0], [1, 1])
    pool = opset.max_pool(_act(cls, conv.output(0)), [2, 2], [1, 1], [0, 0], [0, 0], [2, 2],
                          name="pool")
    m = model_of(pool.output(0), x)
    run_checked(m, ReorderActivationAndPooling(), rtol=1e-4, atol=1e-5)
    last = m.results[0].input_value(0).node
    assert last.type_name == cls.type_name and last.friendly_name == "pool"


def test_non_monotonic_activation_stays_before_pooling():
    x = param([1, 2, 6, 6])
    conv = opset.convolution(x, opset.constant(rand(3, 2, 3, 3)), [1, 1], [0, 0], [0, 0], [1, 1])
    pool = opset.max_pool(opset.sin(conv), [2, 2], [1, 1], [0, 0], [0, 0], [2, 2], name="pool")
    m = model_of(pool.output(0), x)
    run(m, ReorderActivationAndPooling())
    assert m.results[0].input_value(0).node.type_name == "MaxPool"


@pytest.mark.parametrize("dilations, pads, auto_pad", [([1, 2], [0, 1], "explicit"),
                                                    ([1, 2], [0, 0], "same_upper")], ids=str)
def test_pooling_whose_dilated_taps_see_padding_only_stays_after_the_activation(dilations, pads,
                                                                                auto_pad):
    """A dilated window over a 1-wide axis, padded on both sides (explicitly or by same_upper),
    has both taps in the padding: -inf, which Relu after the pooling made 0. The rule looked
    at window extents, not taps, and took automatic pads for small ones."""
    x = param([1, 2, 1, 1])
    conv = opset.convolution(x, opset.constant(rand(3, 2, 1, 1)), [1, 1], [0, 0], [0, 0], [1, 1])
    pool = opset.max_pool(opset.relu(conv), [1, 1], dilations, pads, pads, [1, 2],
                          auto_pad=auto_pad, name="pool")
    m = model_of(pool.output(0), x)
    run(m, ReorderActivationAndPooling())
    assert m.results[0].input_value(0).node.type_name == "MaxPool"


def test_single_input_concat_removed():
    x = param([2, 3])
    m = model_of(opset.relu(opset.concat([opset.relu(x)], 0)), x)
    run_checked(m, RemoveSingleInputConcat())
    assert count(m, "Concat") == 0


def test_decompose_mvn_inside_and_outside_sqrt():
    for mode in ("INSIDE_SQRT", "OUTSIDE_SQRT"):
        x = param([2, 3, 8])
        m = model_of(opset.mvn(x, opset.constant(np.array([2])), True, 1e-5, mode), x)
        run_checked(m, DecomposeMVN(), ConvertDivide(), rtol=1e-4, atol=1e-5)
        assert count(m, "MVN", "Divide") == 0
