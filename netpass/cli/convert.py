"""``netpass convert`` (IR or ONNX out, optional per-pass dumps) and ``netpass visualize``."""
from __future__ import annotations

import argparse
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import UnsupportedOpError
from .common import GRAPH_FORMATS, UsageError, transformed_model
from .user_passes import apply_user_passes


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
    from .. import compile_model, read_model, save_model
    out = Path(args.output)
    if out.suffix.lower() not in (".xml", ".onnx"):
        raise UsageError(f"-o {out}: the output must end in .xml (IR v11) or .onnx")
    model = read_model(args.model)
    apply_user_passes(model, args.user_passes)
    t0 = time.perf_counter()
    transformed = transformed_model(model, args.transformations)
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


def cmd_visualize(args: argparse.Namespace) -> int:
    from .. import read_model
    from ..passes import VisualizeTree
    out = Path(args.output)
    fmt = out.suffix.lstrip(".").lower()
    if fmt not in GRAPH_FORMATS:
        raise UsageError(f"-o {out}: unknown graph format '{fmt}'; use a file name ending in "
                         + ", ".join(f".{f}" for f in GRAPH_FORMATS))
    model = read_model(args.model)
    apply_user_passes(model, args.user_passes)
    stage = "as read" if not args.user_passes else "after " + ", ".join(args.user_passes)
    if args.after_pipeline:
        model = transformed_model(model, args.transformations)
        stage = f"after the {args.transformations} pipeline"
    VisualizeTree(str(out)).run_on_model(model)
    print(f"wrote {out}: {Path(str(args.model)).name} {stage}, "
          f"{len(model.get_ordered_ops())} ops")
    return 0
