"""``--pass MODULE:CLASS`` on run, convert and visualize (a module found through PYTHONPATH), and
``netpass explain``."""
from __future__ import annotations

import os
import textwrap

import pytest
from cli_helpers import EXAMPLES, netpass_cli

MODULE = textwrap.dedent('''
    import os
    from netpass import ops, opset
    from netpass.passes import MatcherPass, ModelPass
    from netpass.pattern import Matcher, wrap_type


    class Record(ModelPass):
        """Appends the op types it sees to the file in $RECORD (proves when it ran)."""

        def run_on_model(self, model):
            types = sorted({n.type_name for n in model.get_ordered_ops()})
            with open(os.environ["RECORD"], "a") as f:
                f.write(",".join(types) + "\\n")
            return False


    class SoftmaxToSigmoid(MatcherPass):
        def __init__(self):
            super().__init__()

            def callback(m):
                s = m.match_root
                new = opset.sigmoid(s.input_value(0))
                new.friendly_name = s.friendly_name
                s.output(0).replace(new.output(0))
                return True
            self.register_matcher(Matcher(wrap_type(ops.Softmax), "SoftmaxToSigmoid"), callback)


    class Breaks(ModelPass):
        def run_on_model(self, model):
            raise RuntimeError("broken on purpose")


    class NeedsArgs(ModelPass):
        def __init__(self, x):
            super().__init__()
''')


@pytest.fixture
def user_env(tmp_path):
    (tmp_path / "my_passes.py").write_text(MODULE)
    record = tmp_path / "record.txt"
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    return {"PYTHONPATH": path, "RECORD": str(record)}, record


def records(record):
    return [set(line.split(",")) for line in record.read_text().splitlines()]


def test_convert_runs_the_passes_in_order_before_the_transformations(user_env, tmp_path):
    env, record = user_env
    out = tmp_path / "out.xml"
    proc = netpass_cli("convert", EXAMPLES / "kws_cnn.onnx", "-o", out,
                       "--pass", "my_passes:Record", "--pass", "my_passes:SoftmaxToSigmoid",
                       "--pass", "my_passes:Record", env=env)
    assert proc.returncode == 0, proc.stderr
    first, second = records(record)
    assert "Convolution" in first and "GNAConvolution" not in first  # before the pipeline
    assert "Softmax" in first and "Softmax" not in second and "Sigmoid" in second
    xml = out.read_text()
    assert 'type="Sigmoid"' in xml and 'type="SoftMax"' not in xml


def test_run_and_visualize_take_the_option(user_env, tmp_path):
    env, record = user_env
    proc = netpass_cli("run", EXAMPLES / "kws_cnn.onnx", "--device", "REFERENCE",
                       "--pass", "my_passes:Record", env=env)
    assert proc.returncode == 0, proc.stderr
    proc = netpass_cli("visualize", EXAMPLES / "kws_cnn.onnx", "-o", tmp_path / "g.dot",
                       "--pass", "my_passes:SoftmaxToSigmoid", "--pass", "my_passes:Record",
                       env=env)
    assert proc.returncode == 0, proc.stderr
    assert len(records(record)) == 2
    assert "Sigmoid" in (tmp_path / "g.dot").read_text()


@pytest.mark.parametrize("spec, message", [
    ("nowhere:X", "cannot import module 'nowhere'"),
    ("my_passes:Missing", "module 'my_passes' has no 'Missing'"),
    ("my_passes:os", "is not a ModelPass or MatcherPass class"),
    ("my_passes:NeedsArgs", "NeedsArgs() cannot be built without arguments"),
    ("my_passes:Breaks", "pass 'Breaks' failed: RuntimeError: broken on purpose"),
])
def test_bad_pass_option_is_one_clear_error(user_env, tmp_path, spec, message):
    env, _ = user_env
    proc = netpass_cli("convert", EXAMPLES / "kws_cnn.onnx", "-o", tmp_path / "o.xml",
                       "--pass", spec, env=env)
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: ") and message in proc.stderr, proc.stderr


def test_explain_a_registered_pass_on_a_node():
    proc = netpass_cli("explain", EXAMPLES / "kws_cnn.onnx", "--pass", "ConvertDivide",
                       "--node", "Relu_12")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("pass 'ConvertDivide' on Relu 'Relu_12':")
    assert "no matcher of the pass can start at this node" in proc.stdout
    assert "=> the pass does not fire on this node" in proc.stdout


def test_explain_a_user_pass_that_fires(user_env):
    env, _ = user_env
    proc = netpass_cli("explain", EXAMPLES / "kws_cnn.onnx", "--pass", "my_passes:SoftmaxToSigmoid",
                       "--node", "Softmax_35", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "the pattern matches and the callback rewrote the node" in proc.stdout


def test_explain_a_composite_pass_reports_the_matchers_report():
    proc = netpass_cli("explain", EXAMPLES / "kws_cnn.onnx", "--pass", "TSGeneral",
                       "--node", "Relu_12")
    assert proc.returncode == 0, proc.stderr
    assert "TSUnaryForward: no match" in proc.stdout and "reason: predicate" in proc.stdout


def test_explain_unknown_pass_and_node():
    proc = netpass_cli("explain", EXAMPLES / "kws_cnn.onnx", "--pass", "ConvertDivid",
                       "--node", "Relu_12")
    assert proc.returncode == 1 and "did you mean ConvertDivide" in proc.stderr
    proc = netpass_cli("explain", EXAMPLES / "kws_cnn.onnx", "--pass", "ConvertDivide",
                       "--node", "nope")
    assert proc.returncode == 1 and "no node named 'nope'" in proc.stderr
