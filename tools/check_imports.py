"""Check that netpass's modules import each other along its layers and without cycles.

Every import statement of every module under ``netpass/`` is read with ``ast`` (imports inside
functions too: they run as surely as module-level ones, only later; imports under
``if TYPE_CHECKING:`` never run and are skipped). An import of ``a.b.c`` depends on ``a.b.c``
and, as Python runs them first, on the ``__init__`` of each package on the way that does not
already contain the importer.

Two rules (docs/dev-conventions.md, "Layers"):

- **Direction.** Each module belongs to one layer of ``LAYERS``; it may import modules of its
  own layer and of layers listed before it, never one listed after it.
- **No cycles.** The module dependency graph has no cycle, except the named ones in
  ``ALLOWED_CYCLES`` (none now). Each of those must still be a cycle, exactly as listed: when one
  is broken or changes, the list must be updated, so it can only shrink.

    python tools/check_imports.py            # report; exit status 1 when a rule is broken
    python tools/check_imports.py --graph    # also print every module's dependencies
"""
from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "netpass"

# Layers, bottom first: a module may import its own layer and the layers before it. A module
# belongs to the layer of the longest prefix listed for it; the root package's entry names the
# package's __init__ only, so a new top-level module must be placed here.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("netpass.errors", "netpass.version")),
    ("core", ("netpass.core",)),
    ("ops", ("netpass.ops", "netpass.opset")),
    ("reference", ("netpass.reference",)),
    ("frontend", ("netpass.frontend",)),
    ("pattern", ("netpass.pattern",)),
    ("passes", ("netpass.passes",)),
    ("transformations", ("netpass.ngraph_passes",)),
    ("prepost", ("netpass.prepost",)),
    ("legacy", ("netpass.legacy_passes",)),
    ("runtime", ("netpass.runtime",)),
    ("entry", ("netpass", "netpass.compiler", "netpass.testing", "netpass.generation",
               "netpass.cli", "netpass.synthetic")),
]

# Import cycles that exist on purpose, each exactly as it is (a set of modules); the list may
# only shrink, and is empty: the runtime's last two went with its op table (issue 13).
ALLOWED_CYCLES: list[frozenset[str]] = []


@dataclass
class Module:
    name: str
    path: Path
    is_package: bool
    # imported module -> line numbers of the imports
    imports: dict[str, list[int]] = field(default_factory=dict)


def find_modules(root: Path = ROOT) -> dict[str, Module]:
    """Every module of the package under ``root``, by dotted name."""
    mods: dict[str, Module] = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        mods[".".join(parts)] = Module(".".join(parts), path, is_package)
    return mods


def _type_checking_lines(tree: ast.AST) -> set[int]:
    """Line numbers of statements under ``if TYPE_CHECKING:`` (never run)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else \
                test.attr if isinstance(test, ast.Attribute) else None
            if name == "TYPE_CHECKING":
                for stmt in node.body:
                    lines.update(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
    return lines


def _resolve(mod: Module, node: ast.ImportFrom) -> str:
    """The absolute module a ``from ... import`` names."""
    if not node.level:
        return node.module or ""
    base = mod.name.split(".")
    if not mod.is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _closest_module(name: str, mods: dict[str, Module]) -> str | None:
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def read_imports(mods: dict[str, Module]) -> None:
    """Fill each module's ``imports`` with the netpass modules it imports directly."""
    for mod in mods.values():
        tree = ast.parse(mod.path.read_text(), str(mod.path))
        skip = _type_checking_lines(tree)
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or node.lineno in skip:
                continue
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                source = _resolve(mod, node)
                # ``from pkg import sub`` imports the submodule; ``from mod import name`` the
                # module.
                targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in mods else source
                           for a in node.names]
            for target in targets:
                if target != PACKAGE and not target.startswith(PACKAGE + "."):
                    continue
                found = _closest_module(target, mods)
                if found and found != mod.name:
                    mod.imports.setdefault(found, []).append(node.lineno)


def dependencies(mod: Module, mods: dict[str, Module]) -> dict[str, int]:
    """Modules ``mod`` makes Python run, with the line that does: each import and the package
    ``__init__``s on its way that do not already contain ``mod``."""
    deps: dict[str, int] = {}
    own = mod.name if mod.is_package else mod.name.rpartition(".")[0]
    for target, lines in mod.imports.items():
        chain = [target]
        parent = target.rpartition(".")[0]
        while parent:
            if parent in mods and not (own == parent or own.startswith(parent + ".")):
                chain.append(parent)
            parent = parent.rpartition(".")[0]
        for dep in chain:
            if dep != mod.name:
                deps.setdefault(dep, lines[0])
    return deps


def layer_of(name: str) -> int:
    best, rank = -1, -1
    for i, (_layer, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            inside = name == p or (p != PACKAGE and name.startswith(p + "."))
            if inside and len(p) > best:
                best, rank = len(p), i
    if rank < 0:
        raise ValueError(f"module {name} is in no layer of LAYERS")
    return rank


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[frozenset[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(frozenset(comp))
    return out


@dataclass
class Report:
    graph: dict[str, dict[str, int]]
    direction: list[str]
    new_cycles: list[str]
    stale_exceptions: list[str]

    @property
    def ok(self) -> bool:
        return not (self.direction or self.new_cycles or self.stale_exceptions)


def check(root: Path = ROOT, allowed: list[frozenset[str]] | None = None) -> Report:
    """Both rules over the package under ``root``; ``allowed`` defaults to ALLOWED_CYCLES."""
    allowed = ALLOWED_CYCLES if allowed is None else allowed
    mods = find_modules(root)
    read_imports(mods)
    direction = []
    for name, mod in sorted(mods.items()):
        rank = layer_of(name)
        for target, lines in sorted(mod.imports.items()):
            if layer_of(target) > rank:
                rel = mod.path.relative_to(root).as_posix()
                direction.append(f"{rel}:{lines[0]}: {name} ({LAYERS[rank][0]}) imports {target} "
                                 f"({LAYERS[layer_of(target)][0]}), a layer above it")
    graph = {name: dependencies(m, mods) for name, m in mods.items()}
    found = cycles({n: set(d) for n, d in graph.items()})
    new = [" <-> ".join(sorted(c)) for c in found if c not in allowed]
    stale = [" <-> ".join(sorted(c)) for c in allowed if c not in found]
    return Report(graph, direction, new, stale)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Check that netpass's modules import along its layers and without cycles "
                    "(docs/dev-conventions.md, 'Layers').")
    parser.add_argument("--graph", action="store_true",
                        help="also print every module's netpass dependencies")
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="repository root holding netpass/ (default: this checkout)")
    args = parser.parse_args(argv)
    report = check(args.root)
    if args.graph:
        for name, deps in sorted(report.graph.items()):
            print(f"{name} [{LAYERS[layer_of(name)][0]}]: {', '.join(sorted(deps)) or '-'}")
    for line in report.direction:
        print(f"direction: {line}")
    for c in report.new_cycles:
        print(f"cycle: {c}")
    for c in report.stale_exceptions:
        print(f"stale exception (no longer a cycle as listed; update ALLOWED_CYCLES): {c}")
    allowed = len(ALLOWED_CYCLES) - len(report.stale_exceptions)
    print(f"{len(report.graph)} modules, {len(report.direction)} imports against the layers, "
          f"{len(report.new_cycles)} cycles, {allowed} allowed cycles "
          f"({'ok' if report.ok else 'FAILED'})")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
