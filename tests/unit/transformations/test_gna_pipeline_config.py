"""GnaTransformationsPipeline and a user's PassConfig: disabled passes and callbacks reach the
pipeline's members, the GNA axis rules come after the user's callbacks, and the config is the
same object with the same content after the run, also when a member raises."""
from __future__ import annotations

import numpy as np
import pytest
from tr_helpers import count, model_of, param, rand, run_checked

from netpass import opset
from netpass.errors import PassError
from netpass.ngraph_passes import transpose_sinking as ts
from netpass.ngraph_passes.common import ConvertDivide, SliceToStridedSlice
from netpass.ngraph_passes.gna import (
    GNA_CALLBACKS,
    GnaTransformationsPipeline,
    gna_pass_config,
    install_gna_callbacks,
)
from netpass.ngraph_passes.gna.pipeline import RescueStuckTransposes
from netpass.passes import Manager, PassConfig


def snapshot(config: PassConfig) -> tuple:
    return (frozenset(config._disabled), frozenset(config._enabled), dict(config._callbacks),
            config._global)


def _conv_slice_model():
    """Convolution (layout block) + Slice (the Slice workaround) + a Concat that TSGeneral
    sinks through with the GNA callbacks asked."""
    x = param([1, 3, 8, 8])
    conv = opset.convolution(x, opset.constant(rand(8, 3, 1, 1)), [1, 1], [0, 0], [0, 0], [1, 1])
    cat = opset.concat([opset.relu(conv), opset.sigmoid(conv)], 1)
    return model_of(opset.relu(opset.slice(cat, [2], [6], [1], [2])), x)


def _run(model, config: PassConfig) -> None:
    manager = Manager(config)
    manager.register_pass(GnaTransformationsPipeline())
    manager.run_passes(model)


def test_config_unchanged_after_pipeline():
    config = PassConfig()
    def user_cb(node):
        return False

    config.set_callback(user_cb, ts.TSConcatForward, ts.TSSplitBackward)
    config.disable(ConvertDivide)
    before = snapshot(config)
    _run(_conv_slice_model(), config)
    assert snapshot(config) == before
    assert config.get_callback(ts.TSConcatForward) is user_cb


class Boom(RuntimeError):
    pass


def _raising(node):
    raise Boom(node.friendly_name)


@pytest.mark.parametrize("pass_type", list(GNA_CALLBACKS), ids=lambda t: t.__name__)
def test_config_unchanged_when_a_member_raises(pass_type):
    """The user's callback raises inside TSGeneral: the Slice workaround had disabled
    SliceToStridedSlice for the run, and nothing of that is left in the user's config."""
    x = param([1, 8, 8, 8])
    nhwc = opset.transpose(x, [0, 2, 3, 1])
    y = opset.relu(x)

    def mm(v):  # [.., C=8] @ [8, 8]; forward sinking stops at a MatMul and leaves the Transposes above unmarked
        return opset.matmul(opset.transpose(v, [0, 2, 3, 1]), opset.constant(rand(8, 8)), False, False)
    if pass_type is ts.TSConcatForward:
        body = opset.concat([nhwc, nhwc], 3)
    elif pass_type is ts.TSSplitForward:
        body = opset.split(nhwc, 3, 2).output(0)
    elif pass_type is ts.TSConcatBackward:
        body = mm(opset.concat([y, y], 2))
    else:
        parts = opset.split(y, 2, 2)
        body = opset.add(mm(parts.output(0)), mm(parts.output(1)))
    m = model_of(opset.relu(opset.slice(opset.relu(body), [1], [5], [1], [1])), x)
    config = PassConfig()
    config.set_callback(_raising, pass_type)
    before = snapshot(config)
    with pytest.raises(PassError) as info:  # the pass that asked the callback, and its node
        _run(m, config)
    assert isinstance(info.value.cause, Boom) and info.value.pass_name == pass_type.__name__
    assert snapshot(config) == before
    assert not config.is_disabled(SliceToStridedSlice) and not config.is_enabled(SliceToStridedSlice)


def test_user_disabled_pass_is_honored_inside():
    x = param([1, 3, 8, 8])
    conv = opset.convolution(x, opset.constant(rand(8, 3, 1, 1)), [1, 1], [0, 0], [0, 0], [1, 1])
    m = model_of(opset.divide(conv, opset.constant(np.float32(2))), x)
    config = PassConfig()
    config.disable(ConvertDivide)
    _run(m, config)
    assert count(m, "Divide") == 1


def test_user_disabled_slice_to_strided_slice_keeps_slices():
    m = _conv_slice_model()
    config = PassConfig()
    config.disable(SliceToStridedSlice)
    _run(m, config)
    assert count(m, "Slice") == 1 and count(m, "CropIE") == 0
    assert config.is_disabled(SliceToStridedSlice)


def test_user_callback_is_asked_first_and_its_refusal_wins():
    """A user callback refusing every TSConcatForward keeps the Concat in NHWC (GNA would let
    the Transposes through: the new axis is the first non-1 one); GNA's rule is not asked."""
    x = param([1, 8, 4, 4])
    nhwc = opset.transpose(x, [0, 2, 3, 1])
    m = model_of(opset.relu(opset.concat([opset.relu(nhwc), opset.sigmoid(nhwc)], 2)), x)
    seen = []

    def refuse(node):
        seen.append(node.type_name)
        return True
    config = PassConfig()
    config.set_callback(refuse, ts.TSConcatForward)
    run_checked(m, GnaTransformationsPipeline(), config=config)
    assert seen and set(seen) == {"Concat"}
    concat = next(n for n in m.get_ordered_ops() if n.type_name == "Concat")
    assert concat.axis == 2 and list(concat.output(0).shape) == [1, 4, 8, 8]   # still NHWC


def test_global_user_callback_reaches_the_members():
    """A global callback that refuses everything: no transpose sinking at all."""
    x = param([1, 8, 4, 4])
    m = model_of(opset.relu(opset.transpose(opset.relu(opset.transpose(x, [0, 2, 3, 1])), [0, 3, 1, 2])), x)
    config = PassConfig()
    config.set_callback(lambda node: True)
    run_checked(m, GnaTransformationsPipeline(), config=config)
    assert count(m, "Transpose") == 2


def test_gna_rule_applies_when_the_user_lets_the_rewrite_happen():
    seen = []
    config = PassConfig()
    config.set_callback(lambda node: seen.append(node) or False, ts.TSConcatForward)
    derived = gna_pass_config(config)
    x = param([1, 1, 8, 8])
    cat = opset.concat([opset.transpose(x, [0, 3, 1, 2]), opset.transpose(x, [0, 3, 1, 2])], 1)
    assert derived.get_callback(ts.TSConcatForward)(cat) is True   # GNA refuses: interleaved axis
    assert seen == [cat]
    assert config.get_callback(ts.TSConcatForward)(cat) is False   # the user's own is untouched


def test_install_gna_callbacks_keeps_existing_callbacks_first():
    config = PassConfig()
    config.set_callback(lambda node: True)
    install_gna_callbacks(config)
    x = param([1, 8, 4, 4])
    cat = opset.concat([opset.transpose(x, [0, 2, 3, 1]), opset.transpose(x, [0, 2, 3, 1])], 3)
    for pass_type in GNA_CALLBACKS:
        assert config.get_callback(pass_type)(cat) is True


def test_rescue_obeys_user_callbacks():
    """RescueStuckTransposes runs sinking without the GNA axis rules but with the user's
    callbacks: a user refusing every backward unary move keeps the Transpose where it is."""
    x = param([1, 8, 4, 4])
    m = model_of(opset.relu(opset.transpose(opset.relu(x), [0, 2, 3, 1])), x)
    config = PassConfig()
    config.set_callback(lambda node: True, ts.TSUnaryBackward, ts.TSUnaryForward)
    before = snapshot(config)
    run_checked(m, RescueStuckTransposes(config))
    relu = m.get_ordered_ops()[1]
    assert relu.type_name == "Relu" and relu.input_value(0).node.type_name == "Parameter"
    assert snapshot(config) == before


@pytest.mark.parametrize("disabled", [False, True])
def test_user_disabled_reset_of_the_sinking_marks_is_honored(disabled, monkeypatch):
    """TSGeneral cleared the no-sinking marks by calling TSResetNoSinkingAttribute itself, so
    a user's disabling it did not reach it inside the pipeline (any block graph, e.g.
    block_forms_onnx seed 1126313258, 4 blocks, [1, 8, 8, 8])."""
    ran = []
    monkeypatch.setattr(ts.TSResetNoSinkingAttribute, "run_on_model",
                        lambda self, model: ran.append(self) or False)
    config = PassConfig()
    if disabled:
        config.disable(ts.TSResetNoSinkingAttribute)
    before = snapshot(config)
    _run(_conv_slice_model(), config)
    assert bool(ran) != disabled
    assert snapshot(config) == before
