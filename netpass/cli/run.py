"""``netpass run``: infer a model once (or N times) and print its outputs and counters."""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

from .common import UsageError, compile_for_device, device_kind, device_label, parse_assignments
from .inputs import input_hint, make_inputs
from .output import Progress, format_host_fallbacks, format_stats, format_values
from .user_passes import apply_user_passes


def cmd_run(args: argparse.Namespace) -> int:
    from .. import read_model
    if args.iterations < 1:
        raise UsageError(f"--iterations must be >= 1, got {args.iterations}")
    model = read_model(args.model)
    apply_user_passes(model, args.user_passes)
    with input_hint(model, "--shape"):
        feeds = make_inputs(model, parse_assignments(args.shape, "shape"),
                            parse_assignments(args.input, "file name"))
        t0 = time.perf_counter()
        cm = compile_for_device(model, args)
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
    device = device_label(cm)
    print(f"model {Path(str(args.model)).name}: {args.transformations} pipeline, "
          f"device {device}, compiled in {compile_s * 1e3:.1f} ms")
    for name, arr in feeds.items():
        print(f"input  {name}: shape {list(arr.shape)} {arr.dtype}")
    for name, arr in outs.items():
        arr = np.asarray(arr)
        print(f"output {name}: shape {list(arr.shape)} {arr.dtype} {format_values(arr)}")
    median_ms = statistics.median(times) * 1e3
    print(f"latency: first run {first_s * 1e3:.3f} ms; median {median_ms:.3f} ms, "
          f"mean {statistics.fmean(times) * 1e3:.3f} ms, min {min(times) * 1e3:.3f} ms "
          f"over {args.iterations} iteration(s)")
    print(f"runtime stats ({args.iterations + 1} infers):")
    for line in format_stats(req.stats):
        print(line)
    print(f"host fallbacks: {format_host_fallbacks(req.stats)}")
    print(f"ran {Path(str(args.model)).name} on {device_kind(cm)}: {len(feeds)} input(s), "
          f"{len(outs)} output(s), {len(cm.executable.get_ordered_ops())} ops, "
          f"median {median_ms:.3f} ms")
    return 0
