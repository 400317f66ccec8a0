"""Checking the arrays a caller feeds a model: by input name, element type, rank and dims;
and handing back outputs the caller owns.

One check for every way of running a model (the reference evaluator, the compiled runtime), so
that a wrong feed is refused with the same ``InputError`` whichever runs it.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from ..errors import InputError, OutOfMemoryError
from .shape import PartialShape


class FeedSpec(NamedTuple):
    """What one model input accepts: its name, numpy dtype (None: any) and partial shape;
    ``type_name`` (the element type's name, e.g. ``f32``) is added to a dtype error;
    ``index_bound`` ``(n, node)``: its values index a table of ``n`` rows (node ``node``),
    so each must lie in ``[-n, n)`` (a token id past the vocabulary); ``aliases``: the other
    tensor names of the input's port, by which it may be fed instead (OpenVINO's
    ``get_names()``)."""

    name: str
    dtype: np.dtype | None
    shape: PartialShape
    type_name: str | None = None
    index_bound: tuple[int, str] | None = None
    aliases: tuple[str, ...] = ()


def is_device_array(value: Any) -> bool:
    """Whether ``value`` is an array held in a device's memory (the runtime's
    ``DeviceTensor``): it has ``shape`` and ``dtype`` and says so with ``on_device``; it is
    checked like an array and passed on as it is, without a copy to the host."""
    return getattr(value, "on_device", False) is True


def check_feeds(inputs: Mapping[str, Any], specs: Sequence[FeedSpec],
                contiguous: bool = False) -> dict[str, Any]:
    """``inputs`` as arrays by input name, after checking that every input is fed, no unknown
    name is, and each array has the input's dtype, rank and a size within each dim's bounds;
    ``contiguous`` makes C-contiguous arrays (a copy only where one is not). A device array
    (``is_device_array``) is checked the same way and kept as it is. (Run on every
    inference, twice for a compiled model's: the names are compared in full only when their
    counts differ or one is missing.)"""
    if not isinstance(inputs, Mapping):
        raise InputError(", ".join(s.name for s in specs),
                         f"the inputs must be a mapping of input name -> array, got a "
                         f"{type(inputs).__name__}")
    if len(inputs) != len(specs):
        _refuse_unknown(inputs, specs)
    out: dict[str, np.ndarray] = {}
    for name, dtype, ps, type_name, bound, aliases in specs:
        if name in inputs:
            value = inputs[name]
        else:
            value = _fed_by_alias(inputs, specs, name, aliases)
        arr = value if is_device_array(value) else _as_array(name, value, contiguous)
        if dtype is not None and arr.dtype != dtype:
            label = f" ({type_name})" if type_name else ""
            raise InputError(name, f"dtype {arr.dtype}, expected {dtype}{label}")
        if ps.rank_is_static:
            dims = ps.dims
            if len(arr.shape) != len(dims):
                raise InputError(name, f"rank {len(arr.shape)} (shape {list(arr.shape)}), "
                                       f"expected {ps}")
            for axis, n in enumerate(arr.shape):
                d = dims[axis]
                if not (d.min <= n <= d.max):
                    raise InputError(name, f"dim {axis} is {n}, expected {d} (shape {ps})")
        if bound is not None and not is_device_array(arr) and arr.size:
            _check_bound(name, arr, bound)
        out[name] = arr
    return out


def _fed_by_alias(inputs: Mapping[str, Any], specs: Sequence[FeedSpec], name: str,
                  aliases: tuple[str, ...]) -> Any:
    """The value of input ``name`` fed under one of its other tensor names; an unknown name
    fed, the input fed twice, or not at all is an InputError."""
    fed = [a for a in aliases if a in inputs]
    if len(fed) > 1:
        raise InputError(name, f"fed twice, as {fed[0]!r} and {fed[1]!r} (names of one input)")
    if not fed:
        _refuse_unknown(inputs, specs)  # (as many names: one of them is unknown)
        raise InputError(name, "missing")
    return inputs[fed[0]]


def _as_array(name: str, value: Any, contiguous: bool) -> np.ndarray:
    """``value`` as an array (C-contiguous with ``contiguous``); what numpy cannot make one of
    (a ragged list) or has no memory for (a broadcast view too large to copy) is an error
    naming the input."""
    try:
        return np.asarray(value, order="C") if contiguous else np.asarray(value)
    except MemoryError as e:
        shape = list(getattr(value, "shape", ()))
        raise OutOfMemoryError(f"input '{name}': out of memory making an array of shape "
                               f"{shape} ({e})") from e
    except (ValueError, TypeError) as e:
        raise InputError(name, f"cannot be made an array from a {type(value).__name__}: "
                               f"{e}") from e


def _refuse_unknown(inputs: Mapping[str, Any], specs: Sequence[FeedSpec]) -> None:
    """Raise an InputError for the first (sorted) fed name that is not an input (by any of its
    names), or for an input fed under two of its names."""
    names = [s.name for s in specs]
    known = set(names).union(*(s.aliases for s in specs))
    unknown = sorted(set(inputs) - known, key=str)  # (keys need not all be strings)
    if unknown:
        raise InputError(str(unknown[0]), f"not an input of the model; inputs are {names}")
    for s in specs:
        fed = [n for n in (s.name, *s.aliases) if n in inputs]
        if len(fed) > 1:
            raise InputError(s.name, f"fed twice, as {fed[0]!r} and {fed[1]!r} (names of one "
                                     "input)")


def _check_bound(name: str, arr: np.ndarray, bound: tuple[int, str]) -> None:
    """Refuse ``arr`` when a value lies outside ``[-n, n)`` (``bound``: ``(n, node)``)."""
    n, node = bound
    low, high = int(arr.min()), int(arr.max())
    if low < -n or high >= n:
        bad = low if low < -n else high
        raise InputError(name, f"value {bad} (shape {list(arr.shape)}) is outside [{-n}, {n}): "
                               f"it indexes the {n} rows of Gather '{node}'")


def _buffer_key(arr: np.ndarray) -> int:
    """The id of the memory ``arr`` views: its first base that is not an array (a bytes
    object, a memory map) or the array at the end of its chain of bases."""
    while isinstance(arr.base, np.ndarray):
        arr = arr.base
    return id(arr.base) if arr.base is not None else id(arr)


class Outputs(dict[str, Any]):
    """An inference's outputs by output name (the model's ``output_names``, in order), also
    found by every other tensor name of an output's port (``aliases``: name -> output name),
    as OpenVINO's users address outputs: IR that OpenVINO writes names an output after its
    Result layer (``y/sink_port_0``) and its tensor ``y``. Iteration, ``keys()`` and ``len``
    see the output names only."""

    __slots__ = ("aliases",)

    def __init__(self, items: Any = (), aliases: Mapping[str, str] | None = None) -> None:
        super().__init__(items)
        self.aliases = dict(aliases or {})

    def _key(self, key: Any) -> Any:
        return key if dict.__contains__(self, key) else self.aliases.get(key, key)

    def __getitem__(self, key: Any) -> Any:
        return dict.__getitem__(self, self._key(key))

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key) or key in self.aliases

    def get(self, key: Any, default: Any = None) -> Any:
        return dict.get(self, self._key(key), default)


def tensor_aliases(named: Iterable[tuple[str, Iterable[str]]]) -> dict[str, str]:
    """``{other tensor name: primary name}`` for ports given as (primary name, tensor names);
    a name that is some port's primary name, or already taken by an earlier port, stays
    theirs."""
    named = [(name, list(names)) for name, names in named]
    primary = {name for name, _ in named}
    out: dict[str, str] = {}
    for name, names in named:
        for alias in sorted(names):
            if alias not in primary:
                out.setdefault(alias, name)
    return out


def owned_outputs(outputs: Mapping[str, Any], kept: Iterable[Any]) -> dict[str, Any]:
    """``outputs`` with a copy of each array that views the memory of one of ``kept`` (the
    feeds, the model's constants, the request's variables) or of an output before it, so that
    a caller writing into an output changes neither its inputs, the model, the request nor
    another output (an output that was a feed, a Constant's value or a view of either was
    handed out as it was: writing into it changed the caller's input, or the constant for
    every later inference)."""
    taken = {_buffer_key(a) for a in kept if isinstance(a, np.ndarray)}
    out: dict[str, Any] = {}
    for name, value in outputs.items():
        if isinstance(value, np.ndarray):
            key = _buffer_key(value)
            if key in taken:
                value = value.copy()
            else:
                taken.add(key)
        out[name] = value
    return out
