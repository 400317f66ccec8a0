"""``netpass check --target gna MODEL``: after the GNA pipeline and the pre/post-processing split,
every op left inside the graph, whether GNA could run it and, if not, the rule of OpenVINO's GNA
Limitations it breaks (:func:`netpass.ngraph_passes.gna.check_support`). Exits with 1 when GNA
cannot run something."""
from __future__ import annotations

import argparse
from pathlib import Path

from .common import parse_assignments, resolve_input_name
from .inputs import _parse_shape, input_hint
from .user_passes import add_pass_option, apply_user_passes

TARGETS = ("gna",)
# Listed only when GNA cannot run them: every model has them.
QUIET = ("Parameter", "Constant", "Result")


def add_check_command(sub) -> None:
    from ..ngraph_passes.gna import GNA_TARGETS
    p = sub.add_parser("check", help="which ops GNA could run after the GNA pipeline, and why not")
    p.add_argument("model", help="ONNX model (.onnx) or IR (.xml)")
    p.add_argument("--target", type=str.lower, choices=TARGETS, required=True,
                   help="the device whose rules apply (gna)")
    p.add_argument("--gna-version", choices=GNA_TARGETS, default=GNA_TARGETS[0],
                   help=f"GNA generation whose limits apply (default {GNA_TARGETS[0]})")
    p.add_argument("--shape", action="append", default=[], metavar="NAME=D0,D1,...",
                   help="fix an input's shape first (GNA runs static shapes only); repeatable")
    add_pass_option(p)
    p.set_defaults(func=cmd_check)


def cmd_check(args: argparse.Namespace) -> int:
    from .. import read_model
    from ..compiler import apply_transformations
    from ..ngraph_passes.gna import check_support, unsupported
    from ..prepost import split_pre_post_processing
    model = read_model(args.model)
    if args.shape:
        with input_hint(model, "--shape"):
            names = list(model.input_names)
            shapes = {resolve_input_name(k, names, "--shape"): _parse_shape(k, v)
                      for k, v in parse_assignments(args.shape, "shape").items()}
        model.reshape(shapes)
    apply_user_passes(model, args.user_passes)
    apply_transformations(model, "gna")
    prepost = split_pre_post_processing(model)
    report = check_support(model, args.gna_version)
    rows = [r for r in report if r.type_name not in QUIET or not r.supported]
    bad = unsupported(report)
    print(f"{Path(str(args.model)).name}: GNA {args.gna_version}, after the GNA pipeline and the "
          f"pre/post split ({len(prepost.inputs)} pre-, {len(prepost.outputs)} post-processing "
          f"models)")
    width_type = max((len(r.type_name) for r in rows), default=0)
    width_name = max((len(r.name) for r in rows), default=0)
    for r in rows:
        status = "ok" if r.supported else "NO"
        why = r.rule if not r.supported else r.note
        print(f"  {status:2}  {r.type_name:{width_type}}  {r.name:{width_name}}  {why}".rstrip())
    inside = sum(1 for r in report if r.type_name not in QUIET)
    print(f"{inside} ops inside the graph; GNA {args.gna_version} cannot run {len(bad)}"
          + ("" if bad else " (the whole graph runs on GNA)"))
    return 1 if bad else 0
