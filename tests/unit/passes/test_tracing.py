"""Manager tracing (NETPASS_VISUALIZE_TRACING / NETPASS_SERIALIZE_TRACING) and profiling."""
from __future__ import annotations

import re

import numpy as np
import pytest

import netpass
from netpass import Model, ops, opset
from netpass.passes import Manager, MatcherPass, ModelPass
from netpass.passes import manager as manager_module
from netpass.pattern import Matcher, wrap_type


class ReluToTanh(MatcherPass):
    def __init__(self):
        super().__init__()

        def callback(m):
            r = m.match_root
            r.output(0).replace(opset.tanh(r.input_value(0)).output(0))
            return True
        self.register_matcher(Matcher(wrap_type(ops.Relu), "ReluToTanh"), callback)


class Noop(ModelPass):
    def run_on_model(self, model):
        return False


def model():
    x = opset.parameter([2, 3], np.float32, name="x")
    return Model([opset.exp(opset.relu(x))], [x], "traced")


def manager():
    m = Manager()
    m.register_pass(ReluToTanh)
    m.register_pass(Noop)
    return m


@pytest.fixture
def fake_writers(monkeypatch):
    """Replace the svg/xml writers by ones that only create the file."""
    written = []

    def fake(model, path):
        path.write_text(model.friendly_name)
        written.append(path.name)
    monkeypatch.setattr(manager_module, "dump_svg", fake)
    monkeypatch.setattr(manager_module, "dump_xml", fake)
    return written


NAME = re.compile(r"^traced_(\d{3})_(\w+)\.(svg|xml)$")


def test_visualize_tracing_writes_one_file_per_pass(tmp_path, monkeypatch, fake_writers):
    monkeypatch.setenv("NETPASS_VISUALIZE_TRACING", str(tmp_path))
    manager().run_passes(model())
    names = sorted(p.name for p in tmp_path.iterdir())
    parsed = [NAME.match(n).groups() for n in names]
    assert [(p, s) for _, p, s in parsed] == [("ReluToTanh", "svg"), ("Noop", "svg")]
    first, second = (int(n) for n, _, _ in parsed)
    assert second == first + 1


def test_serialize_tracing_filters_by_pass_name_substring(tmp_path, monkeypatch, fake_writers):
    monkeypatch.setenv("NETPASS_SERIALIZE_TRACING", f"{tmp_path}:ToTanh,Other")
    manager().run_passes(model())
    names = [p.name for p in tmp_path.iterdir()]
    assert len(names) == 1 and NAME.match(names[0]).group(2) == "ReluToTanh"
    assert names[0].endswith(".xml")


def test_counter_is_shared_by_managers(tmp_path, monkeypatch, fake_writers):
    monkeypatch.setenv("NETPASS_VISUALIZE_TRACING", str(tmp_path))
    manager().run_passes(model())
    manager().run_passes(model())
    numbers = sorted(int(NAME.match(p.name).group(1)) for p in tmp_path.iterdir())
    assert numbers == list(range(numbers[0], numbers[0] + 4))


def test_openvino_env_name_true_dumps_into_current_folder(tmp_path, monkeypatch, fake_writers):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OV_ENABLE_VISUALIZE_TRACING", "1")
    manager().run_passes(model())
    assert len(list(tmp_path.glob("traced_*_*.svg"))) == 2


def test_no_env_no_files(tmp_path, monkeypatch, fake_writers):
    monkeypatch.chdir(tmp_path)
    manager().run_passes(model())
    assert fake_writers == [] and list(tmp_path.iterdir()) == []


def test_real_serialize_tracing_writes_readable_ir(tmp_path, monkeypatch):
    monkeypatch.setenv("NETPASS_SERIALIZE_TRACING", f"{tmp_path}:ReluToTanh")
    manager().run_passes(model())
    xmls = list(tmp_path.glob("traced_*_ReluToTanh.xml"))
    assert len(xmls) == 1 and xmls[0].with_suffix(".bin").exists()
    back = netpass.read_model(str(xmls[0]))
    assert [n.type_name for n in back.get_ordered_ops()] == ["Parameter", "Tanh", "Exp", "Result"]


def test_real_visualize_tracing_writes_svg(tmp_path, monkeypatch):
    import shutil
    if shutil.which("dot") is None:
        pytest.skip("graphviz 'dot' is not installed")
    monkeypatch.setenv("NETPASS_VISUALIZE_TRACING", f"{tmp_path}:ReluToTanh")
    manager().run_passes(model())
    svgs = list(tmp_path.glob("traced_*_ReluToTanh.svg"))
    assert len(svgs) == 1 and "<svg" in svgs[0].read_text()


def test_profile_to_stderr(monkeypatch, capsys):
    monkeypatch.setenv("NETPASS_PROFILE_PASS", "1")
    manager().run_passes(model())
    err = capsys.readouterr().err
    assert re.search(r"^ReluToTanh [\d.]+ms \+ \(validation [\d.]+ms\)$", err, re.M)
    assert re.search(r"^Noop [\d.]+ms - \(validation [\d.]+ms\)$", err, re.M)
    assert "PassManager finished: Manager" in err


def test_profile_to_file(tmp_path, monkeypatch):
    path = tmp_path / "profile.txt"
    monkeypatch.setenv("NETPASS_PROFILE_PASS", str(path))
    manager().run_passes(model())
    lines = path.read_text().splitlines()
    assert re.fullmatch(r"t;ReluToTanh;Manager;\d+;1", lines[0])
    assert re.fullmatch(r"v;ReluToTanh;Manager;\d+", lines[1])
    assert re.fullmatch(r"t;Noop;Manager;\d+;0", lines[2])
    assert re.fullmatch(r"v;Noop;Manager;\d+", lines[3])
    assert re.fullmatch(r"m;Manager;\d+;1", lines[4])


def test_profile_without_validation_has_no_validation_time(monkeypatch, capsys):
    monkeypatch.setenv("NETPASS_PROFILE_PASS", "1")
    m = Manager()
    m.set_per_pass_validation(False)
    m.register_pass(ReluToTanh)
    m.run_passes(model())
    err = capsys.readouterr().err
    assert re.search(r"^ReluToTanh [\d.]+ms \+$", err, re.M)


def test_serialize_and_visualize_importable_from_passes():
    from netpass.passes import Serialize, VisualizeTree
    from netpass.passes.serialize import Serialize as S
    from netpass.passes.visualize import VisualizeTree as V
    assert Serialize is S and VisualizeTree is V
