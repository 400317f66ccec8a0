"""GnaTransformationsPipeline's extension points: stages() and user passes inserted before or
after a stage, run once per pipeline run at that point, under the caller's PassConfig and
validated."""
from __future__ import annotations

import numpy as np
import pytest
from tr_helpers import model_of, param, rand, run_checked

from netpass import ops, opset
from netpass.errors import NetpassError, PassValidationError
from netpass.ngraph_passes.gna import GnaTransformationsPipeline
from netpass.passes import Manager, MatcherPass, ModelPass, PassConfig
from netpass.pattern import Matcher, wrap_type


class Snapshot(ModelPass):
    """Records, per run, the op types the model holds when it runs."""

    def __init__(self, log, label):
        super().__init__()
        self.log, self.label = log, label

    def run_on_model(self, model):
        self.log.append((self.label, {n.type_name for n in model.get_ordered_ops()}))
        return False


def divide_slice_model():
    """Convolution (layout block), a Divide (CommonOptimizations turns it into a Multiply) and
    a Slice (SliceToCrop turns it into a CropIE)."""
    x = param([1, 3, 8, 8])
    conv = opset.convolution(x, opset.constant(rand(8, 3, 1, 1)), [1, 1], [0, 0], [0, 0], [1, 1])
    div = opset.divide(opset.relu(conv), opset.constant(np.float32(2)))
    return model_of(opset.relu(opset.slice(div, [2], [6], [1], [1])), x)


def run_pipeline(model, pipeline, config=None):
    manager = Manager(config)
    manager.register_pass(pipeline)
    manager.run_passes(model)


def test_stages_are_listed_in_run_order():
    stages = GnaTransformationsPipeline().stages()
    assert stages[0] == "InitNodeInfo" and stages[-2:] == ["SliceToCrop", "FinalNodeInfo"]
    for a, b in (("CommonOptimizations", "Preparation"), ("Preparation", "TSGeneral"),
                 ("TSGeneral", "RescueStuckTransposes"), ("GatherSinkingGeneral", "LayoutCleanup")):
        assert stages.index(a) < stages.index(b)
    assert len(set(stages)) == len(stages)


def test_inserted_passes_run_once_at_their_stage():
    log = []
    pipeline = GnaTransformationsPipeline()
    pipeline.insert_before("CommonOptimizations", Snapshot(log, "before common"))
    pipeline.insert_after("CommonOptimizations", Snapshot(log, "after common"))
    pipeline.insert_before("SliceToCrop", Snapshot(log, "before crop"))
    pipeline.insert_after("SliceToCrop", Snapshot(log, "after crop"))
    run_checked(divide_slice_model(), pipeline)
    assert [label for label, _ in log] == ["before common", "after common", "before crop",
                                          "after crop"]
    seen = dict(log)
    assert "Divide" in seen["before common"] and "Divide" not in seen["after common"]
    assert "Multiply" in seen["after common"]
    assert "Slice" in seen["before crop"] and "CropIE" in seen["after crop"]
    assert "Slice" not in seen["after crop"]


def test_inserted_pass_runs_where_the_stage_has_nothing_to_do():
    log = []
    pipeline = GnaTransformationsPipeline()
    pipeline.insert_after("DecomposeMVN", Snapshot(log, "mvn"))  # the model has no MVN
    run_pipeline(divide_slice_model(), pipeline)
    assert [label for label, _ in log] == ["mvn"]


def test_inserted_class_is_built_for_each_run_and_instances_run_each_time():
    built = []

    class Counting(ModelPass):
        def __init__(self):
            super().__init__()
            built.append(self)

        def run_on_model(self, model):
            return False
    log = []
    pipeline = GnaTransformationsPipeline()
    pipeline.insert_after("TSGeneral", Counting).insert_after("TSGeneral", Snapshot(log, "s"))
    run_pipeline(divide_slice_model(), pipeline)
    run_pipeline(divide_slice_model(), pipeline)
    assert len(built) == 2 and len(log) == 2


class ReluToSigmoid(MatcherPass):
    def __init__(self):
        super().__init__()

        def callback(m):
            r = m.match_root
            s = opset.sigmoid(r.input_value(0))
            s.friendly_name = r.friendly_name
            r.output(0).replace(s.output(0))
            return True
        self.register_matcher(Matcher(wrap_type(ops.Relu), "ReluToSigmoid"), callback)


def test_inserted_rewrite_changes_the_model_and_obeys_the_callers_config():
    pipeline = GnaTransformationsPipeline().insert_before("TSGeneral", ReluToSigmoid())
    model = divide_slice_model()
    run_pipeline(model, pipeline)
    assert not any(n.type_name == "Relu" for n in model.get_ordered_ops())

    config = PassConfig()
    config.disable(ReluToSigmoid)
    model = divide_slice_model()
    run_pipeline(model, GnaTransformationsPipeline().insert_before("TSGeneral", ReluToSigmoid()),
                 config)
    assert any(n.type_name == "Relu" for n in model.get_ordered_ops())


def test_inserted_pass_is_validated_and_named():
    class StrayConvert(ModelPass):
        def run_on_model(self, model):
            result = model.results[0]
            src = result.input_value(0)
            result.input(0).replace_source_output(opset.convert(src, np.int32).output(0))
            return True
    pipeline = GnaTransformationsPipeline().insert_after("LayoutCleanup", StrayConvert())
    with pytest.raises(PassValidationError, match="'StrayConvert'.*f32 became i32"):
        run_pipeline(divide_slice_model(), pipeline)


def test_unknown_stage_and_non_pass_are_refused():
    pipeline = GnaTransformationsPipeline()
    with pytest.raises(NetpassError, match="no stage 'Sinking'; stages: InitNodeInfo, "):
        pipeline.insert_after("Sinking", ReluToSigmoid())
    with pytest.raises(TypeError, match="expected a ModelPass or MatcherPass"):
        pipeline.insert_before("TSGeneral", lambda model: True)
