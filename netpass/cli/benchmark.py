"""``netpass benchmark``: time inference over a set or a sequence of input shapes."""
from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import InputError
from .common import (
    UsageError,
    compile_for_device,
    device_label,
    parse_assignments,
    resolve_input_name,
)
from .decode import cmd_decode
from .inputs import input_hint, make_inputs
from .output import Progress, format_stats, percentiles


def _shape_sets(items: Sequence[str], names: list[str]) -> list[dict[str, str]]:
    """``--shapes`` items grouped into sets: a name seen again starts the next set."""
    sets: list[dict[str, str]] = []
    for item in items:
        (key, text), = parse_assignments([item], "shape").items()
        name = resolve_input_name(key, names, "--shapes")
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
    name = resolve_input_name(name, names, "--sequence")
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
    from .. import read_model
    if args.decode is not None:
        if args.shapes or args.sequence:
            raise UsageError("--decode takes no --shapes or --sequence: it feeds the decoder")
        return cmd_decode(args)
    if args.iterations < 1 or args.warmup < 0:
        raise UsageError(f"needs --iterations >= 1 and --warmup >= 0, got {args.iterations} "
                         f"and {args.warmup}")
    model = read_model(args.model)
    with input_hint(model, "--shapes"):
        steps, label = _benchmark_feeds(model, args)
        t0 = time.perf_counter()
        cm = compile_for_device(model, args)
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
          f"device {device_label(cm)}")
    print(f"  {label}")
    print(f"  compile {compile_s * 1e3:.1f} ms, warm-up {args.warmup} pass(es) "
          f"{warmup_s * 1e3:.1f} ms, measured {len(flat)} infers "
          f"({args.iterations} pass(es) x {len(steps)})")
    if args.sequence is None and 1 < len(steps) <= 8:
        for feeds, per_step in zip(steps, times):
            shape = " ".join(f"{n}={','.join(map(str, a.shape))}" for n, a in feeds.items())
            print(f"  {shape}: {percentiles(per_step)}")
    elif args.sequence is not None:
        print(f"  first step: {percentiles(times[0])}; last step: {percentiles(times[-1])}")
    print(f"latency: {percentiles(flat)}, mean {statistics.fmean(flat) * 1e3:.3f} ms")
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
