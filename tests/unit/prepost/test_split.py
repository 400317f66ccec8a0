"""Pre/post-processing split: edge Transposes/Gathers move to host models; results unchanged."""
from __future__ import annotations

import numpy as np

import netpass
from netpass import Model, opset
from netpass.core.types import f32
from netpass.prepost import split_pre_post_processing

RNG = np.random.default_rng(1)


def _rand(*shape):
    return RNG.uniform(0.5, 1.5, shape).astype(np.float32)


def _types(model):
    return [n.type_name for n in model.get_ordered_ops()]


def _check_equal(model, feeds):
    ref = netpass.reference.infer(model.clone(), feeds)
    cut = model.clone()
    pp = split_pre_post_processing(cut)
    got = pp.postprocess(netpass.reference.infer(cut, pp.preprocess(feeds)))
    for name in ref:
        np.testing.assert_allclose(got[name], ref[name], rtol=1e-6)
    return cut, pp


def test_input_transpose_is_cut():
    x = opset.parameter([1, 16, 3, 8], f32, "x")
    t = opset.transpose(x, [0, 2, 3, 1])  # unsupported: squeezed [3, 8, 16] is 3-D
    m = Model([opset.relu(t)], [x])
    cut, pp = _check_equal(m, {"x": _rand(1, 16, 3, 8)})
    assert "Transpose" not in _types(cut)
    assert list(pp.inputs) == ["x"] and "Transpose" in _types(pp["x"])


def test_output_transpose_behind_reshape_is_cut():
    x = opset.parameter([1, 4, 3, 8], f32, "x")
    t = opset.transpose(opset.relu(x), [0, 2, 3, 1])
    r = opset.reshape(t, [1, 96], False)
    m = Model([opset.result(r, name="y")], [x])
    cut, pp = _check_equal(m, {"x": _rand(1, 4, 3, 8)})
    assert "Transpose" not in _types(cut) and list(pp.outputs) == ["y"]
    assert cut.output(0).partial_shape.to_shape() == (1, 96)


def test_edge_transposes_behind_squeeze_and_unsqueeze_are_cut():
    """Squeeze and Unsqueeze only rename the shape, as Reshape does, and the GNA pipeline's
    ``at_model_edge`` looks through them: a Transpose it left before an output Unsqueeze (a 2-D
    conv net squeezed to a 1-D pooling, unsqueezed back; conv_net_onnx seed 181) stayed in the
    main model, neither cut nor warned."""
    x = opset.parameter([1, 4, 1, 7], f32, "x")
    s = opset.squeeze(x, [2])
    t = opset.transpose(opset.relu(opset.transpose(s, [0, 2, 1])), [0, 2, 1])
    m = Model([opset.result(opset.unsqueeze(t, [2]), name="y")], [x])
    cut, pp = _check_equal(m, {"x": _rand(1, 4, 1, 7)})
    assert "Transpose" not in _types(cut) and list(pp.inputs) == ["x"]
    assert list(pp.outputs) == ["y"] and cut.output(0).partial_shape.to_shape() == (1, 4, 1, 7)


def test_a_chain_of_edge_ops_is_cut_whole():
    """A Gather then a Transpose at an input (and a Transpose then a Gather at an output,
    behind Reshapes): only the op next to the edge was cut, the other stayed in the main model
    although nothing else read it (conv_net_onnx seeds 24, 240: a channel Gather beside the
    NHWC Transposes)."""
    x = opset.parameter([1, 6, 3, 5], f32, "x")
    g = opset.gather(x, RNG.permutation(6).astype(np.int64), 1)
    t = opset.transpose(opset.reshape(g, [1, 6, 15], False), [0, 2, 1])
    r = opset.relu(opset.reshape(t, [1, 15, 3, 2], False))
    u = opset.transpose(r, [0, 3, 2, 1])
    y = opset.reshape(opset.gather(opset.reshape(u, [1, 2, 45], False),
                                   RNG.permutation(45).astype(np.int64), 2), [90], False)
    m = Model([opset.result(y, name="y")], [x])
    cut, pp = _check_equal(m, {"x": _rand(1, 6, 3, 5)})
    assert "Transpose" not in _types(cut) and "Gather" not in _types(cut)
    assert _types(pp["x"]).count("Transpose") == _types(pp["x"]).count("Gather") == 1
    assert _types(pp["y"]).count("Transpose") == _types(pp["y"]).count("Gather") == 1
    assert cut.output(0).partial_shape.to_shape() == (90,)


def test_supported_transpose_stays():
    x = opset.parameter([1, 8, 16], f32, "x")  # squeezed [8, 16]: min 8 <= 8, 16 % 8 == 0
    m = Model([opset.relu(opset.transpose(x, [0, 2, 1]))], [x])
    cut, pp = _check_equal(m, {"x": _rand(1, 8, 16)})
    assert "Transpose" in _types(cut) and len(pp) == 0


def test_input_gather_is_cut():
    x = opset.parameter([1, 12], f32, "x")
    perm = RNG.permutation(12).astype(np.int64)
    g = opset.gather(x, perm, 1)
    m = Model([opset.relu(g)], [x])
    cut, pp = _check_equal(m, {"x": _rand(1, 12)})
    assert "Gather" not in _types(cut) and "x" in pp


def test_an_input_read_in_two_layouts_becomes_two_inputs():
    """An input read by an edge Transpose and by another op (a conv net's input Transpose and
    a residual Add or an output reading the input itself): the Transpose stayed in the main
    model (one pre-processing model per input). The pre-processing model now computes the
    transposed input as an input of the main model of its own, from the same user input."""
    x = opset.parameter([1, 16, 3, 8], f32, "x")
    t = opset.transpose(x, [0, 2, 3, 1])  # unsupported: squeezed [3, 8, 16] is 3-D
    m = Model([opset.relu(t), opset.sigmoid(x)], [x])
    cut, pp = _check_equal(m, {"x": _rand(1, 16, 3, 8)})
    assert "Transpose" not in _types(cut)
    assert [p.friendly_name for p in cut.parameters] == ["x", "x.1"]
    assert pp.sources == {"x.1": "x"} and "Transpose" in _types(pp["x.1"])
    feeds = pp.preprocess({"x": _rand(1, 16, 3, 8)})
    assert feeds["x"].shape == (1, 16, 3, 8) and feeds["x.1"].shape == (1, 3, 8, 16)


def test_a_reshaped_input_read_in_two_layouts_becomes_two_inputs():
    """The same behind a reshape read twice (an Unsqueeze of the input, read by an output and
    by the input Transpose of a 2-D conv: conv_net_onnx seed 940), and a chain of two edge
    ops (a Gather after the Transpose) cut whole into the new input."""
    x = opset.parameter([1, 12, 20], f32, "x")
    u = opset.unsqueeze(x, [3])
    t = opset.transpose(u, [0, 2, 3, 1])
    g = opset.gather(opset.reshape(t, [1, 20, 12], False), RNG.permutation(12).astype(np.int64), 2)
    m = Model([opset.result(u, name="u"), opset.relu(g)], [x])
    cut, pp = _check_equal(m, {"x": _rand(1, 12, 20)})
    assert "Transpose" not in _types(cut) and "Gather" not in _types(cut)
    assert _types(pp["x.1"]).count("Transpose") == _types(pp["x.1"]).count("Gather") == 1


def test_an_input_read_twice_by_other_ops_is_left_alone():
    x = opset.parameter([1, 16, 3, 8], f32, "x")
    m = Model([opset.relu(x), opset.sigmoid(x)], [x])
    cut, pp = _check_equal(m, {"x": _rand(1, 16, 3, 8)})
    assert len(cut.parameters) == 1 and len(pp) == 0


def test_results_fed_by_nodes_without_inputs_are_left_alone():
    # A Result may read a Constant or a ShapeOf of an input: nothing to cut, nothing to fail.
    x = opset.parameter([2, 3], f32, "x")
    m = Model([opset.constant(np.arange(3, dtype=np.float32)), opset.shape_of(x)], [x])
    cut, pp = _check_equal(m, {"x": _rand(2, 3)})
    assert not list(pp.inputs) and not list(pp.outputs)


def test_an_op_before_several_outputs_is_cut_into_each():
    """A Transpose two outputs read (``y`` and ``z``, the same value), and one whose readers
    branch to two outputs (a channel Gather to ``u``, a reshape to ``v``): the split kept each
    inside, though the GNA pipeline's ``at_model_edge`` counted the first at the edge
    (conv_net_onnx seeds 232116084, 1621996744, 1328144390). Each output now takes the cut
    ops on its way."""
    x = opset.parameter([1, 4, 3, 8], f32, "x")
    a = opset.transpose(opset.relu(x), [0, 2, 3, 1])
    b = opset.transpose(opset.sigmoid(x), [0, 2, 3, 1])
    g = opset.gather(b, opset.constant(np.array([2, 0, 3, 1], np.int64)),
                     opset.constant(np.int64(3)))
    m = Model([opset.result(a, name="y"), opset.result(a, name="z"),
               opset.result(g, name="u"), opset.result(opset.reshape(b, [1, 96], False), name="v")],
              [x])
    cut, pp = _check_equal(m, {"x": _rand(1, 4, 3, 8)})
    assert "Transpose" not in _types(cut) and "Gather" not in _types(cut)
    assert sorted(pp.outputs) == ["u", "v", "y", "z"]
