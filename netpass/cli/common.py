"""What the subcommands share: the usage error, option values (devices, transformation
pipelines), ``NAME=value`` parsing, and compiling or transforming a model as an option asks."""
from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from ..errors import InputError, NetpassError

SEED = 0


DEVICES = ("AUTO", "GPU", "CPU", "REFERENCE")


TRANSFORMATIONS = ("gna", "common", "none")


GRAPH_FORMATS = ("svg", "png", "pdf", "dot", "gv")


class UsageError(NetpassError):
    """A command-line value that parses but cannot be used (a bad suffix, a bad range)."""

    hint = "run `netpass <command> --help` for the accepted values"


def parse_assignments(items: Sequence[str], what: str) -> dict[str, str]:
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


def resolve_input_name(key: str, names: list[str], flag: str) -> str:
    if key == "":
        if len(names) != 1:
            raise InputError("?", f"{flag} without NAME= needs a model with exactly one input; "
                                  f"inputs are {names}")
        return names[0]
    if key not in names:
        raise InputError(key, f"{flag}: not an input of the model; inputs are {names}")
    return key


def device_name(args: argparse.Namespace) -> str:
    """``--device``, else ``NETPASS_DEVICE``, else AUTO."""
    name = (args.device or os.environ.get("NETPASS_DEVICE") or "AUTO").upper()
    if name not in DEVICES:
        raise UsageError(f"unknown device '{name}'; use one of {', '.join(DEVICES)}")
    return name


def compile_for_device(model, args: argparse.Namespace):
    """compile_model as the options ask, its stage on stderr when it takes long
    (output.CompileProgress)."""
    from .. import compile_model
    from .output import CompileProgress
    config: dict = {"TRANSFORMATIONS": args.transformations.upper()}
    if getattr(args, "no_host_fallback", False):
        config["HOST_FALLBACK"] = False
    progress = CompileProgress()
    try:
        cm = compile_model(model, device=device_name(args), config=config,
                           progress=progress)
    except BaseException:
        progress.close(ok=False)
        raise
    progress.close()
    return cm


def device_label(cm) -> str:
    """The device a compiled model really runs on (AUTO resolved)."""
    return cm.runtime.device if cm.runtime is not None else "REFERENCE (numpy)"


def device_kind(cm) -> str:
    """REFERENCE, GPU or CPU: what AUTO resolved to."""
    if cm.runtime is None or cm.runtime.engine is None:
        return "REFERENCE"
    return "GPU" if cm.runtime.engine.is_gpu else "CPU"


def transformed_model(model, which: str):
    """A copy of ``model`` after the ngraph pipeline ``which`` (gna, common or none), before the
    pre/post-processing split: the whole model, equivalent to the input."""
    from ..compiler import apply_transformations
    out = model.clone()
    apply_transformations(out, which)
    return out


def add_transformations_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--transformations", type=str.lower, choices=TRANSFORMATIONS, default="gna",
                   help="ngraph pipeline: gna (GnaTransformationsPipeline, default), common "
                        "(CommonOptimizations only) or none")


def add_device_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", type=str.upper, choices=DEVICES, default=None,
                   help="AUTO (best OpenCL GPU, else PoCL), GPU, CPU (PoCL) or REFERENCE (numpy);"
                        " default: $NETPASS_DEVICE or AUTO")
