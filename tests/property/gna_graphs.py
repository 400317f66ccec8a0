"""What the GNA-flow property tests share: an ONNX graph builder for their generators and the
check of issue 16's requirement on a graph (no Gather and no Transpose GNA cannot run inside
after GnaTransformationsPipeline + split_pre_post_processing; every output what onnxruntime
computes on the original)."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
from onnx import helper, numpy_helper

import netpass
from netpass.ngraph_passes.gna import GnaTransformationsPipeline, is_transpose_supported
from netpass.passes import Manager
from netpass.prepost import split_pre_post_processing
from netpass.testing import random_inputs


class OnnxGraph:
    """An ONNX graph under construction: nodes and initializers with fresh names, its random
    choices drawn from ``rng`` (a generator's subclass adds its blocks)."""

    def __init__(self, rng: np.random.Generator, opset: int) -> None:
        self.rng, self.opset, self.nodes, self.inits, self.n = rng, opset, [], [], 0

    def name(self, stem: str) -> str:
        self.n += 1
        return f"{stem}{self.n}"

    def const(self, value) -> str:
        name = self.name("k")
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, op_type: str, inputs: list, n_out: int = 1, **attrs):
        outs = [self.name(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=self.name(op_type),
                                           **attrs))
        return outs if n_out > 1 else outs[0]


def ort_outputs(data: bytes, feeds: dict) -> dict:
    """onnxruntime's outputs of ONNX ``data`` by name, graph optimizations off (its
    common-subexpression elimination takes two Splits of one tensor into different piece
    counts for one: its optimized graph computes a wrong result)."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, feeds)))


def check_gna_flow(data: bytes) -> None:
    """The pipeline + split of ONNX ``data`` leave no Gather and no Transpose GNA cannot run
    inside, and every output is what onnxruntime computes (relative L2 error <= 1e-5)."""
    model = netpass.read_model(data)
    original = model.clone()
    manager = Manager()
    manager.register_pass(GnaTransformationsPipeline())
    manager.run_passes(model)
    prepost = split_pre_post_processing(model)

    ops = model.get_ordered_ops()
    assert [n.friendly_name for n in ops if n.type_name == "Gather"] == []
    assert [n.friendly_name for n in ops if n.type_name == "Transpose"
            and not is_transpose_supported(n.input_value(0).partial_shape.to_shape())] == []

    feeds = random_inputs(original, seed=7)
    want = ort_outputs(data, feeds)
    names = list(want)
    got = prepost.postprocess(netpass.reference.infer(model, prepost.preprocess(feeds)))
    for name in names:
        assert got[name].shape == want[name].shape, name
        assert np.linalg.norm(got[name] - want[name]) <= 1e-5 * np.linalg.norm(want[name]), name
