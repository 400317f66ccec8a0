"""``netpass passes`` and ``netpass devices``."""
from __future__ import annotations

import re

from cli_helpers import netpass_cli


def _pass_rows(stdout: str) -> dict[str, str]:
    return {m.group(1): m.group(2) for m in re.finditer(r"^  (\w+)\s{2,}(.+)$", stdout, re.M)}


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


def test_every_pass_has_a_one_line_description():
    rows = _pass_rows(netpass_cli("passes").stdout)
    assert all(len(text) > 10 and text != "-" for text in rows.values()), rows
    assert rows["GnaTransformationsPipeline"].startswith("The whole GNA ngraph stage")


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
