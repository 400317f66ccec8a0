"""``netpass passes`` and ``netpass devices``."""
from __future__ import annotations

import re

from cli_helpers import netpass_cli


def _pass_list(stdout: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2))
            for m in re.finditer(r"^  ([\w.]+)\s{2,}(.+)$", stdout, re.M)]


def _pass_rows(stdout: str) -> dict[str, str]:
    return dict(_pass_list(stdout))


def test_passes_lists_the_transformations_of_each_module():
    proc = netpass_cli("passes")
    assert proc.returncode == 0, proc.stderr
    for module in ("common", "transpose_sinking", "gna"):
        assert f"netpass.ngraph_passes.{module}:" in proc.stdout
    rows = _pass_rows(proc.stdout)
    for name in ("CommonOptimizations", "ConstantFolding", "TSGeneral", "TSFuse",
                 "GnaTransformationsPipeline", "ReplaceGnaNHWCLayers", "TransposeCompress"):
        assert name in rows


def test_passes_lists_the_legacy_passes_in_order():
    from netpass.legacy_passes import DEFAULT_PASSES
    stdout = netpass_cli("passes").stdout
    legacy = stdout.split("netpass.legacy_passes (DEFAULT_PASSES, in order):")[1]
    assert list(_pass_rows(legacy)) == [p.__name__ for p in DEFAULT_PASSES]


def test_every_pass_has_its_own_uncut_description_within_100_columns():
    stdout = netpass_cli("passes").stdout
    assert all(len(line) <= 100 for line in stdout.splitlines()), \
        [line for line in stdout.splitlines() if len(line) > 100]
    rows = _pass_list(stdout)
    names = [name for name, _ in rows]
    texts = [text for _, text in rows]
    assert len(rows) > 80 and len(set(names)) == len(names), names
    assert len(set(texts)) == len(texts), [t for t in texts if texts.count(t) > 1]
    assert all(len(t) > 10 and t.endswith(".") and not t.endswith("...") and "``" not in t
               for t in texts), texts
    assert dict(rows)["GnaTransformationsPipeline"] == \
        "The whole GNA ngraph stage, in the GNA plugin's order."


def test_each_description_is_the_first_line_of_the_pass_docstring():
    from netpass.cli.info import transformation_groups
    from netpass.ngraph_passes import gna, transpose_sinking
    rows = dict(_pass_list(netpass_cli("passes").stdout))
    # A class name exported by two groups is listed once under each, the later qualified.
    assert rows["TSConcatForward"] == transpose_sinking.TSConcatForward.__doc__.split("\n")[0]
    assert rows["gna.TSConcatForward"] == gna.TSConcatForward.__doc__.split("\n")[0]
    listed = {name: text for group in transformation_groups().values() for name, text in group}
    assert listed == rows


def test_devices_lists_pocl_and_the_auto_choice():
    proc = netpass_cli("devices")
    assert proc.returncode == 0, proc.stderr
    assert "(platform Portable Computing Language)" in proc.stdout
    assert re.search(r"^AUTO picks: .+ \(platform Portable Computing Language\)$", proc.stdout,
                     re.M)
    assert "REFERENCE: numpy" in proc.stdout


def test_devices_reports_the_environment_override():
    proc = netpass_cli("devices", env={"NETPASS_DEVICE": "REFERENCE"})
    assert "NETPASS_DEVICE=REFERENCE overrides the default device" in proc.stdout
