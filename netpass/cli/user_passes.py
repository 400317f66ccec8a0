"""A user's passes on the command line: ``--pass MODULE:CLASS`` (``run``, ``convert``,
``visualize``: run on the model as read, before the transformations) and
``netpass explain MODEL --pass NAME --node NODE`` (why a pass does not fire on a node)."""
from __future__ import annotations

import argparse
import difflib
import importlib
import inspect
from collections.abc import Sequence
from typing import Any

from .common import UsageError
from .info import PASS_GROUPS


def add_pass_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pass", dest="user_passes", action="append", default=[],
                   metavar="MODULE:CLASS",
                   help="run this pass (a ModelPass or MatcherPass class, built without "
                        "arguments; MODULE importable, e.g. from PYTHONPATH) on the model as "
                        "read, before the transformations; repeatable, run in order")


def _is_pass(obj: Any) -> bool:
    from ..passes import MatcherPass, ModelPass
    return inspect.isclass(obj) and issubclass(obj, (ModelPass, MatcherPass))


def registered_passes() -> dict[str, type]:
    """The transformations ``netpass passes`` lists (netpass.ngraph_passes.{common,
    transpose_sinking, gna}), by class name."""
    found: dict[str, type] = {}
    for group in PASS_GROUPS:
        package = importlib.import_module(f"netpass.ngraph_passes.{group}")
        for name in getattr(package, "__all__", dir(package)):
            obj = getattr(package, name)
            if _is_pass(obj):
                found.setdefault(name, obj)
    return found


def pass_class(spec: str) -> type:
    """The pass class ``spec`` names: ``MODULE:CLASS``, or the name of a registered pass."""
    module_name, sep, class_name = spec.partition(":")
    if not sep:
        known = registered_passes()
        if spec in known:
            return known[spec]
        close = difflib.get_close_matches(spec, known, n=3)
        raise UsageError(f"--pass {spec}: no registered pass of that name"
                         + (f" (did you mean {', '.join(close)}?)" if close else "")
                         + "; `netpass passes` lists them, MODULE:CLASS names your own")
    if not module_name or not class_name:
        raise UsageError(f"--pass {spec}: expected MODULE:CLASS, e.g. my_passes:FuseSwish")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise UsageError(f"--pass {spec}: cannot import module '{module_name}' ({e}); is its "
                         "folder on PYTHONPATH?") from e
    cls = getattr(module, class_name, None)
    if cls is None:
        raise UsageError(f"--pass {spec}: module '{module_name}' has no '{class_name}'")
    if not _is_pass(cls):
        raise UsageError(f"--pass {spec}: '{class_name}' is not a ModelPass or MatcherPass "
                         "class")
    return cls


def build_pass(spec: str) -> Any:
    """An instance of the pass ``spec`` names (its class built without arguments)."""
    cls = pass_class(spec)
    try:
        return cls()
    except TypeError as e:
        raise UsageError(f"--pass {spec}: {cls.__name__}() cannot be built without arguments "
                         f"({e})") from e


def apply_user_passes(model: Any, specs: Sequence[str]) -> None:
    """Run the passes ``specs`` name on ``model``, in order, in one Manager (validated: a pass
    that breaks the model is reported by name)."""
    if not specs:
        return
    from ..passes import Manager
    manager = Manager(name="--pass")
    for spec in specs:
        manager.register_pass(build_pass(spec))
    manager.run_passes(model)


def cmd_explain(args: argparse.Namespace) -> int:
    from .. import read_model
    from ..passes.explain import explain_pass
    model = read_model(args.model)
    explanation = explain_pass(build_pass(args.pass_name), model, args.node)
    print(explanation)
    return 0


def add_explain_command(sub: Any) -> None:
    ex = sub.add_parser("explain", help="why a pass does (not) fire on a node of a model")
    ex.add_argument("model", help="ONNX model (.onnx) or IR (.xml)")
    ex.add_argument("--pass", dest="pass_name", required=True, metavar="NAME",
                    help="a registered pass (`netpass passes`) or MODULE:CLASS")
    ex.add_argument("--node", required=True, metavar="NODE",
                    help="the node's friendly name (ONNX: the node's name) or unique name")
    ex.set_defaults(func=cmd_explain)
