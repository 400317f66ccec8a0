"""The ``netpass`` command line.

    netpass run MODEL [--shape NAME=1,3,224,224] [--input NAME=file.npy] [--iterations N]

``run`` reads a model, feeds it seeded random non-zero inputs (or ``.npy`` files), runs it on
the reference device (numpy) and prints every output's name, shape, dtype and first values,
the latency and a one-line summary. Errors print one ``error: ...`` line and exit with 1.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from .core.dimension import Dimension
from .errors import InputError, NetpassError

SEED = 0
SHOWN_VALUES = 5


def _parse_assignments(items: Sequence[str], what: str) -> dict[str, str]:
    """``NAME=VALUE`` pairs; a bare VALUE is keyed by "" (meaning: the only input)."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.rpartition("=")
        if not sep:
            name, value = "", item
        if not value:
            raise InputError(name or "?", f"empty {what} in '{item}'")
        out[name] = value
    return out


def _resolve_name(key: str, names: list[str], flag: str) -> str:
    if key == "":
        if len(names) != 1:
            raise InputError("?", f"{flag} without NAME= needs a model with exactly one input; "
                                  f"inputs are {names}")
        return names[0]
    if key not in names:
        raise InputError(key, f"{flag}: not an input of the model; inputs are {names}")
    return key


def _parse_shape(name: str, text: str) -> list[int]:
    try:
        dims = [int(t) for t in text.replace("x", ",").split(",") if t.strip()]
    except ValueError:
        raise InputError(name, f"--shape '{text}' is not a comma-separated list of integers") \
            from None
    if any(d < 0 for d in dims):
        raise InputError(name, f"--shape '{text}' has a negative dimension")
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
    shape_of = {_resolve_name(k, names, "--shape"): v for k, v in shapes.items()}
    file_of = {_resolve_name(k, names, "--input"): v for k, v in files.items()}
    rng = np.random.default_rng(SEED)
    feeds: dict[str, np.ndarray] = {}
    for name in names:
        if name in file_of:
            path = Path(file_of[name])
            try:
                feeds[name] = np.load(path, allow_pickle=False)
            except (OSError, ValueError) as e:
                raise InputError(name, f"cannot load {path}: {e}") from None
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
        feeds[name] = _random_input(shape, out.element_type.dtype or np.dtype(np.float32), rng)
    return {name: feeds[name] for name in names}


def _format_values(arr: np.ndarray) -> str:
    flat = arr.reshape(-1)[:SHOWN_VALUES]
    if arr.dtype.kind == "f":
        vals = ", ".join(f"{v:.6g}" for v in flat)
    else:
        vals = ", ".join(str(v) for v in flat)
    more = ", ..." if arr.size > SHOWN_VALUES else ""
    return f"[{vals}{more}]"


def cmd_run(args: argparse.Namespace) -> int:
    from . import read_model, reference
    if args.iterations < 1:
        raise InputError("--iterations", f"must be >= 1, got {args.iterations}")
    model = read_model(args.model)
    try:
        feeds = make_inputs(model, _parse_assignments(args.shape, "shape"),
                            _parse_assignments(args.input, "file name"))
        # One untimed run fills the caches (op order, folded values) and checks the inputs.
        outs = reference.infer(model, feeds)
    except InputError as e:
        inputs = ", ".join(f"{n}{p.output(0).partial_shape}"
                           for n, p in zip(model.input_names, model.parameters))
        e.hint = f"the model's inputs are {inputs}; set shapes with --shape NAME=d0,d1,..."
        raise
    times = []
    for _ in range(args.iterations):
        start = time.perf_counter()
        outs = reference.infer(model, feeds)
        times.append(time.perf_counter() - start)
    for name, arr in feeds.items():
        print(f"input  {name}: shape {list(arr.shape)} {arr.dtype}")
    for name, arr in outs.items():
        arr = np.asarray(arr)
        print(f"output {name}: shape {list(arr.shape)} {arr.dtype} {_format_values(arr)}")
    median_ms = statistics.median(times) * 1e3
    print(f"latency: median {median_ms:.3f} ms, min {min(times) * 1e3:.3f} ms "
          f"over {args.iterations} iteration(s)")
    print(f"ran {Path(str(args.model)).name} on REFERENCE: {len(feeds)} input(s), "
          f"{len(outs)} output(s), {len(model.get_ordered_ops())} ops, "
          f"median {median_ms:.3f} ms")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="netpass", description="netpass command line")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a model on random or given inputs")
    run.add_argument("model", help="ONNX model (.onnx) or IR (.xml)")
    run.add_argument("--shape", action="append", default=[], metavar="NAME=D0,D1,...",
                     help="shape of an input (dynamic dims default to 1); repeatable")
    run.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                     help="take an input from a .npy file; repeatable")
    run.add_argument("--iterations", type=int, default=1, metavar="N",
                     help="run N times and report the latency (default 1)")
    run.set_defaults(func=cmd_run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except NetpassError as e:
        hint = f" (hint: {e.hint})" if e.hint else ""
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"error: {first}{hint}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
