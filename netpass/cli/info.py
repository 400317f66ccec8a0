"""``netpass passes`` (the transformations, by group) and ``netpass devices``."""
from __future__ import annotations

import argparse
import importlib
import inspect
import os

from ..errors import NetpassError

PASS_GROUPS = ("common", "transpose_sinking", "gna")


# `netpass passes` fits this many columns (a test holds every pass's first docstring line to it).
COLUMNS = 100
# The name column's width: the longest name up to this; a longer one overflows it.
NAME_COLUMN = 32


def describe(cls: type) -> str:
    """What a pass does: the first line of its own docstring (each pass class opens with a
    one-line summary; the rest of the docstring is for readers of the code)."""
    doc = (cls.__dict__.get("__doc__") or "").strip()
    return doc.split("\n")[0].strip() if doc else "-"


def transformation_groups() -> dict[str, list[tuple[str, str]]]:
    """Module -> [(pass name, one-line description)] for the exported pass classes of
    netpass.ngraph_passes.{common, transpose_sinking, gna} and the default legacy passes. A
    class name exported by two groups (the GNA plugin's own TSConcatForward and
    TSSplitBackward) is shown with its group in front in the later group, so every name in the
    list is one pass."""
    from ..legacy_passes import DEFAULT_PASSES
    from ..passes import MatcherPass, ModelPass
    groups: dict[str, list[tuple[str, str]]] = {}
    seen: set[str] = set()
    for group in PASS_GROUPS:
        package = importlib.import_module(f"netpass.ngraph_passes.{group}")
        rows = []
        for name in getattr(package, "__all__", dir(package)):
            cls = getattr(package, name)
            # Re-exports are listed under the package that defines them; bases are not passes.
            if not (inspect.isclass(cls) and issubclass(cls, (ModelPass, MatcherPass))) \
                    or not cls.__module__.startswith(package.__name__) or name.endswith("Base"):
                continue
            rows.append((f"{group}.{name}" if name in seen else name, describe(cls)))
        seen.update(name for name, _ in rows)
        groups[package.__name__] = sorted(rows)
    groups["netpass.legacy_passes (DEFAULT_PASSES, in order)"] = \
        [(p.__name__, describe(p)) for p in DEFAULT_PASSES]
    return groups


def cmd_passes(args: argparse.Namespace) -> int:
    groups = transformation_groups()
    for title, rows in groups.items():
        print(f"{title}:")
        width = max((len(n) for n, _ in rows if len(n) <= NAME_COLUMN), default=NAME_COLUMN)
        for name, text in rows:
            print(f"  {name:<{width}}  {text}")
        print()
    print(f"{sum(len(r) for r in groups.values())} passes. The default pipeline is "
          "GnaTransformationsPipeline (--transformations gna);")
    print("CommonOptimizations is --transformations common.")
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
