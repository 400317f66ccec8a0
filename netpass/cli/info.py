"""``netpass passes`` (the transformations, by group) and ``netpass devices``."""
from __future__ import annotations

import argparse
import importlib
import inspect
import os
import re
import sys

from ..errors import NetpassError


PASS_GROUPS = ("common", "transpose_sinking", "gna")


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
    from ..legacy_passes import DEFAULT_PASSES
    from ..passes import MatcherPass, ModelPass
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


def cmd_devices(args: argparse.Namespace) -> int:
    from ..runtime import devices, select_device
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
