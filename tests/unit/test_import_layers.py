"""The import-direction check (tools/check_imports.py): netpass's own modules import along the
layers of docs/dev-conventions.md without cycles, and the check itself catches an import
against the layers, a cycle (also one through a package ``__init__``) and a stale exception."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load_tool():
    spec = importlib.util.spec_from_file_location("check_imports", ROOT / "tools" / "check_imports.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["check_imports"] = mod
    spec.loader.exec_module(mod)
    return mod


check_imports = _load_tool()


def test_netpass_imports_follow_the_layers():
    report = check_imports.check(ROOT)
    assert report.direction == [], "\n".join(report.direction)


def test_netpass_has_no_import_cycles():
    report = check_imports.check(ROOT)
    assert report.new_cycles == [], "\n".join(report.new_cycles)
    assert report.stale_exceptions == [], \
        "these allowed cycles are gone or changed; update ALLOWED_CYCLES: " + \
        "\n".join(report.stale_exceptions)


def test_every_module_is_in_a_layer():
    for name in check_imports.find_modules(ROOT):
        check_imports.layer_of(name)  # raises for a module outside LAYERS


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in {"netpass/__init__.py": "", "netpass/core/__init__.py": "",
                      "netpass/ops/__init__.py": "", **files}.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


def test_check_reports_an_import_against_the_layers(tmp_path):
    root = _tree(tmp_path, {
        "netpass/core/node.py": "def f():\n    from ..ops.base import X\n",
        "netpass/ops/base.py": "from ..core.node import f\nX = 1\n",
    })
    report = check_imports.check(root, allowed=[])
    assert len(report.direction) == 1
    assert "netpass/core/node.py:2: netpass.core.node (core) imports netpass.ops.base (ops)" \
        in report.direction[0]
    # The same import under TYPE_CHECKING never runs and is not a dependency.
    (root / "netpass/core/node.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..ops.base import X\n")
    assert check_imports.check(root, allowed=[]).ok


def test_check_reports_a_cycle_and_one_through_a_package_init(tmp_path):
    root = _tree(tmp_path, {
        "netpass/ops/a.py": "from .b import y\nx = 1\n",
        "netpass/ops/b.py": "y = 2\ndef f():\n    from .a import x\n",
    })
    assert check_imports.check(root, allowed=[]).new_cycles == ["netpass.ops.a <-> netpass.ops.b"]
    # No direct cycle, but importing fam1.m runs fam1/__init__, which imports fam1.n, which
    # imports fam2.k, whose package fam2/__init__ imports fam2.j, which imports fam1.m.
    root = _tree(tmp_path / "pkg", {
        "netpass/ops/fam1/__init__.py": "from .m import M\nfrom .n import N\n",
        "netpass/ops/fam1/m.py": "M = 1\n",
        "netpass/ops/fam1/n.py": "from ..fam2.k import K\nN = K\n",
        "netpass/ops/fam2/__init__.py": "from .j import J\nfrom .k import K\n",
        "netpass/ops/fam2/j.py": "from ..fam1.m import M\nJ = M\n",
        "netpass/ops/fam2/k.py": "K = 2\n",
    })
    cycles = check_imports.check(root, allowed=[]).new_cycles
    assert len(cycles) == 1 and "netpass.ops.fam1" in cycles[0] and "netpass.ops.fam2" in cycles[0]


def test_check_accepts_a_listed_cycle_and_reports_it_once_gone(tmp_path):
    listed = [frozenset({"netpass.ops.a", "netpass.ops.b"})]
    root = _tree(tmp_path, {"netpass/ops/a.py": "from .b import y\nx = 1\n",
                            "netpass/ops/b.py": "from .a import x\ny = 2\n"})
    assert check_imports.check(root, allowed=listed).ok
    (root / "netpass/ops/b.py").write_text("y = 2\n")
    report = check_imports.check(root, allowed=listed)
    assert report.stale_exceptions == ["netpass.ops.a <-> netpass.ops.b"]
    assert not report.ok


@pytest.mark.parametrize("argv, status", [([], 0), (["--graph"], 0)])
def test_tool_runs_from_the_command_line(capsys, argv, status):
    assert check_imports.main(argv) == status
    out = capsys.readouterr().out
    assert "0 imports against the layers, 0 cycles" in out
    if argv:
        assert "netpass.ops.pad [ops]:" in out
