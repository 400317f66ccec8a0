"""Inputs whose length follows a stateful model's state: a decoder's attention mask covers the
tokens its variables hold (the past) and the tokens fed now, ``past + new`` in all.

A decoder export indexes its mask with positions it computes from the cache's length and the
new tokens' (transformers: ``mask[b, arange(past + new)]``). A mask shorter than that is read
out of bounds: onnxruntime refuses it, netpass's Gather-8 semantics read zeros there, so the
inference would silently attend to the wrong keys. The feed check (:mod:`.feeds`) cannot see
this: it needs the variables' length, which only the infer request knows.

So the stateful model carries the constraint, found once by reading its graph
(``netpass.generation.find_state_lengths``), as a :class:`StateLength` per input in
``model.rt_info[RT_INFO_KEY]`` (plain strings and ints: it survives ``clone()`` and an IR
round trip); the requests of every way of running the model check it before running, from
the shapes alone on the host (:func:`check_state_lengths`: a few integer compares, no device
read). A longer input is accepted: the export itself reads only its first ``past + new``
positions, as onnxruntime does. A model without the entry is not checked.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from ..errors import InputError, ModelFormatError
from .shape import PartialShape

RT_INFO_KEY = "state_lengths"

# the fields of a rule in rt_info, besides the input (the key); ints except tokens and variable
_FIELDS = ("axis", "tokens", "tokens_axis", "variable", "variable_axis", "initial")


class StateLength(NamedTuple):
    """Dim ``axis`` of input ``input`` must be at least the length of ``variable`` along
    ``variable_axis`` (``initial`` while the variable was never set) plus dim ``tokens_axis``
    of input ``tokens``: the past tokens the request holds and the new ones."""

    input: str
    axis: int
    tokens: str
    tokens_axis: int
    variable: str
    variable_axis: int
    initial: int


def to_rt_info(rules: Sequence[StateLength]) -> dict[str, dict[str, Any]]:
    """``rules`` as the value of ``model.rt_info[RT_INFO_KEY]``: by input name."""
    return {r.input: {f: getattr(r, f) for f in _FIELDS} for r in rules}


def read_state_lengths(rt_info: Mapping[Any, Any]) -> tuple[StateLength, ...]:
    """The rules of a model's ``rt_info`` (none without the entry); the IR reader gives every
    value back as a string, hence the conversions. A malformed entry (a hostile IR) raises a
    ModelFormatError naming it."""
    entry = rt_info.get(RT_INFO_KEY)
    if entry is None:
        return ()
    rules = []
    try:
        for name, fields in entry.items():
            rules.append(StateLength(
                str(name), int(fields["axis"]), str(fields["tokens"]),
                int(fields["tokens_axis"]), str(fields["variable"]),
                int(fields["variable_axis"]), int(fields["initial"])))
    except (AttributeError, KeyError, TypeError, ValueError) as e:
        raise ModelFormatError(f"model rt_info '{RT_INFO_KEY}': malformed entry "
                               f"({type(e).__name__}: {e}); expected {{input: {{"
                               f"{', '.join(_FIELDS)}}}}}") from e
    return tuple(rules)


def check_rules(rules: Sequence[StateLength], inputs: Mapping[str, PartialShape],
                variables: Mapping[str, PartialShape]) -> None:
    """Refuse (ModelFormatError) a rule naming an input, a variable or an axis the model lacks
    (``inputs``, ``variables``: partial shapes by name and by id): once, when a model is
    compiled or a request made, so that the check on every inference cannot fail otherwise."""
    for r in rules:
        for kind, name, axis, shapes in (("input", r.input, r.axis, inputs),
                                         ("input", r.tokens, r.tokens_axis, inputs),
                                         ("variable", r.variable, r.variable_axis, variables)):
            shape = shapes.get(name)
            if shape is None or not shape.rank_is_static or not 0 <= axis < len(shape):
                raise ModelFormatError(f"model rt_info '{RT_INFO_KEY}' names axis {axis} of "
                                       f"{kind} '{name}', which the model's {kind}s "
                                       f"{list(shapes)} do not have")


def check_state_lengths(rules: Sequence[StateLength], feeds: Mapping[str, Any],
                        length: Callable[[str, int], int | None]) -> None:
    """Refuse an input shorter than the past plus the new tokens with an InputError naming the
    input, its length, the past's and the new tokens'. ``feeds``: arrays (or device tensors)
    already checked by name and rank; ``length(variable, axis)``: the variable's current
    length along ``axis``, None while it was never set. Shapes only, on the host."""
    for r in rules:
        fed = feeds[r.input].shape[r.axis]
        new = feeds[r.tokens].shape[r.tokens_axis]
        past = length(r.variable, r.variable_axis)
        if past is None:
            past = r.initial
        if fed < past + new:
            raise InputError(r.input, f"length {fed} (dim {r.axis} of shape "
                                      f"{list(feeds[r.input].shape)}) is shorter than the past "
                                      f"plus the new tokens, {past} + {new} = {past + new} "
                                      f"({past} held in variable '{r.variable}', {new} fed in "
                                      f"'{r.tokens}')")
