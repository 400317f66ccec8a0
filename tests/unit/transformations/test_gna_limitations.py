"""The GNA transpose-support rule and the GNA callbacks on TSConcat/TSSplit."""
from __future__ import annotations

import pytest
from tr_helpers import count, model_of, param, run, run_checked

from netpass import opset
from netpass.ngraph_passes.gna import install_gna_callbacks, is_transpose_supported
from netpass.ngraph_passes.transpose_sinking import (
    TSConcatBackward,
    TSConcatForward,
    TSSplitForward,
    is_sinking_disabled,
)
from netpass.passes import PassConfig


@pytest.mark.parametrize("shape,ok", [
    ([1, 8, 1, 1], True), ([1, 3, 256], True), ([8, 16], True), ([9, 16], False),
    ([4, 20], False), ([2, 3, 4], False), ([1, 8, 65536], False), ([7], True)])
def test_is_transpose_supported(shape, ok):
    assert is_transpose_supported(shape) is ok


def _config() -> PassConfig:
    config = PassConfig()
    install_gna_callbacks(config)
    return config


def test_concat_forward_refused_on_interleaving_axis_and_marked():
    # NHWC [1,1,8,8] -> NCHW [1,8,1,8]; a channel concat would interleave in NHWC memory.
    x, y = param([1, 1, 8, 8], "x"), param([1, 1, 8, 8], "y")
    tx, ty = opset.transpose(x, [0, 3, 1, 2]), opset.transpose(y, [0, 3, 1, 2])
    m = model_of(opset.concat([tx, ty], 1), [x, y])
    run(m, TSConcatForward(), config=_config())
    assert m.results[0].input_value(0).node.type_name == "Concat"
    assert is_sinking_disabled(tx) and is_sinking_disabled(ty)


def test_concat_forward_allowed_on_first_valuable_axis():
    x, y = param([1, 2, 8, 8], "x"), param([1, 2, 8, 8], "y")
    m = model_of(opset.concat([opset.transpose(x, [0, 2, 1, 3]), opset.transpose(y, [0, 2, 1, 3])], 2), [x, y])
    run_checked(m, TSConcatForward(), config=_config())
    assert m.results[0].input_value(0).node.type_name == "Transpose"


def test_concat_backward_refused():
    x, y = param([1, 4, 2], "x"), param([1, 4, 2], "y")
    m = model_of(opset.transpose(opset.concat([x, y], 1), [0, 2, 1]), [x, y])
    run(m, TSConcatBackward(), config=_config())
    assert count(m, "Transpose") == 1 and m.results[0].input_value(0).node.type_name == "Transpose"


def test_split_forward_refused():
    x = param([1, 4, 6])
    s = opset.split(opset.transpose(x, [0, 2, 1]), 1, 2)  # would split x along axis 2
    m = model_of([s.output(0), s.output(1)], x)
    run(m, TSSplitForward(), config=_config())
    assert count(m, "Transpose") == 1
