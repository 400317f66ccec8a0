"""Cutting edge Transposes/Gathers out of a model into host-side models."""
from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np

from .. import reference
from ..core.graph_util import replace_output_update_name
from ..core.model import Model, parameter_name, result_name
from ..core.node import Node, Output
from ..ngraph_passes.utils import graph_consumers
from ..ops.io import Constant, Parameter, Result
from ..ops.movement import Reshape, Squeeze, Unsqueeze
from ..passes.validation import validate_changes


class PrePostProcessModels(Mapping):
    """Small host-side models keyed by the model input or output name they wrap.

    ``inputs[name]`` runs before the device graph on the user's input ``name``;
    ``outputs[name]`` runs after it on the device's output ``name``. Iterating the mapping
    gives every name (inputs first).
    """

    def __init__(self) -> None:
        self.inputs: dict[str, Model] = {}
        self.outputs: dict[str, Model] = {}
        self._output_shapes: dict[str, tuple[int, ...]] = {}

    def __getitem__(self, name: str) -> Model:
        if name in self.inputs:
            return self.inputs[name]
        return self.outputs[name]

    def __iter__(self) -> Iterator[str]:
        yield from self.inputs
        yield from (n for n in self.outputs if n not in self.inputs)

    def __len__(self) -> int:
        return len(set(self.inputs) | set(self.outputs))

    def preprocess(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Apply the input models; other inputs pass through unchanged."""
        out = dict(feeds)
        for name, m in self.inputs.items():
            if name in out:
                arr = np.asarray(out[name])
                out[name] = _run_flat(m, arr).reshape(arr.shape)
        return out

    def postprocess(self, results: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Apply the output models; other outputs pass through unchanged."""
        out = dict(results)
        for name, m in self.outputs.items():
            if name in out:
                out[name] = _run_flat(m, np.asarray(out[name])).reshape(self._output_shapes[name])
        return out


def _run_flat(model: Model, arr: np.ndarray) -> np.ndarray:
    param = model.parameters[0]
    x = arr.reshape(param.output(0).partial_shape.to_shape())
    return next(iter(reference.infer(model, {model.input_names[0]: x}).values()))


def _is_reshape(node: Node) -> bool:
    """A node that only renames the shape (the layout pipeline's ``at_model_edge`` looks through
    the same three, and the ops ``_cuttable`` takes: a Transpose it leaves behind an Unsqueeze
    before a Result is an edge one)."""
    return isinstance(node, (Reshape, Squeeze, Unsqueeze))


def _cuttable(node: Node) -> bool:
    """A Gather (permutation along one axis) or a Transpose the target cannot run, with static
    shapes and constant parameters, whose output has as many elements as its input (the GNA
    pipeline's rule, which counts the ops behind such a chain as at the edge too)."""
    from ..ngraph_passes.gna.limitations import cut_at_edge
    return cut_at_edge(node)


def _chain_model(nodes: list[Node], name: str) -> Model:
    """A model of ``nodes`` (cut ops in data-flow order) applied one after another, each to
    its predecessor's output reshaped to its own input shape (what the Reshapes between them in
    the main model did)."""
    src = nodes[0].input_value(0)
    p = Parameter([], shape=src.partial_shape, element_type=src.element_type)
    p.friendly_name = name
    value = p.output(0)
    for node in nodes:
        want = node.input_value(0).partial_shape
        if value.partial_shape != want:
            target = Constant([], value=np.array(want.to_shape(), dtype=np.int64))
            value = Reshape([value, target.output(0)], special_zero=False).output(0)
        clone = node.clone_with_new_inputs([value, *node.input_values()[1:]])
        clone.friendly_name = node.friendly_name
        value = clone.output(0)
    r = Result([value])
    r.friendly_name = name
    return Model([r], [p], f"{name}_processing")


def _remove_single_input_node(node: Node) -> None:
    """Bypass ``node``; a Reshape to its output shape stands in when the shapes differ."""
    src, out = node.input_value(0), node.output(0)
    if src.partial_shape == out.partial_shape:
        repl: Output = src
    else:
        target = Constant([], value=np.array(out.shape, dtype=np.int64))
        reshape = Reshape([src, target.output(0)], special_zero=False)
        reshape.friendly_name = node.friendly_name
        repl = reshape.output(0)
    if not replace_output_update_name(out, repl):
        out.replace(repl)


def _input_edge(param: Parameter) -> Node | None:
    cur = param.output(0)
    while True:
        cons = graph_consumers(cur)  # (not an op cut before, which still reads it)
        if len(cons) != 1 or cons[0].index != 0:
            return None
        node = cons[0].node
        if _is_reshape(node):
            cur = node.output(0)
            continue
        return node


def _output_edge(result: Result) -> Node | None:
    cur = result.input_value(0)
    while _is_reshape(cur.node) and len(graph_consumers(cur)) == 1:
        cur = cur.node.input_value(0)
    if len(graph_consumers(cur)) != 1 or cur.node.get_output_size() != 1:
        return None
    return cur.node


def split_pre_post_processing(model: Model) -> PrePostProcessModels:
    """Move edge Gathers and unsupported Transposes into :class:`PrePostProcessModels`.

    Looks through single-consumer Reshapes, Squeezes and Unsqueezes from every Parameter
    forward and from every Result backward; an input with several consumers is left as is. The
    main model is changed in place and re-validated.
    """
    models = PrePostProcessModels()
    # Only what the cuts changed is re-inferred (a whole-model pass took as long as the cuts
    # on large models, where the cuts change at most a few nodes).
    with model.track_changes() as log:
        _cut_edges(model, models)
        validate_changes("split_pre_post_processing", model, log)
        log.settled()
    return models


def _cut_edges(model: Model, models: PrePostProcessModels) -> None:
    """Cut edge ops one after another from each input (output) while the next one met is
    cuttable too (a Gather then a Transpose), so that none is left inside for lack of a second
    cut; each edge's cut ops become one model."""
    for param in model.parameters:
        cut: list[Node] = []
        while (node := _input_edge(param)) is not None and _cuttable(node):
            cut.append(node)
            _remove_single_input_node(node)
        if cut:
            name = parameter_name(param)
            models.inputs[name] = _chain_model(cut, name)
    for res in model.results:
        cut = []
        name = result_name(res)
        while (node := _output_edge(res)) is not None and not isinstance(node, Parameter) \
                and _cuttable(node):
            cut.append(node)
            _remove_single_input_node(node)  # (keeps the Result's shape)
        if cut:
            models.outputs[name] = _chain_model(cut[::-1], name)
            models._output_shapes[name] = res.input_value(0).shape
