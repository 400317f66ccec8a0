"""Model inputs from the command line: ``.npy`` files or random data of a given or guessed
shape."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ..core.dimension import Dimension
from ..errors import InputError
from ..frontend.files import physical_memory
from .common import SEED, resolve_input_name

# Generating random data holds about three float64 temporaries per element besides the result.
RANDOM_BYTES_PER_ELEMENT = 24


def _parse_shape(name: str, text: str) -> list[int]:
    try:
        dims = [int(t) for t in text.replace("x", ",").split(",") if t.strip()]
    except ValueError:
        raise InputError(name, f"shape '{text}' is not a comma-separated list of integers") \
            from None
    if any(d < 0 for d in dims):
        raise InputError(name, f"shape '{text}' has a negative dimension")
    return dims


def _random_input(shape: list[int], dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    """Seeded random data without zeros (so that a dropped multiplication shows)."""
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        return rng.integers(1, 10, size=shape).astype(dtype)
    mag = rng.uniform(0.1, 1.0, size=shape)
    sign = np.where(rng.random(shape) < 0.5, -1.0, 1.0)
    return (mag * sign).astype(dtype)


def _size(nbytes: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if nbytes < 1024 or unit == "TiB":
            return f"{nbytes:.0f} {unit}" if unit == "bytes" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    raise AssertionError("unreachable")


def check_random_input_fits(name: str, shape: list[int], dtype: np.dtype) -> None:
    """Refuse, before allocating, a random input that this machine's memory cannot hold (a
    static input of 10^12 elements, or a --shape that asks for it), naming its size."""
    elements = 1
    for d in shape:
        elements *= d
    need = elements * (dtype.itemsize + RANDOM_BYTES_PER_ELEMENT)
    memory = physical_memory()
    if memory is not None and need > memory:
        raise InputError(name, f"shape {shape} of {dtype} is {elements} elements "
                               f"({_size(elements * dtype.itemsize)}); making it random needs "
                               f"about {_size(need)}, more than this machine's "
                               f"{_size(memory)} of memory; give a smaller --shape or the "
                               "data with --input")


def _default_size(dim: Dimension, sizes: dict[int, int]) -> int:
    """A dynamic dim's size: the one given for its symbol, else 1 (or its lower bound)."""
    if dim.is_static:
        return dim.min
    if dim.symbol is not None and id(dim.symbol) in sizes:
        return sizes[id(dim.symbol)]
    return max(dim.min, 1)


def make_inputs(model, shapes: dict[str, str], files: dict[str, str]) -> dict[str, np.ndarray]:
    """Inputs for every model parameter: a ``.npy`` file, or random data of the parameter's
    shape with dynamic dims set to 1 (or to their lower bound) unless ``--shape`` gives them,
    directly or through a dim symbol shared with another input."""
    names = model.input_names
    shape_of = {resolve_input_name(k, names, "--shape"): v for k, v in shapes.items()}
    file_of = {resolve_input_name(k, names, "--input"): v for k, v in files.items()}
    rng = np.random.default_rng(SEED)
    feeds: dict[str, np.ndarray] = {}
    for name in names:
        if name in file_of:
            path = Path(file_of[name])
            try:
                loaded = np.load(path, allow_pickle=False)
            except (OSError, ValueError, MemoryError) as e:
                raise InputError(name, f"cannot load {path}: {type(e).__name__}: {e}") from None
            if not isinstance(loaded, np.ndarray):  # (an .npz archive: an internal error)
                loaded.close()
                raise InputError(name, f"{path} is an .npz archive, not one array: give a .npy "
                                       f"file (np.save)")
            feeds[name] = loaded
    given = {n: list(a.shape) for n, a in feeds.items()}
    given.update({n: _parse_shape(n, text) for n, text in shape_of.items() if n not in feeds})
    # A dynamic dim shared by several inputs (one symbol, e.g. "batch") takes the size given
    # for any of them, so that setting one input's shape keeps the others consistent.
    sizes: dict[int, int] = {}
    for name, param in zip(names, model.parameters):
        ps = param.output(0).partial_shape
        if name in given and ps.rank_is_static and len(ps) == len(given[name]):
            for d, n in zip(ps, given[name]):
                if d.symbol is not None:
                    sizes.setdefault(id(d.symbol), n)
    for name, param in zip(names, model.parameters):
        if name in feeds:
            continue
        out = param.output(0)
        if name in given:
            shape = given[name]
        else:
            ps = out.partial_shape
            if not ps.rank_is_static:
                raise InputError(name, "has a dynamic rank; give its shape with "
                                       f"--shape {name}=d0,d1,...")
            shape = [_default_size(d, sizes) for d in ps]
        dtype = np.dtype(out.element_type.dtype or np.float32)
        check_random_input_fits(name, shape, dtype)
        feeds[name] = _random_input(shape, dtype, rng)
    return {name: feeds[name] for name in names}


@contextmanager
def input_hint(model, flag: str) -> Iterator[None]:
    """An ``InputError`` raised inside gets the model's input shapes as its hint."""
    try:
        yield
    except InputError as e:
        inputs = ", ".join(f"{n}{p.output(0).partial_shape}"
                           for n, p in zip(model.input_names, model.parameters))
        e.hint = f"the model's inputs are {inputs}; set shapes with {flag} NAME=d0,d1,..."
        raise
