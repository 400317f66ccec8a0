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

    ``inputs[name]`` runs before the device graph on the user's input ``name``, or, for an
    input of the main model the split added (``sources[name]``: the user's input it is
    computed from), on that user input: an input read in two layouts (by an edge Transpose
    and by another op) becomes two inputs of the main model, one per layout.
    ``outputs[name]`` runs after it on the device's output ``name``. Iterating the mapping
    gives every name (inputs first).
    """

    def __init__(self) -> None:
        self.inputs: dict[str, Model] = {}
        self.outputs: dict[str, Model] = {}
        self.sources: dict[str, str] = {}
        self._input_shapes: dict[str, tuple[int, ...]] = {}
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
        """Apply the input models (each to the user's input it reads); other inputs pass
        through unchanged."""
        out = dict(feeds)
        for name, m in self.inputs.items():
            src = self.sources.get(name, name)
            if src in feeds:
                arr = np.asarray(feeds[src])
                out[name] = _run_flat(m, arr).reshape(self._input_shapes.get(name, arr.shape))
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
    # (a producer other ops read too stays in the main model under its own name, the one the
    # pipeline's warnings give it: OpenVINO's rule renames a replacement of one reader only)
    if len(graph_consumers(repl)) > 1 or not replace_output_update_name(out, repl):
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


def _only_results(value: Output) -> bool:
    """Every reader of ``value`` is a Result, or a reshape whose readers are, and there is
    one at least (the outputs the cut ops go to)."""
    cons = graph_consumers(value)
    return bool(cons) and all(isinstance(c.node, Result) or _is_reshape(c.node)
                              and _only_results(c.node.output(0)) for c in cons)


def _results_of(value: Output) -> list[Result]:
    """The Results reading ``value`` behind reshapes (``_only_results`` holds)."""
    found: list[Result] = []
    for c in graph_consumers(value):
        found += [c.node] if isinstance(c.node, Result) else _results_of(c.node.output(0))
    return found


def _output_edge(result: Result) -> Node | None:
    """The op before ``result``, behind reshapes, that the cut may take: what it feeds leads
    only to outputs. Branches to several outputs each take it (the GNA pipeline's
    ``at_model_edge`` counts such an op at the edge)."""
    cur = result.input_value(0)
    while _only_results(cur):
        if not _is_reshape(cur.node):
            return cur.node if cur.node.get_output_size() == 1 else None
        cur = cur.node.input_value(0)
    return None


def split_pre_post_processing(model: Model) -> PrePostProcessModels:
    """Move edge Gathers and unsupported Transposes into :class:`PrePostProcessModels`.

    Looks through single-consumer Reshapes, Squeezes and Unsqueezes from every Parameter
    forward and from every Result backward. An input read by several ops (behind Reshapes)
    keeps its readers; each chain of edge ops among them is computed by a pre-processing model
    from it, read by the main model as a new input (``PrePostProcessModels.sources``). The
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
    for param in list(model.parameters):
        cut: list[Node] = []
        while (node := _input_edge(param)) is not None and _cuttable(node):
            cut.append(node)
            _remove_single_input_node(node)
        if cut:
            name = parameter_name(param)
            models.inputs[name] = _chain_model(cut, name)
        else:
            _derive_inputs(model, param, models)
    # (an op cut before several outputs is in each one's chain)
    chains: dict[Result, list[Node]] = {}
    for res in model.results:
        while (node := _output_edge(res)) is not None and not isinstance(node, Parameter) \
                and _cuttable(node):
            for r in _results_of(node.output(0)):
                chains.setdefault(r, []).append(node)
            _remove_single_input_node(node)  # (keeps the Results' shapes)
    for res, cut in chains.items():
        name = result_name(res)
        models.outputs[name] = _chain_model(cut[::-1], name)
        models._output_shapes[name] = res.input_value(0).shape


def _edge_chain(value: Output) -> list[Node]:
    """The cuttable ops met one after another from ``value`` (its one reader, or, for a
    Parameter's output, the reader the caller took), each behind single-consumer reshapes."""
    chain: list[Node] = []
    cons = graph_consumers(value)
    while len(cons) == 1 and cons[0].index == 0:
        node = cons[0].node
        if not (_is_reshape(node) or _cuttable(node)):
            break
        if _cuttable(node):
            chain.append(node)
        cons = graph_consumers(node.output(0))
    # (reshapes after the last cut op stay in the main model)
    return chain


def _derive_inputs(model: Model, param: Parameter, models: PrePostProcessModels) -> None:
    """An input read several times (behind reshapes), by a chain of edge ops among others (the
    input in two layouts: a conv after an input Transpose and a residual Add or an output
    reading the input itself): each such chain is computed by a pre-processing model from the
    user's input and read by the main model as an input of its own, named ``<input>.<i>``."""
    name = parameter_name(param)
    chains: list[list[Node]] = []
    values = [param.output(0)]  # the input and its reshapes: the user's data in its order
    while values:
        for reader in graph_consumers(values.pop()):
            if reader.index != 0:
                continue
            if _is_reshape(reader.node):
                values.append(reader.node.output(0))
            elif _cuttable(reader.node):
                chains.append([reader.node, *_edge_chain(reader.node.output(0))])
    # (a new input's name is no input's and no tensor's: torch names tensors ``x.1`` too)
    taken = {parameter_name(p) for p in model.parameters} | {
        t for n in model.get_ordered_ops() for o in n.outputs() for t in o.names} \
        if chains else set()
    for chain in chains:
        last = chain[-1].output(0)
        i = 1
        while f"{name}.{i}" in taken:
            i += 1
        derived = f"{name}.{i}"
        taken.add(derived)
        new = Parameter([], shape=last.partial_shape, element_type=last.element_type)
        new.friendly_name = derived
        new.output(0).names.add(derived)
        last.replace(new.output(0))
        model.add_parameters([new])
        models.inputs[derived] = _chain_model(chain, derived)
        models.sources[derived] = name
        models._input_shapes[derived] = tuple(last.partial_shape.to_shape())
