"""The ``netpass`` command line (DESIGN.md section 10; docs/cli.md).

    netpass run MODEL [--input NAME=file.npy] [--shape NAME=1,3,224,224] [--device D] ...
    netpass convert MODEL -o out.xml|out.onnx [--dump-dir DIR] [--transformations T]
    netpass visualize MODEL -o graph.svg [--after-pipeline] [--transformations T]
    netpass passes
    netpass devices
    netpass benchmark MODEL --shapes x=1,8,64 [x=1,9,64 ...] [--sequence x:1:1:64] ...

Every subcommand prints plain text on stdout. A failure a user can cause (a ``NetpassError``,
a file that cannot be read or written, a bad option value) prints one line
``error: <message> (hint: <hint>)`` on stderr and exits with 1; ``NETPASS_DEBUG=1`` shows the
traceback instead.
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import os
import re
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from .core.dimension import Dimension
from .errors import InputError, NetpassError, UnsupportedOpError

SEED = 0
SHOWN_VALUES = 5
DEVICES = ("AUTO", "GPU", "CPU", "REFERENCE")
TRANSFORMATIONS = ("gna", "common", "none")
PASS_GROUPS = ("common", "transpose_sinking", "gna")
GRAPH_FORMATS = ("svg", "png", "pdf", "dot", "gv")
# Runs longer than this show progress on stderr even when it is not a terminal.
LONG_RUN_S = 5.0


class UsageError(NetpassError):
    """A command-line value that parses but cannot be used (a bad suffix, a bad range)."""

    hint = "run `netpass <command> --help` for the accepted values"


# -- inputs ------------------------------------------------------------------------------------

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


@contextmanager
def _input_hint(model, flag: str) -> Iterator[None]:
    """An ``InputError`` raised inside gets the model's input shapes as its hint."""
    try:
        yield
    except InputError as e:
        inputs = ", ".join(f"{n}{p.output(0).partial_shape}"
                           for n, p in zip(model.input_names, model.parameters))
        e.hint = f"the model's inputs are {inputs}; set shapes with {flag} NAME=d0,d1,..."
        raise


# -- shared helpers ----------------------------------------------------------------------------

def _device_name(args: argparse.Namespace) -> str:
    """``--device``, else ``NETPASS_DEVICE``, else AUTO."""
    name = (args.device or os.environ.get("NETPASS_DEVICE") or "AUTO").upper()
    if name not in DEVICES:
        raise UsageError(f"unknown device '{name}'; use one of {', '.join(DEVICES)}")
    return name


def _compile(model, args: argparse.Namespace):
    from . import compile_model
    return compile_model(model, device=_device_name(args),
                         config={"TRANSFORMATIONS": args.transformations.upper()})


def _device_label(cm) -> str:
    """The device a compiled model really runs on (AUTO resolved)."""
    return cm.runtime.device if cm.runtime is not None else "REFERENCE (numpy)"


def _device_kind(cm) -> str:
    """REFERENCE, GPU or CPU: what AUTO resolved to."""
    if cm.runtime is None or cm.runtime.engine is None:
        return "REFERENCE"
    return "GPU" if cm.runtime.engine.is_gpu else "CPU"


def _transformed(model, which: str):
    """A copy of ``model`` after the ngraph pipeline ``which`` (gna, common or none), before the
    pre/post-processing split: the whole model, equivalent to the input."""
    from .compiler import apply_transformations
    out = model.clone()
    apply_transformations(out, which)
    return out


def _format_values(arr: np.ndarray) -> str:
    flat = arr.reshape(-1)[:SHOWN_VALUES]
    if arr.dtype.kind == "f":
        vals = ", ".join(f"{v:.6g}" for v in flat)
    else:
        vals = ", ".join(str(v) for v in flat)
    more = ", ..." if arr.size > SHOWN_VALUES else ""
    return f"[{vals}{more}]"


def _format_stat(key: str, value: Any) -> str:
    if isinstance(value, dict):
        return ",".join(f"{k}:{v}" for k, v in value.items()) or "-"
    if isinstance(value, float):
        return f"{value * 1e3:.3f}ms" if key.endswith("_s") else f"{value:.4g}"
    return str(value)


def format_stats(stats: dict[str, Any], columns: int = 3) -> list[str]:
    """``req.stats`` as aligned ``key value`` cells, ``columns`` to a line (times in ms)."""
    cells = [(k, _format_stat(k, v)) for k, v in stats.items()]
    if not cells:
        return ["  (none)"]
    kw = max(len(k) for k, _ in cells)
    vw = max(len(v) for _, v in cells)
    lines = []
    for i in range(0, len(cells), columns):
        row = cells[i:i + columns]
        lines.append("  " + "   ".join(f"{k:<{kw}} {v:>{vw}}" for k, v in row).rstrip())
    return lines


def _percentiles(times_s: Sequence[float]) -> str:
    p50, p90, p99 = np.percentile(np.asarray(times_s) * 1e3, [50, 90, 99])
    return f"p50 {p50:.3f} ms, p90 {p90:.3f} ms, p99 {p99:.3f} ms"


class Progress:
    """A one-line progress bar on stderr: redrawn in place on a terminal; elsewhere a line
    every 10% once the run has lasted ``LONG_RUN_S``. Prints nothing for short piped runs."""

    def __init__(self, total: int, label: str, stream: Any = None) -> None:
        self.total, self.label = max(total, 1), label
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.start = self.last = time.perf_counter()
        self.done = 0
        self.next_decile = 1
        self.drawn = False

    def update(self, n: int = 1) -> None:
        self.done += n
        now = time.perf_counter()
        if self.tty:
            if now - self.last >= 0.1 or self.done == self.total:
                self.last = now
                filled = 30 * self.done // self.total
                bar = "#" * filled + "." * (30 - filled)
                self.stream.write(f"\r{self.label} [{bar}] {self.done}/{self.total}")
                self.stream.flush()
                self.drawn = True
        elif now - self.start >= LONG_RUN_S and 10 * self.done >= self.next_decile * self.total:
            self.next_decile = 10 * self.done // self.total + 1
            self.stream.write(f"{self.label}: {100 * self.done // self.total}% "
                              f"({self.done}/{self.total}, {now - self.start:.0f} s)\n")
            self.stream.flush()

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()


# -- run ---------------------------------------------------------------------------------------

def cmd_run(args: argparse.Namespace) -> int:
    from . import read_model
    if args.iterations < 1:
        raise UsageError(f"--iterations must be >= 1, got {args.iterations}")
    model = read_model(args.model)
    with _input_hint(model, "--shape"):
        feeds = make_inputs(model, _parse_assignments(args.shape, "shape"),
                            _parse_assignments(args.input, "file name"))
        t0 = time.perf_counter()
        cm = _compile(model, args)
        compile_s = time.perf_counter() - t0
        req = cm.create_infer_request()
        # The first run builds kernels and allocates memory: it is reported on its own.
        t0 = time.perf_counter()
        outs = req.infer(feeds)
        first_s = time.perf_counter() - t0
    times = []
    progress = Progress(args.iterations, "run")
    try:
        for _ in range(args.iterations):
            t0 = time.perf_counter()
            outs = req.infer(feeds)
            times.append(time.perf_counter() - t0)
            progress.update()
    finally:
        progress.close()
    device = _device_label(cm)
    print(f"model {Path(str(args.model)).name}: {args.transformations} pipeline, "
          f"device {device}, compiled in {compile_s * 1e3:.1f} ms")
    for name, arr in feeds.items():
        print(f"input  {name}: shape {list(arr.shape)} {arr.dtype}")
    for name, arr in outs.items():
        arr = np.asarray(arr)
        print(f"output {name}: shape {list(arr.shape)} {arr.dtype} {_format_values(arr)}")
    median_ms = statistics.median(times) * 1e3
    print(f"latency: first run {first_s * 1e3:.3f} ms; median {median_ms:.3f} ms, "
          f"mean {statistics.fmean(times) * 1e3:.3f} ms, min {min(times) * 1e3:.3f} ms "
          f"over {args.iterations} iteration(s)")
    print(f"runtime stats ({args.iterations + 1} infers):")
    for line in format_stats(req.stats):
        print(line)
    print(f"ran {Path(str(args.model)).name} on {_device_kind(cm)}: {len(feeds)} input(s), "
          f"{len(outs)} output(s), {len(cm.executable.get_ordered_ops())} ops, "
          f"median {median_ms:.3f} ms")
    return 0


# -- convert -----------------------------------------------------------------------------------

@contextmanager
def _tracing(directory: Path) -> Iterator[None]:
    """Every pass manager dumps svg and IR xml after each pass into ``directory``."""
    keys = ("NETPASS_VISUALIZE_TRACING", "NETPASS_SERIALIZE_TRACING")
    saved = {k: os.environ.get(k) for k in keys}
    for k in keys:
        os.environ[k] = str(directory)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def cmd_convert(args: argparse.Namespace) -> int:
    from . import compile_model, read_model, save_model
    out = Path(args.output)
    if out.suffix.lower() not in (".xml", ".onnx"):
        raise UsageError(f"-o {out}: the output must end in .xml (IR v11) or .onnx")
    model = read_model(args.model)
    t0 = time.perf_counter()
    transformed = _transformed(model, args.transformations)
    elapsed = time.perf_counter() - t0
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        save_model(transformed, out)
    except UnsupportedOpError as e:
        if out.suffix.lower() == ".onnx":
            e.hint = ("ONNX holds standard ops only: write IR v11 (-o OUT.xml), or keep the "
                      "ops standard with --transformations common")
        raise
    before, after = len(model.get_ordered_ops()), len(transformed.get_ordered_ops())
    print(f"converted {Path(str(args.model)).name} with the {args.transformations} pipeline "
          f"in {elapsed * 1e3:.1f} ms: {before} -> {after} ops")
    print(f"wrote {out}" + (f" and {out.with_suffix('.bin')}" if out.suffix == ".xml" else ""))
    if args.dump_dir:
        d = Path(args.dump_dir)
        trace = d / "tracing"
        # The pipeline runs again inside compile_model, traced; the user's model is unchanged.
        with _tracing(trace):
            cm = compile_model(model, device="REFERENCE",
                               config={"TRANSFORMATIONS": args.transformations.upper()})
        stages = cm.dump(d)
        traced = len(list(trace.glob("*.svg"))) if trace.is_dir() else 0
        print(f"dumped {len(stages)} stage files into {d} "
              f"({', '.join(p.name for p in stages)})")
        print(f"dumped the model after each of {traced} passes (svg, IR xml) into {trace}")
    return 0


# -- visualize ---------------------------------------------------------------------------------

def cmd_visualize(args: argparse.Namespace) -> int:
    from . import read_model
    from .passes import VisualizeTree
    out = Path(args.output)
    fmt = out.suffix.lstrip(".").lower()
    if fmt not in GRAPH_FORMATS:
        raise UsageError(f"-o {out}: unknown graph format '{fmt}'; use a file name ending in "
                         + ", ".join(f".{f}" for f in GRAPH_FORMATS))
    model = read_model(args.model)
    stage = "as read"
    if args.after_pipeline:
        model = _transformed(model, args.transformations)
        stage = f"after the {args.transformations} pipeline"
    VisualizeTree(str(out)).run_on_model(model)
    print(f"wrote {out}: {Path(str(args.model)).name} {stage}, "
          f"{len(model.get_ordered_ops())} ops")
    return 0


# -- passes ------------------------------------------------------------------------------------

def _first_sentence(text: str, limit: int = 90) -> str:
    """The first sentence of a docstring's first paragraph, without rst quotes, shortened."""
    paragraph = " ".join(text.strip().split("\n\n")[0].split()).replace("``", "")
    end = re.search(r"(?<![.\w]\.\w)(?<!\.)\.(\s|$)", paragraph)
    sentence = paragraph[:end.start() + 1] if end else paragraph
    return sentence if len(sentence) <= limit else sentence[:limit - 3].rstrip() + "..."


def _describe(cls: type) -> str:
    """What a pass does: the first sentence of its own docstring, else of its module's (where
    the summary of a family of passes lives). A docstring that only speaks of the return value
    says nothing about the pass, so the module's is used then too."""
    own = cls.__dict__.get("__doc__") or ""
    doc = own if own.strip() and not own.lstrip().startswith("Returns ") \
        else sys.modules[cls.__module__].__doc__ or ""
    # Many docstrings open with "ClassName: ..."; the name is already in the first column.
    doc = doc.strip().removeprefix(f"{cls.__name__}: ")
    text = _first_sentence(doc) if doc else "-"
    return text[:1].upper() + text[1:]


def transformation_groups() -> dict[str, list[tuple[str, str]]]:
    """Module -> [(pass class name, one-line description)] for the exported pass classes of
    netpass.ngraph_passes.{common, transpose_sinking, gna} and the default legacy passes."""
    from .legacy_passes import DEFAULT_PASSES
    from .passes import MatcherPass, ModelPass
    groups: dict[str, list[tuple[str, str]]] = {}
    for group in PASS_GROUPS:
        package = importlib.import_module(f"netpass.ngraph_passes.{group}")
        rows = []
        for name in getattr(package, "__all__", dir(package)):
            cls = getattr(package, name)
            # Re-exports are listed under the package that defines them; bases are not passes.
            if not (inspect.isclass(cls) and issubclass(cls, (ModelPass, MatcherPass))) \
                    or not cls.__module__.startswith(package.__name__) or name.endswith("Base"):
                continue
            rows.append((name, _describe(cls)))
        groups[package.__name__] = sorted(rows)
    groups["netpass.legacy_passes (DEFAULT_PASSES, in order)"] = \
        [(p.__name__, _describe(p)) for p in DEFAULT_PASSES]
    return groups


def cmd_passes(args: argparse.Namespace) -> int:
    groups = transformation_groups()
    width = max(len(n) for rows in groups.values() for n, _ in rows)
    for title, rows in groups.items():
        print(f"{title}:")
        for name, text in rows:
            print(f"  {name:<{width}}  {text}")
        print()
    print(f"{sum(len(r) for r in groups.values())} passes. The default pipeline is "
          "GnaTransformationsPipeline (--transformations gna); CommonOptimizations is "
          "--transformations common.")
    return 0


# -- devices -----------------------------------------------------------------------------------

def cmd_devices(args: argparse.Namespace) -> int:
    from .runtime import devices, select_device
    rows = devices()
    if not rows:
        print("no OpenCL devices found")
    for i, d in enumerate(rows):
        print(f"[{i}] {d['name']}  (platform {d['platform']})")
        print(f"    type {d['type']}, {d['compute_units']} compute units, "
              f"{d['global_mem_size'] / 2**30:.1f} GiB global memory, "
              f"{d['max_mem_alloc_size'] / 2**30:.1f} GiB max allocation, "
              f"fp16 {'yes' if d['fp16'] else 'no'}")
    print("REFERENCE: numpy on the host (always available)")
    env = os.environ.get("NETPASS_DEVICE")
    try:
        picked = select_device("AUTO")
        print(f"AUTO picks: {picked.name.strip()} (platform {picked.platform.name.strip()})")
    except NetpassError as e:
        print(f"AUTO picks: nothing ({e})")
    if env:
        print(f"NETPASS_DEVICE={env} overrides the default device")
    return 0


# -- benchmark ---------------------------------------------------------------------------------

def _shape_sets(items: Sequence[str], names: list[str]) -> list[dict[str, str]]:
    """``--shapes`` items grouped into sets: a name seen again starts the next set."""
    sets: list[dict[str, str]] = []
    for item in items:
        (key, text), = _parse_assignments([item], "shape").items()
        name = _resolve_name(key, names, "--shapes")
        if not sets or name in sets[-1]:
            sets.append({})
        sets[-1][name] = text
    return sets


def _parse_sequence(text: str, names: list[str]) -> tuple[str, int, int, int]:
    parts = text.rsplit(":", 3)
    try:
        if len(parts) != 4:
            raise ValueError
        name, axis, start, stop = parts[0], int(parts[1]), int(parts[2]), int(parts[3])
    except ValueError:
        raise UsageError(f"--sequence '{text}': expected NAME:AXIS:START:STOP with integer "
                         "AXIS, START and STOP (e.g. x:1:1:64)") from None
    name = _resolve_name(name, names, "--sequence")
    if start < 1 or stop < start:
        raise UsageError(f"--sequence '{text}': needs 1 <= START <= STOP")
    return name, axis, start, stop


def _benchmark_feeds(model, args: argparse.Namespace) -> tuple[list[dict[str, np.ndarray]], str]:
    """The inputs of one pass (one per shape set, or one per sequence step) and a label."""
    names = model.input_names
    sets = _shape_sets(args.shapes, names) or [{}]
    if args.sequence is None:
        feeds = [make_inputs(model, s, {}) for s in sets]
        label = "; ".join(" ".join(f"{n}={','.join(map(str, a.shape))}" for n, a in f.items())
                          for f in feeds)
        return feeds, f"{len(feeds)} shape set(s): {label}"
    name, axis, start, stop = _parse_sequence(args.sequence, names)
    if len(sets) > 1:
        raise UsageError("--sequence takes at most one shape per input from --shapes")
    base = [int(s) for s in make_inputs(model, sets[0], {})[name].shape]
    if not -len(base) <= axis < len(base):
        raise InputError(name, f"--sequence axis {axis} is out of range for shape {base}")
    feeds = []
    for size in range(start, stop + 1):
        shape = list(base)
        shape[axis] = size
        given = dict(sets[0], **{name: ",".join(map(str, shape))})
        feeds.append(make_inputs(model, given, {}))
    return feeds, (f"sequence: {name} axis {axis} grows {start}..{stop} "
                   f"({len(feeds)} steps in one infer request)")


def cmd_benchmark(args: argparse.Namespace) -> int:
    from . import read_model
    if args.iterations < 1 or args.warmup < 0:
        raise UsageError(f"needs --iterations >= 1 and --warmup >= 0, got {args.iterations} "
                         f"and {args.warmup}")
    model = read_model(args.model)
    with _input_hint(model, "--shapes"):
        steps, label = _benchmark_feeds(model, args)
        t0 = time.perf_counter()
        cm = _compile(model, args)
        compile_s = time.perf_counter() - t0
        # Warm-up runs on its own request: kernels get built, while the measured request's
        # allocations stay its own (what a fresh request of a long-running service sees).
        t0 = time.perf_counter()
        warm = cm.create_infer_request()
        for _ in range(args.warmup):
            for feeds in steps:
                warm.infer(feeds)
        warmup_s = time.perf_counter() - t0
        req = cm.create_infer_request()
        times: list[list[float]] = [[] for _ in steps]
        progress = Progress(args.iterations * len(steps), "benchmark")
        start = time.perf_counter()
        first_pass_allocations = 0
        try:
            for it in range(args.iterations):
                for i, feeds in enumerate(steps):
                    t0 = time.perf_counter()
                    req.infer(feeds)
                    times[i].append(time.perf_counter() - t0)
                    progress.update()
                if it == 0:
                    first_pass_allocations = req.stats.get("allocations", 0)
        finally:
            progress.close()
        wall_s = time.perf_counter() - start
    flat = [t for per_step in times for t in per_step]
    stats = req.stats
    print(f"benchmark {Path(str(args.model)).name}: {args.transformations} pipeline, "
          f"device {_device_label(cm)}")
    print(f"  {label}")
    print(f"  compile {compile_s * 1e3:.1f} ms, warm-up {args.warmup} pass(es) "
          f"{warmup_s * 1e3:.1f} ms, measured {len(flat)} infers "
          f"({args.iterations} pass(es) x {len(steps)})")
    if args.sequence is None and 1 < len(steps) <= 8:
        for feeds, per_step in zip(steps, times):
            shape = " ".join(f"{n}={','.join(map(str, a.shape))}" for n, a in feeds.items())
            print(f"  {shape}: {_percentiles(per_step)}")
    elif args.sequence is not None:
        print(f"  first step: {_percentiles(times[0])}; last step: {_percentiles(times[-1])}")
    print(f"latency: {_percentiles(flat)}, mean {statistics.fmean(flat) * 1e3:.3f} ms")
    print(f"throughput: {len(flat) / wall_s:.1f} infers/s")
    allocations = stats.get("allocations", 0)
    # Allocations after the first pass show whether memory settles (the pool is reused).
    print(f"allocations: {allocations} ({stats.get('allocated_bytes', 0)} bytes, "
          f"{allocations / len(flat):.2f} per infer, {first_pass_allocations} in the first "
          f"pass), reuses {stats.get('reuses', 0)}")
    print(f"runtime stats ({len(flat)} infers):")
    for line in format_stats(stats):
        print(line)
    return 0


# -- parser and entry point --------------------------------------------------------------------

def _add_transformations(p: argparse.ArgumentParser) -> None:
    p.add_argument("--transformations", type=str.lower, choices=TRANSFORMATIONS, default="gna",
                   help="ngraph pipeline: gna (GnaTransformationsPipeline, default), common "
                        "(CommonOptimizations only) or none")


def _add_device(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", type=str.upper, choices=DEVICES, default=None,
                   help="AUTO (best OpenCL GPU, else PoCL), GPU, CPU (PoCL) or REFERENCE (numpy);"
                        " default: $NETPASS_DEVICE or AUTO")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="netpass", description="netpass command line: run, "
                                     "convert, visualize and benchmark models (docs/cli.md)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="compile a model and run it on random or given inputs")
    run.add_argument("model", help="ONNX model (.onnx) or IR (.xml)")
    run.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                     help="take an input from a .npy file; repeatable")
    run.add_argument("--shape", action="append", default=[], metavar="NAME=D0,D1,...",
                     help="shape of a random input (dynamic dims default to 1); repeatable")
    _add_device(run)
    run.add_argument("--iterations", type=int, default=1, metavar="N",
                     help="timed runs after the first one (default 1)")
    _add_transformations(run)
    run.set_defaults(func=cmd_run)

    conv = sub.add_parser("convert", help="run the pipeline and write IR v11 xml or ONNX")
    conv.add_argument("model", help="ONNX model (.onnx) or IR (.xml)")
    conv.add_argument("-o", "--output", required=True, metavar="OUT.xml|OUT.onnx",
                      help="the transformed model: IR v11 (.xml + .bin) or ONNX (.onnx)")
    conv.add_argument("--dump-dir", metavar="DIR",
                      help="also write every stage (svg and IR xml) and every pass's tracing")
    _add_transformations(conv)
    conv.set_defaults(func=cmd_convert)

    vis = sub.add_parser("visualize", help="draw a model's graph (svg, png, pdf or dot)")
    vis.add_argument("model", help="ONNX model (.onnx) or IR (.xml)")
    vis.add_argument("-o", "--output", required=True, metavar="GRAPH.svg",
                     help="output file; its suffix picks the format (svg, png, pdf, dot)")
    vis.add_argument("--after-pipeline", action="store_true",
                     help="draw the model after the transformations, not as read")
    _add_transformations(vis)
    vis.set_defaults(func=cmd_visualize)

    passes = sub.add_parser("passes", help="list the transformations with a description each")
    passes.set_defaults(func=cmd_passes)

    devs = sub.add_parser("devices", help="list the OpenCL devices and the one AUTO picks")
    devs.set_defaults(func=cmd_devices)

    bench = sub.add_parser("benchmark", help="latency percentiles, throughput and allocations")
    bench.add_argument("model", help="ONNX model (.onnx) or IR (.xml)")
    bench.add_argument("--shapes", nargs="+", default=[], metavar="NAME=D0,D1,...",
                       help="input shapes; a name given again starts the next shape set")
    bench.add_argument("--sequence", metavar="NAME:AXIS:START:STOP",
                       help="grow AXIS of input NAME from START to STOP, one infer per size, "
                            "in one infer request (e.g. x:1:1:64)")
    _add_device(bench)
    bench.add_argument("--iterations", type=int, default=10, metavar="N",
                       help="measured passes over the shapes or the sequence (default 10)")
    bench.add_argument("--warmup", type=int, default=1, metavar="N",
                       help="unmeasured passes first, on a separate request (default 1)")
    _add_transformations(bench)
    bench.set_defaults(func=cmd_benchmark)
    return parser


def _one_line(text: str) -> str:
    return " ".join(text.split())


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if os.environ.get("NETPASS_DEBUG", "").strip() not in ("", "0"):
        return args.func(args)
    try:
        return args.func(args)
    except NetpassError as e:
        message = str(e).splitlines()[0] if str(e) else type(e).__name__
        hint = f" (hint: {_one_line(e.hint)})" if e.hint else ""
    except BrokenPipeError:
        # The reader (``| head``) has gone: stop quietly, and keep Python's exit-time flush of
        # stdout from failing again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as e:
        message = f"{e.strerror or e}: {e.filename}" if e.filename else str(e)
        hint = ""
    except Exception as e:  # a bug in netpass: still one line, the traceback on request
        message = f"internal error: {type(e).__name__}: {_one_line(str(e))}"
        hint = " (hint: set NETPASS_DEBUG=1 for the traceback and report it)"
    print(f"error: {_one_line(message)}{hint}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
