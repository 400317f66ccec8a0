"""The argument parser and ``main``: one line ``error: ... (hint: ...)`` on stderr for a failure a
user can cause, the traceback with ``NETPASS_DEBUG=1``; Ctrl-C ends with one line and exit
status 130 (128 + SIGINT, as shells report it)."""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from .. import __version__
from ..errors import NetpassError
from .benchmark import cmd_benchmark
from .check import add_check_command
from .common import add_device_option, add_transformations_option
from .convert import cmd_convert, cmd_visualize
from .info import cmd_devices, cmd_passes
from .run import cmd_run
from .user_passes import add_explain_command, add_pass_option


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="netpass", description="netpass command line: run, convert, visualize, check, "
                                    "benchmark models and explain passes (docs/cli.md)")
    parser.add_argument("--version", action="version", version=f"netpass {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="compile a model and run it on random or given inputs")
    run.add_argument("model", help="ONNX model (.onnx) or IR (.xml)")
    run.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                     help="take an input from a .npy file; repeatable")
    run.add_argument("--shape", action="append", default=[], metavar="NAME=D0,D1,...",
                     help="shape of a random input (dynamic dims default to 1); repeatable")
    add_device_option(run)
    run.add_argument("--iterations", type=int, default=1, metavar="N",
                     help="timed runs after the first one (default 1)")
    run.add_argument("--no-host-fallback", action="store_true",
                     help="fail (naming the ops) instead of running ops without a device "
                          "kernel on the host (config HOST_FALLBACK: False)")
    add_transformations_option(run)
    add_pass_option(run)
    run.set_defaults(func=cmd_run)

    conv = sub.add_parser("convert", help="run the pipeline and write IR v11 xml or ONNX")
    conv.add_argument("model", help="ONNX model (.onnx) or IR (.xml)")
    conv.add_argument("-o", "--output", required=True, metavar="OUT.xml|OUT.onnx",
                      help="the transformed model: IR v11 (.xml + .bin) or ONNX (.onnx)")
    conv.add_argument("--dump-dir", metavar="DIR",
                      help="also write every stage (svg and IR xml) and every pass's tracing")
    add_transformations_option(conv)
    add_pass_option(conv)
    conv.set_defaults(func=cmd_convert)

    vis = sub.add_parser("visualize", help="draw a model's graph (svg, png, pdf or dot)")
    vis.add_argument("model", help="ONNX model (.onnx) or IR (.xml)")
    vis.add_argument("-o", "--output", required=True, metavar="GRAPH.svg",
                     help="output file; its suffix picks the format (svg, png, pdf, dot)")
    vis.add_argument("--after-pipeline", action="store_true",
                     help="draw the model after the transformations, not as read")
    add_transformations_option(vis)
    add_pass_option(vis)
    vis.set_defaults(func=cmd_visualize)

    add_check_command(sub)

    passes = sub.add_parser("passes", help="list the transformations with a description each")
    passes.set_defaults(func=cmd_passes)
    add_explain_command(sub)

    devs = sub.add_parser("devices", help="list the OpenCL devices and the one AUTO picks")
    devs.set_defaults(func=cmd_devices)

    bench = sub.add_parser("benchmark", help="latency percentiles, throughput and allocations")
    bench.add_argument("model", help="ONNX model (.onnx) or IR (.xml)")
    bench.add_argument("--shapes", nargs="+", default=[], metavar="NAME=D0,D1,...",
                       help="input shapes; a name given again starts the next shape set")
    bench.add_argument("--sequence", metavar="NAME:AXIS:START:STOP",
                       help="grow AXIS of input NAME from START to STOP, one infer per size, "
                            "in one infer request (e.g. x:1:1:64)")
    bench.add_argument("--decode", metavar="PROMPT_LEN:NEW_TOKENS",
                       help="greedy generation with a decoder exported with its key/value "
                            "cache, made stateful: time to first token, per-token latency, "
                            "tokens/s (e.g. 128:128)")
    add_device_option(bench)
    bench.add_argument("--iterations", type=int, default=10, metavar="N",
                       help="measured passes over the shapes or the sequence (default 10)")
    bench.add_argument("--warmup", type=int, default=1, metavar="N",
                       help="unmeasured passes first, on a separate request (default 1)")
    add_transformations_option(bench)
    bench.set_defaults(func=cmd_benchmark)
    return parser


def _one_line(text: str) -> str:
    return " ".join(text.split())


# Exit status after Ctrl-C: 128 + SIGINT, what a shell reports for a process SIGINT ended.
INTERRUPTED = 130


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _run(argv)
    except KeyboardInterrupt:
        if _debug():
            raise
        print("interrupted", file=sys.stderr)
        return INTERRUPTED


def _debug() -> bool:
    return os.environ.get("NETPASS_DEBUG", "").strip() not in ("", "0")


def _run(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    if _debug():
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
