"""Legacy stage: conversion to a layer graph, the pass manager, and each legacy pass."""
from __future__ import annotations

import numpy as np
import pytest

import netpass
from netpass import Model, opset
from netpass.core.types import f16, f32
from netpass.errors import NetpassError
from netpass.legacy_passes import LegacyNetwork, PassManager, convert_to_legacy, run_legacy_passes
from netpass.legacy_passes.passes import (
    ConvertGemmToFullyConnectedPass,
    FuseFullyConnectedWithEltwisePass,
    FuseMultipleIdentitiesPass,
    HandleCropAlignmentPass,
    InsertIdentityPass,
    RemoveConstPass,
    RemoveSingleInputConcatPass,
    ReorderActivationAndPoolingPass,
)
from netpass.ops.io import Parameter
from netpass.runtime.graph_compiler import legacy_to_model

RNG = np.random.default_rng(0)


def _w(*shape):
    return RNG.uniform(0.1, 1.0, shape).astype(np.float32)


def conv_relu_pool_model():
    x = opset.parameter([1, 3, 8, 8], f32, "x")
    conv = opset.convolution(x, _w(4, 3, 3, 3), [1, 1], [1, 1], [1, 1], [1, 1])
    conv.friendly_name = "conv"
    act = opset.relu(conv)
    act.friendly_name = "act"
    pool = opset.max_pool(act, [2, 2], [1, 1], [0, 0], [0, 0], [2, 2])
    pool.friendly_name = "pool"
    out = opset.result(pool.output(0), name="y")
    return Model([out], [x], "m")


def test_constants_become_blobs_of_their_consumer():
    net = convert_to_legacy(conv_relu_pool_model())
    conv = net.layer("conv")
    assert conv.type == "Convolution" and conv.blobs["weights"].shape == (4, 3, 3, 3)
    assert conv.inputs[1] == ("blob", "weights")
    assert "Const" not in net.types() and "Constant" not in net.types()


def test_ports_and_topological_order():
    net = convert_to_legacy(conv_relu_pool_model())
    order = [layer.name for layer in net.sorted_layers()]
    assert order.index("x") < order.index("conv") < order.index("act") < order.index("pool")
    assert net.consumers("conv") == [("act", 0)]
    assert net.input_names == ["x"] and net.layer(net.output_names[0]).params["name"] == "y"


def test_reorder_activation_and_pooling():
    net = convert_to_legacy(conv_relu_pool_model())
    assert ReorderActivationAndPoolingPass().run(net)
    assert net.consumers("conv") == [("pool", 0)] and net.consumers("pool") == [("act", 0)]
    assert net.layer("act").out_shapes[0].to_shape() == (1, 4, 4, 4)
    assert len(net.layer("act").out_shapes) == len(net.layer("act").out_types) == 1


def test_reorder_keeps_the_order_when_the_pool_indices_are_read():
    x = opset.parameter([1, 3, 8, 8], f32, "x")
    conv = opset.convolution(x, _w(4, 3, 3, 3), [1, 1], [1, 1], [1, 1], [1, 1])
    act = opset.relu(conv)
    pool = opset.max_pool(act, [2, 2], [1, 1], [0, 0], [0, 0], [2, 2])
    net = convert_to_legacy(Model([pool.output(0), pool.output(1)], [x]))
    assert not ReorderActivationAndPoolingPass().run(net)


@pytest.mark.parametrize("make, moves", [(opset.exp, True), (opset.erf, True),
                                         (lambda c: opset.clamp(c, 0.0, 1.0), True),
                                         (opset.sin, False), (opset.abs, False)])
def test_reorder_moves_exactly_the_monotonic_activations(make, moves):
    x = opset.parameter([1, 3, 8, 8], f32, "x")
    conv = opset.convolution(x, _w(4, 3, 3, 3), [1, 1], [1, 1], [1, 1], [1, 1])
    conv.friendly_name = "conv"
    act = make(conv)
    act.friendly_name = "act"
    pool = opset.max_pool(act, [2, 2], [1, 1], [0, 0], [0, 0], [2, 2])
    pool.friendly_name = "pool"
    net = convert_to_legacy(Model([pool.output(0)], [x]))
    assert ReorderActivationAndPoolingPass().run(net) is moves
    if not moves:
        return
    assert net.consumers("conv") == [("pool", 0)] and net.consumers("pool") == [("act", 0)]
    assert net.layer("act").out_shapes[0].to_shape() == (1, 4, 4, 4)


@pytest.mark.parametrize("kernel, pads, moves", [([1, 1], [1, 1], False),
                                                  ([3, 3], [1, 1], True),
                                                  ([2, 2], [0, 0], True)], ids=str)
def test_reorder_keeps_the_order_where_a_pool_window_covers_padding_only(kernel, pads, moves):
    """A max-pool window of padding only gives -inf; the activation after the pooling would
    make it act(-inf) (a Relu: 0), so such a pool keeps its order (as the GNA pipeline's
    ReorderActivationAndPooling does): a 1x1 window padded by 1 on every side."""
    x = opset.parameter([1, 3, 6, 6], f32, "x")
    conv = opset.convolution(x, _w(4, 3, 1, 1), [1, 1], [0, 0], [0, 0], [1, 1])
    conv.friendly_name = "conv"
    pool = opset.max_pool(opset.relu(conv), [1, 1], [1, 1], pads, pads, kernel)
    model = Model([opset.result(pool.output(0), name="y")], [x])
    net = convert_to_legacy(model)
    assert ReorderActivationAndPoolingPass().run(net) is moves
    feeds = {"x": RNG.standard_normal((1, 3, 6, 6)).astype(np.float32)}
    expected = netpass.reference.infer(model, feeds)["y"]
    got = netpass.compile_model(model, "REFERENCE", {"TRANSFORMATIONS": "NONE"}) \
        .create_infer_request().infer(feeds)["y"]
    np.testing.assert_array_equal(got, expected)


# (kernel, dilation, pads, auto_pad, input size): one window whose taps straddle the data (a
# dilated window over padding on both sides of a 1-wide axis), a same_upper pooling whose
# automatic pads do the same, and a dilated window whose taps all land in the data.
DILATED_POOLS = [([1, 2], [1, 2], [0, 1], "explicit", 1, False),
                 ([1, 2], [1, 2], [0, 0], "same_upper", 1, False),
                 ([1, 2], [1, 2], [0, 1], "explicit", 3, True)]


@pytest.mark.parametrize("kernel, dilations, pads, auto_pad, width, moves", DILATED_POOLS,
                         ids=str)
def test_reorder_keeps_the_order_where_dilated_taps_see_padding_only(kernel, dilations, pads,
                                                                    auto_pad, width, moves):
    """A dilated max-pool window whose taps all fall into padding (it spans the data, its taps
    step over it) gives -inf: the rule looked only at where the first and last windows start
    and end, and at no pads when auto_pad chose them, so the Relu moved after it made 0 (found
    by tests/property/test_legacy_fuzz.py)."""
    x = opset.parameter([1, 2, 1, width], f32, "x")
    conv = opset.convolution(x, _w(3, 2, 1, 1), [1, 1], [0, 0], [0, 0], [1, 1])
    pool = opset.max_pool(opset.relu(conv), [1, 1], dilations, pads, pads, kernel,
                          auto_pad=auto_pad)
    model = Model([opset.result(pool.output(0), name="y")], [x])
    net = convert_to_legacy(model)
    assert ReorderActivationAndPoolingPass().run(net) is moves
    feeds = {"x": RNG.standard_normal((1, 2, 1, width)).astype(np.float32)}
    expected = netpass.reference.infer(model, feeds)["y"]
    for transformations in ("NONE", "GNA"):
        got = netpass.compile_model(model, "REFERENCE", {"TRANSFORMATIONS": transformations}) \
            .create_infer_request().infer(feeds)["y"]
        np.testing.assert_array_equal(got, expected)


def test_reorder_keeps_avg_pool_order():
    x = opset.parameter([1, 3, 8, 8], f32, "x")
    conv = opset.convolution(x, _w(4, 3, 3, 3), [1, 1], [1, 1], [1, 1], [1, 1])
    act = opset.relu(conv)
    pool = opset.avg_pool(act, [2, 2], [0, 0], [0, 0], [2, 2], True)
    net = convert_to_legacy(Model([pool], [x]))
    assert not ReorderActivationAndPoolingPass().run(net)


def test_remove_single_input_concat():
    x = opset.parameter([2, 3], f32, "x")
    c = opset.concat([opset.relu(x)], 0)
    net = convert_to_legacy(Model([opset.sigmoid(c)], [x]))
    assert RemoveSingleInputConcatPass().run(net)
    assert "Concat" not in net.types()


def test_remove_const_turns_reshape_shape_into_dims():
    x = opset.parameter([2, 6], f32, "x")
    r = opset.reshape(opset.relu(x), [3, 4], False)
    net = convert_to_legacy(Model([opset.relu(r)], [x]))
    assert RemoveConstPass().run(net)
    layer = next(layer for layer in net.layers() if layer.type == "Reshape")
    assert layer.params["dims"] == [3, 4] and len(layer.inputs) == 1 and not layer.blobs


def test_gemm_to_fully_connected_and_bias_fusion():
    x = opset.parameter([4, 8], f32, "x")
    w = _w(8, 5)
    mm = opset.matmul(x, w, False, False)
    add = opset.add(mm, _w(5))
    net = convert_to_legacy(Model([add], [x]))
    assert ConvertGemmToFullyConnectedPass().run(net)
    fc = next(layer for layer in net.layers() if layer.type == "FullyConnected")
    np.testing.assert_array_equal(fc.blobs["weights"], w.T)
    assert FuseFullyConnectedWithEltwisePass().run(net)
    assert "biases" in fc.blobs and "Eltwise" not in net.types()


def test_f16_fully_connected_bias_keeps_the_weights_type():
    x = opset.parameter([4, 8], f16, "x")
    add = opset.add(opset.matmul(x, _w(8, 5).astype(np.float16), False, False),
                    _w(5).astype(np.float16))
    net = convert_to_legacy(Model([add], [x]))
    ConvertGemmToFullyConnectedPass().run(net)
    assert FuseFullyConnectedWithEltwisePass().run(net)
    fc = next(layer for layer in net.layers() if layer.type == "FullyConnected")
    assert fc.blobs["biases"].dtype == np.float16


def test_f16_fully_connected_without_bias_lowers_with_an_f16_zero_bias():
    """The graph compiler adds the zero bias FullyConnected needs, in the weights' type."""
    x = opset.parameter([4, 8], f16, "x")
    w = _w(8, 5).astype(np.float16)
    net = convert_to_legacy(Model([opset.matmul(x, w, False, False)], [x]))
    ConvertGemmToFullyConnectedPass().run(net)
    fc = next(n for n in legacy_to_model(net).get_ordered_ops() if n.type_name == "FullyConnected")
    assert fc.input_value(2).element_type == f16


def test_identity_inserted_for_input_to_output_and_fused():
    x = opset.parameter([2, 3], f32, "x")
    net = convert_to_legacy(Model([x.output(0)], [x]))
    assert InsertIdentityPass().run(net)
    assert net.types().count("Identity") == 1
    ident = next(layer for layer in net.layers() if layer.type == "Identity")
    net.layer(net.output_names[0])
    from netpass.legacy_passes import Layer
    second = Layer(name="id2", type="Identity", op_type="Identity", inputs=[("layer", ident.name, 0)],
                   out_shapes=ident.out_shapes, out_types=ident.out_types)
    net.add_layer(second)
    net.set_input(net.output_names[0], 0, ("layer", "id2", 0))
    assert FuseMultipleIdentitiesPass().run(net)
    assert net.types().count("Identity") == 1


def _crop_net(shape, axes, dim, offset):
    x = opset.parameter(shape, f32, "x")
    crop = opset.crop_ie(opset.relu(x), axes, dim, offset)
    crop.friendly_name = "crop"
    return convert_to_legacy(Model([opset.relu(crop)], [x]))


def test_aligned_crop_becomes_view():
    net = _crop_net([1, 64], [1], [16], [16])  # 16 floats = 64 bytes
    HandleCropAlignmentPass().run(net)
    crop = net.layer("crop")
    assert crop.type == "Crop" and crop.params["view"] and crop.params["offset_elements"] == 16


def test_unaligned_crop_becomes_affine_layer():
    net = _crop_net([1, 64], [1], [16], [5])
    HandleCropAlignmentPass().run(net)
    crop = net.layer("crop")
    assert crop.type == "Affine"
    x = RNG.uniform(0.1, 1.0, (1, 64)).astype(np.float32)
    np.testing.assert_array_equal(x @ crop.blobs["weights"].T, x[:, 5:21])


def test_f16_unaligned_crop_affine_weights_are_f16():
    x = opset.parameter([1, 64], f16, "x")
    crop = opset.crop_ie(opset.relu(x), [1], [16], [5])
    crop.friendly_name = "crop"
    net = convert_to_legacy(Model([opset.relu(crop)], [x]))
    HandleCropAlignmentPass().run(net)
    assert net.layer("crop").type == "Affine"
    assert net.layer("crop").blobs["weights"].dtype == np.float16


def test_pass_manager_runs_one_phase_and_logs():
    net = convert_to_legacy(conv_relu_pool_model())
    pm = PassManager(net, run_before_copy=False)
    pm.register_pass(RemoveSingleInputConcatPass)  # before-copy: skipped in this phase
    pm.register_pass(ReorderActivationAndPoolingPass)
    assert pm.run() == 1
    assert pm.log == ["PASS: 1/2: ReorderActivationAndPoolingPass (changed)"]


def test_pass_manager_dumps_each_pass(tmp_path):
    net = convert_to_legacy(conv_relu_pool_model())
    run_legacy_passes(net, dump_dir=tmp_path)
    dots = sorted(p.name for p in tmp_path.glob("*.dot"))
    assert dots and all(p.startswith("legacy_") for p in dots)
    assert "<layer" in next(tmp_path.glob("*.xml")).read_text()


def test_cycle_is_reported():
    net = convert_to_legacy(conv_relu_pool_model())
    net.graph.add_edge("pool", "conv", out_port=0, in_port=9)
    pm = PassManager(net)
    pm.register_pass(ReorderActivationAndPoolingPass)
    with pytest.raises(NetpassError, match="cycle"):
        pm.run()


def test_layers_sort_as_networkx_orders_them():
    """sorted_layers gives the lexicographically smallest topological order (networkx's),
    with repeated edges between a pair (Add(x, x)) and names that sort against their order."""
    import random

    import networkx as nx

    from netpass.legacy_passes.layer_graph import Layer
    rng = random.Random(3)
    net = LegacyNetwork()
    names: list[str] = []
    for i in range(400):
        name = f"{rng.choice('zyxabc')}{rng.randrange(1000)}_{i}"
        inputs = [("layer", rng.choice(names[-20:]), 0) for _ in range(rng.randrange(3))] \
            if names else []
        net.add_layer(Layer(name, "X", "X", inputs=inputs))
        names.append(name)
    want = list(nx.lexicographical_topological_sort(net.graph))
    assert [layer.name for layer in net.sorted_layers()] == want
    assert want != names  # (the tie-break by name is what is checked)


def test_network_has_parameters_as_inputs():
    m = conv_relu_pool_model()
    assert isinstance(m.parameters[0], Parameter)
    assert isinstance(convert_to_legacy(m), LegacyNetwork)
