"""Greedy text generation with a causal language model compiled by netpass.

A decoder exported with its key/value cache (``past_key_values.N.key`` in,
``present.N.key`` out) runs two ways:

- **stateful** (:func:`stateful_decoder`, then ``compile_model``): the cache is a set of
  variables the infer request keeps; each step feeds only the new tokens;
- **with the cache as inputs** (``cache_pairs`` given to :class:`GreedyDecoder`): each step
  feeds the previous step's ``present`` outputs back as ``past`` inputs, as a caller of the
  plain export does.

:meth:`GreedyDecoder.generate` prefills the prompt, then decodes one token per inference,
and reports the time to the first token, each decode step's latency and tokens per second.
"""
from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .core.dimension import Symbol
from .core.model import Model
from .core.shape import PartialShape
from .core.state_lengths import RT_INFO_KEY, StateLength, to_rt_info
from .errors import DeviceError, NetpassError

# Inputs a decoder may take besides its cache, filled by GreedyDecoder.
TOKEN_INPUTS = ("input_ids", "attention_mask", "position_ids", "beam_idx")
NEXT_TOKEN = "next_token"  # the output with_next_token adds


def stateful_decoder(model: Model, batch_input: str = "input_ids",
                     last_logits: bool = False) -> Model:
    """A stateful copy of ``model`` (which is not changed): its past/present pairs
    (:func:`~netpass.ngraph_passes.common.find_kv_cache_pairs`) become variables
    (:class:`~netpass.ngraph_passes.common.MakeStateful`); where the cache has a dynamic
    batch, its initial value takes the batch of ``batch_input``
    (:class:`~netpass.ngraph_passes.common.BuildStateInitializer`). ``last_logits``: the
    logits of the last position only (:func:`slice_before_lm_head`). The inputs whose length
    must cover the past and the new tokens (:func:`find_state_lengths`: the attention mask)
    are recorded in its rt_info, so that its requests refuse a shorter one."""
    from .ngraph_passes.common import BuildStateInitializer, MakeStateful, find_kv_cache_pairs
    from .passes import Manager
    pairs = find_kv_cache_pairs(model)
    if not pairs:
        raise NetpassError(f"no past/present key-value pairs among the inputs "
                           f"{model.input_names} and outputs {model.output_names}")
    stateful = model.clone()
    manager = Manager()
    manager.register_pass(MakeStateful(pairs))
    if batch_input in stateful.input_names:
        manager.register_pass(BuildStateInitializer(batch_input))
    manager.run_passes(stateful)
    rules = find_state_lengths(stateful)
    if rules:  # (checked by the requests before each inference: core.state_lengths)
        stateful.rt_info[RT_INFO_KEY] = to_rt_info(rules)
    if last_logits:
        slice_before_lm_head(stateful)
    return stateful


def find_state_lengths(model: Model) -> list[StateLength]:
    """The inputs of the stateful ``model`` whose length must cover the past and the new
    tokens (:mod:`netpass.core.state_lengths`), read off the graph: an input whose values
    reach the table of a Gather, GatherND or GatherElements (through reshapes and converts)
    whose indices have a dim of ``past + new``, a variable's length plus an input's, as shape
    inference proves it (the derived symbol ``seq + past`` of the ``arange(past + new)`` a
    transformers export indexes its mask with, per batch row or flattened). That Gather reads
    the input at one position per past and new token, so the input's one dynamic axis past
    the batch (axis 0) must have as many. One rule per input; none where no Gather is read so
    (nothing is checked then).

    Why from the graph and not by the name ``attention_mask``: the graph says which variable
    and which input count the tokens, along which axes, and that the export reads the mask by
    position at all (an export that only sums or broadcasts it needs no rule), whatever the
    inputs are called. Why at least and not equal: the export's own indexing cuts a longer
    mask, as onnxruntime does."""
    from .ops.state import ReadValue
    variables: dict[Symbol, tuple[str, int, int]] = {}  # symbol -> (variable, axis, initial)
    for op in model.get_ordered_ops():
        if isinstance(op, ReadValue):
            for axis, sym in _named_dims(op.output(0).partial_shape):
                initial = _initial_length(op, axis)
                if initial is not None:
                    variables.setdefault(sym, (op.variable_id, axis, initial))
    inputs: dict[Symbol, tuple[str, int]] = {}  # symbol -> (input, axis), first input first
    for name, param in zip(model.input_names, model.parameters):
        for axis, sym in _named_dims(param.output(0).partial_shape):
            inputs.setdefault(sym, (name, axis))
    rules = []
    for name, param in zip(model.input_names, model.parameters):
        ps = param.output(0).partial_shape
        axes = [a for a, d in enumerate(ps) if a > 0 and d.is_dynamic] \
            if ps.rank_is_static else []
        if len(axes) != 1:
            continue
        for gather in _tables_of(param):
            found = _past_plus_new(gather.input_value(1).partial_shape, variables, inputs)
            if found is not None and found[1][0] != name:
                (variable, v_axis, initial), (tokens, t_axis) = found
                rules.append(StateLength(name, axes[0], tokens, t_axis, variable, v_axis,
                                         initial))
                break
    return rules


def _named_dims(ps: PartialShape) -> list[tuple[int, Symbol]]:
    """(axis, symbol) of the dims of ``ps`` that carry a named (not derived) symbol."""
    if not ps.rank_is_static:
        return []
    return [(a, d.symbol) for a, d in enumerate(ps)
            if d.symbol is not None and not d.symbol.is_derived]


def _initial_length(read: Any, axis: int) -> int | None:
    """The length along ``axis`` of ReadValue ``read``'s variable never set: its init value's
    where that is static, the lower bound of its dim without one; None when unknown."""
    if read.get_input_size():
        ps = read.input_value(0).partial_shape
        return ps[axis].min if ps.rank_is_static and ps[axis].is_static else None
    return read.output(0).partial_shape[axis].min


def _tables_of(param: Any, depth: int = 8) -> list[Any]:
    """The Gather-family nodes whose table (input 0) is ``param``'s value, reshaped or
    converted on the way (``depth`` ops at most: the exports flatten the mask, cast it to
    bool)."""
    from .ops.elementwise import Convert
    from .ops.indexing.gather import Gather, GatherElements, GatherND
    from .ops.movement.reshape import Reshape, Squeeze, Unsqueeze
    found, frontier = [], [param]
    for _ in range(depth):
        nxt = []
        for node in frontier:
            for inp in node.output(0).consumers():
                user = inp.get_node()
                if inp.get_index() != 0:
                    continue
                if isinstance(user, (Gather, GatherElements, GatherND)):
                    found.append(user)
                elif isinstance(user, (Reshape, Squeeze, Unsqueeze, Convert)):
                    nxt.append(user)
        frontier = nxt
    return found


def _past_plus_new(ps: PartialShape, variables: Mapping[Symbol, tuple[str, int, int]],
                   inputs: Mapping[Symbol, tuple[str, int]]
                   ) -> tuple[tuple[str, int, int], tuple[str, int]] | None:
    """((variable, axis, initial), (input, axis)) of the first dim of ``ps`` whose symbol is
    a variable's length plus an input's (``past + seq``), or None."""
    if not ps.rank_is_static:
        return None
    for d in ps:
        if d.symbol is None or not d.symbol.is_derived:
            continue
        terms, const = d.symbol.form()
        if const or len(terms) != 2 or any(c != 1 or len(m) != 1 for m, c in terms.items()):
            continue
        a, b = (m[0] for m in terms)
        for past, new in ((a, b), (b, a)):
            if past in variables and new in inputs:
                return variables[past], inputs[new]
    return None


def slice_before_lm_head(model: Model, output: str = "logits") -> bool:
    """Give ``output`` (a decoder's logits, ``[batch, seq, vocab]``) the last position only, by
    slicing the LM head's input (``MatMul(x [..., seq, d], W)``) to its last row, as OpenVINO
    GenAI does before generating (``apply_slice_before_matmul_transformation``): a prompt's
    step then computes and returns one row of logits instead of ``seq``, all a greedy or
    sampling step reads. Changes ``model`` in place; whether it found the LM head (a MatMul
    by weights of rank 2 computed from constants alone, whose input has a static rank of 3 or
    more: the dynamo exporter's tied head reads ``Transpose(embeddings)``), reached from the
    output through elementwise ops by constants of one row at most (a bias, GPT-J's and
    Phi's; a scale, Granite's; Gemma 2's soft cap), each value on the way read once (so
    nothing else sees one row instead of all)."""
    from .ops.matmul import MatMul
    from .ops.movement import slice as slice_op
    results = [r for r in model.results if output in r.output(0).names] or \
        [r for n, r in zip(model.output_names, model.results) if n == output]
    if not results:
        return False
    head = _row_wise_source(results[0].input_value(0).node)
    if not isinstance(head, MatMul) or head.get_attributes().get("transpose_a") \
            or len(head.output(0).consumers()) != 1:
        return False
    x = head.input_value(0)
    w = head.input_value(1)
    ps = x.partial_shape
    if not _from_constants(w.node) or not w.partial_shape.rank_is_static \
            or len(w.partial_shape) != 2 or not ps.rank_is_static or len(ps) < 3:
        return False
    axis = np.array([len(ps) - 2], np.int64)
    last = slice_op(x, np.array([-1], np.int64), np.array([np.iinfo(np.int64).max], np.int64),
                    np.array([1], np.int64), axis)
    head.input(0).replace_source_output(last.output(0))
    model.validate_nodes_and_infer_types()
    return True


def _row_wise_source(node, depth: int = 8):
    """The first node up from ``node`` that is not an elementwise op of one computed input and
    constants of at most one row (rank 1, or leading dims of 1: the same for every position,
    so that it commutes with slicing the positions), ``depth`` ops up at most."""
    from .core.boundary import Constant
    from .ops.base import BinaryElementwiseArithmetic, UnaryElementwiseArithmetic
    from .ops.elementwise import Convert
    while depth and isinstance(node, (UnaryElementwiseArithmetic, BinaryElementwiseArithmetic,
                                      Convert)):
        computed = [v for v in node.input_values() if not isinstance(v.node, Constant)]
        consts = [v.node.value for v in node.input_values() if isinstance(v.node, Constant)]
        if len(computed) != 1 or any(np.ndim(c) > 1 and any(d != 1 for d in np.shape(c)[:-1])
                                     for c in consts) or len(computed[0].consumers()) != 1:
            return node
        node, depth = computed[0].node, depth - 1
    return node


def _from_constants(node, depth: int = 8) -> bool:
    """Whether ``node`` is a Constant or an op of Constants alone (``depth`` ops deep at most:
    weights transposed or converted on the way to a MatMul)."""
    from .core.boundary import Constant, Parameter
    if isinstance(node, Constant):
        return True
    if isinstance(node, Parameter) or depth == 0 or not node.input_values():
        return False
    return all(_from_constants(v.node, depth - 1) for v in node.input_values())


def with_next_token(model: Model, logits: str = "logits", input_ids: str = "input_ids") -> Model:
    """A copy of decoder ``model`` (which is not changed) with one more output, ``next_token``
    (NEXT_TOKEN): the greedy choice from output ``logits`` (``[batch, seq, vocab]``) at the
    last position, ``TopK(k=1)``'s index (ties: the lowest index, as ``numpy.argmax``) as
    ``input_ids``' element type, ``[batch, 1]``: what the next step takes as its
    ``input_ids``. The token is chosen on the device, so a decoding loop need not read the
    logits back, and it can stay there for the next step (``GreedyDecoder.generate``'s
    ``on_device``: the request's ``device_outputs``).

    Why an output and not a variable read back as ``input_ids`` (``ReadValue(input_ids)``,
    ``Assign(token)``): a copied variable's two buffers swap at each step, so the step's
    kernels that read it take other arguments each time, which the runtime's steady decode
    steps (:mod:`~netpass.runtime.length_steady`) do not replay; a device tensor the request
    copies the output into, fed as the next step's input, keeps every buffer in place."""
    from .core.types import i64
    from .ops.elementwise import convert
    from .ops.io import result
    from .ops.movement import slice as slice_op
    from .ops.movement.reshape import squeeze
    from .ops.reduction import topk
    if NEXT_TOKEN in model.output_names:
        raise NetpassError(f"with_next_token: the model already has an output '{NEXT_TOKEN}'")
    if logits not in model.output_names or input_ids not in model.input_names:
        raise NetpassError(f"with_next_token: need output '{logits}' and input '{input_ids}'; "
                           f"the model has inputs {model.input_names}, outputs "
                           f"{model.output_names}")
    out = model.clone()
    scores = out.results[out.output_names.index(logits)].input_value(0)
    ids = out.parameters[out.input_names.index(input_ids)].output(0)
    ps = scores.partial_shape
    if not ps.rank_is_static or len(ps) != 3 or not ids.element_type.is_integral:
        raise NetpassError(f"with_next_token: output '{logits}' must be [batch, seq, vocab] and "
                           f"input '{input_ids}' integers; got {ps} and {ids.element_type}")
    last = squeeze(slice_op(scores, np.array([-1], np.int64),
                            np.array([np.iinfo(np.int64).max], np.int64),
                            np.array([1], np.int64), np.array([1], np.int64)),
                   np.array([1], np.int64))
    best = topk(last, np.array(1, np.int64), -1, "max", "none", index_element_type=i64)
    token = best.output(1) if ids.element_type == i64 else \
        convert(best.output(1), ids.element_type).output(0)
    out.add_results([result(token, name=NEXT_TOKEN)])
    out.validate_nodes_and_infer_types()
    return out


@dataclass
class Generation:
    """What :meth:`GreedyDecoder.generate` produced and how long it took."""

    tokens: np.ndarray                    # [batch, new tokens]
    # per new token: the logits it was chosen from (on_device: only when asked, else none)
    logits: list[np.ndarray]
    time_to_first_token_s: float          # the prefill inference (prompt -> first token)
    # each decode inference (on_device: the wall time between successive tokens)
    token_latencies_s: list[float] = field(default_factory=list)
    # what the decode inferences added to the request's integer counters (``req.stats``:
    # launches, allocations, host waits...), where the request keeps them
    decode_stats: dict[str, int] = field(default_factory=dict)

    @property
    def per_token_s(self) -> float:
        """Median decode latency (seconds per token after the first)."""
        return float(np.median(self.token_latencies_s)) if self.token_latencies_s else 0.0

    @property
    def tokens_per_s(self) -> float:
        """Decode throughput: tokens after the first per second of decode inferences."""
        total = sum(self.token_latencies_s)
        return len(self.token_latencies_s) / total if total else 0.0


class GreedyDecoder:
    """Greedy decoding with ``compiled`` (a ``netpass.CompiledModel``).

    ``cache_pairs`` (``{past input: present output}``) runs a model that takes its cache as
    inputs; without it the model must be stateful or keep no cache. The model's inputs other
    than its cache must be among ``input_ids`` (required), ``attention_mask`` (ones over past
    and new tokens), ``position_ids`` (the new tokens' positions) and ``beam_idx`` (the batch
    rows in order); ``logits`` (else the first output) holds the scores per position.
    """

    def __init__(self, compiled: Any, cache_pairs: Mapping[str, str] | None = None) -> None:
        self.compiled = compiled
        self.ports = {p.name: p for p in compiled.inputs}
        self.cache_pairs = dict(cache_pairs or {})
        unknown = [n for n in self.ports if n not in TOKEN_INPUTS and n not in self.cache_pairs]
        if unknown or "input_ids" not in self.ports:
            raise NetpassError(f"GreedyDecoder: the model's inputs {list(self.ports)} are not a "
                               f"decoder's: need input_ids, may have {TOKEN_INPUTS[1:]} and "
                               f"cache inputs; cannot fill {unknown or ['input_ids']}")
        names = [p.name for p in compiled.outputs]
        self.logits_name = "logits" if "logits" in names else names[0]

    def _dtype(self, name: str) -> np.dtype:
        dtype = self.ports[name].element_type.dtype
        return np.dtype(dtype if dtype is not None else np.int64)

    def _empty_cache(self, name: str, batch: int) -> np.ndarray:
        """A past input of no tokens: batch rows, the static dims, 0 for the other ones."""
        ps = self.ports[name].partial_shape
        shape = [d.min if d.is_static else (batch if axis == 0 else 0)
                 for axis, d in enumerate(ps)]
        return np.zeros(shape, self._dtype(name))

    def _feeds(self, ids: np.ndarray, past: int, cache: dict[str, np.ndarray]) -> dict:
        batch, new = ids.shape
        feeds = {"input_ids": ids.astype(self._dtype("input_ids"))}
        if "attention_mask" in self.ports:
            feeds["attention_mask"] = np.ones((batch, past + new), self._dtype("attention_mask"))
        if "position_ids" in self.ports:
            pos = np.arange(past, past + new, dtype=self._dtype("position_ids"))
            feeds["position_ids"] = np.broadcast_to(pos, (batch, new)).copy()
        if "beam_idx" in self.ports:
            feeds["beam_idx"] = np.arange(batch, dtype=self._dtype("beam_idx"))
        feeds.update(cache)
        return feeds

    def generate(self, prompt_ids: Any, new_tokens: int, request: Any = None,
                 on_device: bool = False, in_flight: int = 2,
                 with_logits: bool = False) -> Generation:
        """Prefill ``prompt_ids`` (``[batch, length]`` ints), then decode until ``new_tokens``
        tokens are chosen (the first from the prefill). ``request`` (default: a new one of
        the compiled model) is reset first when the model is stateful.

        ``on_device`` (a stateful model with the output :func:`with_next_token` adds, on the
        runtime): each step's token is chosen and fed to the next step on the device, and
        steps are enqueued without waiting (the request's ``enqueue``), at most
        ``in_flight`` at once, so the host enqueues the next step while the device runs
        this one; each token is read (a few bytes) as its step completes, the logits only
        with ``with_logits``. On a device without device memory (REFERENCE) the tokens go
        through the host, one step at a time."""
        if on_device:
            return self._generate_on_device(prompt_ids, new_tokens, request, in_flight,
                                            with_logits)
        prompt = self._check(prompt_ids, new_tokens)
        req = request if request is not None else self.compiled.create_infer_request()
        if hasattr(req, "reset_state"):
            req.reset_state()
        batch = prompt.shape[0]
        cache = {n: self._empty_cache(n, batch) for n in self.cache_pairs}
        ids, past = prompt, 0
        chosen: list[np.ndarray] = []
        logits: list[np.ndarray] = []
        times: list[float] = []
        after_prefill: dict[str, int] = {}
        while True:
            feeds = self._feeds(ids, past, cache)
            start = time.perf_counter()
            outs = req.infer(feeds)
            times.append(time.perf_counter() - start)
            if len(times) == 1:
                after_prefill = _counters(req)
            last = np.asarray(outs[self.logits_name])[:, -1]
            logits.append(last)
            chosen.append(last.argmax(-1))
            if len(chosen) == new_tokens:
                break
            cache = {n: outs[r] for n, r in self.cache_pairs.items()}
            past += ids.shape[1]
            ids = chosen[-1][:, None]
        end = _counters(req)
        decode = {k: v - after_prefill[k] for k, v in end.items() if k in after_prefill}
        return Generation(np.stack(chosen, axis=1), logits, times[0], times[1:], decode)

    def _check(self, prompt_ids: Any, new_tokens: int) -> np.ndarray:
        prompt = np.asarray(prompt_ids)
        if prompt.ndim != 2 or prompt.shape[1] == 0:
            raise NetpassError(f"GreedyDecoder: prompt_ids must be [batch, length>0], got "
                               f"shape {list(prompt.shape)}")
        if new_tokens < 1:
            raise NetpassError(f"GreedyDecoder: new_tokens must be >= 1, got {new_tokens}")
        return prompt

    def _generate_on_device(self, prompt_ids: Any, new_tokens: int, request: Any,
                            in_flight: int, with_logits: bool) -> Generation:
        """:meth:`generate` with ``on_device`` (its docstring)."""
        prompt = self._check(prompt_ids, new_tokens)
        if self.cache_pairs or NEXT_TOKEN not in [p.name for p in self.compiled.outputs]:
            raise NetpassError(f"GreedyDecoder(on_device): needs a stateful model (no "
                               f"cache_pairs) with output '{NEXT_TOKEN}' (with_next_token)")
        if in_flight < 1:
            raise NetpassError(f"GreedyDecoder: in_flight must be >= 1, got {in_flight}")
        req = request if request is not None else self.compiled.create_infer_request()
        batch = prompt.shape[0]
        try:  # (where the next step's input_ids is read from)
            tok = self.compiled.create_device_tensor(np.zeros((batch, 1),
                                                              self._dtype("input_ids")))
        except DeviceError:
            tok, in_flight = None, 1  # (no device memory: each token through the host)
        read = (NEXT_TOKEN, self.logits_name) if with_logits else (NEXT_TOKEN,)
        into = {NEXT_TOKEN: tok} if tok is not None else None
        req.reset_state()
        start = time.perf_counter()
        first = req.enqueue(self._feeds(prompt, 0, {}), read, into).result()
        stamps = [time.perf_counter()]
        after_prefill = _counters(req)
        outs = [first]
        pending: deque = deque()
        past, enqueued = prompt.shape[1], 1
        while len(outs) < new_tokens:
            while len(pending) < in_flight and enqueued < new_tokens:
                ids = tok if tok is not None else outs[-1][NEXT_TOKEN]
                feeds = self._feeds(np.zeros((batch, 1), np.int64), past, {})
                feeds["input_ids"] = ids
                pending.append(req.enqueue(feeds, read, into))
                past, enqueued = past + 1, enqueued + 1
            outs.append(pending.popleft().result())
            stamps.append(time.perf_counter())
        end = _counters(req)
        decode = {k: v - after_prefill[k] for k, v in end.items() if k in after_prefill}
        tokens = np.stack([np.asarray(o[NEXT_TOKEN]).reshape(batch) for o in outs], axis=1)
        logits = [np.asarray(o[self.logits_name])[:, -1] for o in outs] if with_logits else []
        return Generation(tokens, logits, stamps[0] - start,
                          [b - a for a, b in zip(stamps, stamps[1:])], decode)


def _counters(request: Any) -> dict[str, int]:
    """The integer counters of ``request.stats`` (none where it keeps no stats)."""
    stats = getattr(request, "stats", None) or {}
    return {k: v for k, v in stats.items() if isinstance(v, int) and not isinstance(v, bool)}


__all__ = ["Generation", "GreedyDecoder", "NEXT_TOKEN", "find_state_lengths",
           "slice_before_lm_head", "stateful_decoder", "with_next_token", "TOKEN_INPUTS"]
