"""Every kernel template on PoCL: one-op models, one request, two input shapes each, outputs
equal the numpy reference within 1e-4 relative L2, and the op ran as a kernel (no host
fallback) where the runtime has one."""
from __future__ import annotations

import numpy as np
import pytest
from graph_blocks import randn_f32

from netpass import Model, opset
from netpass.testing import RUNTIME_DEVICE

pocl_only = pytest.mark.skipif(RUNTIME_DEVICE != "CPU", reason="checks the kernel choices on PoCL")


def _model(build, *params):
    out = build(*params)
    return Model([opset.result(out, name="y")], list(params))


def _param(name, rank, dtype=np.float32, dims=None):
    return opset.parameter(dims or [-1] * rank, dtype, name=name)


UNARY = ["relu", "sigmoid", "tanh", "exp", "abs", "negative", "erf", "floor", "ceiling", "sin",
         "cos", "softsign", "hswish", "hsigmoid", "softplus", "sign"]


@pytest.mark.parametrize("fn", UNARY)
def test_unary(fn, run_shapes, rng):
    x = _param("x", 3)
    req = run_shapes(_model(getattr(opset, fn), x),
                     [{"x": randn_f32(rng, 2, 3, 5)}, {"x": randn_f32(rng, 1, 4, 7)}])
    assert req.stats["host_fallbacks"] == 0


@pytest.mark.parametrize("fn", ["add", "subtract", "multiply", "maximum", "minimum",
                                "squared_difference", "divide"])
def test_binary_broadcast(fn, run_shapes, rng):
    a, b = _param("a", 3), _param("b", 2)
    req = run_shapes(_model(getattr(opset, fn), a, b),
                     [{"a": randn_f32(rng, 2, 3, 4), "b": randn_f32(rng, 1, 4) + 3},
                      {"a": randn_f32(rng, 3, 1, 5), "b": randn_f32(rng, 6, 5) + 3}])
    assert req.stats["host_fallbacks"] == 0


@pytest.mark.parametrize("fn", ["equal", "less", "greater_equal"])
def test_comparison(fn, run_shapes, rng):
    a, b = _param("a", 2), _param("b", 2)
    feeds = [{"a": np.round(randn_f32(rng, 3, 4)), "b": np.round(randn_f32(rng, 3, 4))},
             {"a": np.round(randn_f32(rng, 5, 2)), "b": np.round(randn_f32(rng, 1, 2))}]
    run_shapes(_model(getattr(opset, fn), a, b), feeds)


def test_select_and_logical(run_shapes, rng):
    a, b = _param("a", 2), _param("b", 2)
    cond = opset.logical_and(opset.greater(a, b), opset.less(a, np.float32(1.0)))
    model = _model(lambda a, b: opset.select(cond, a, b), a, b)
    run_shapes(model, [{"a": randn_f32(rng, 3, 4), "b": randn_f32(rng, 3, 4)}, {"a": randn_f32(rng, 2, 7), "b": randn_f32(rng, 2, 7)}])


def test_clamp_elu_gelu(run_shapes, rng):
    x = _param("x", 2)
    model = _model(lambda x: opset.gelu(opset.elu(opset.clamp(x, -1.5, 2.0), 0.7), "tanh"), x)
    run_shapes(model, [{"x": randn_f32(rng, 3, 8)}, {"x": randn_f32(rng, 5, 2)}])


def test_convert_int(run_shapes, rng):
    x = _param("x", 2)
    model = _model(lambda x: opset.add(opset.convert(x, "i32"), np.int32(3)), x)
    run_shapes(model, [{"x": 5 * randn_f32(rng, 3, 4)}, {"x": 5 * randn_f32(rng, 6, 1)}])


@pytest.mark.parametrize("fn,axes,keep", [("reduce_sum", [1], False), ("reduce_mean", [-1], True),
                                          ("reduce_max", [0, 1], False), ("reduce_min", [2], True),
                                          ("reduce_prod", [1], True), ("reduce_l2", [2], False)])
def test_reductions(fn, axes, keep, run_shapes, rng):
    x = _param("x", 3)
    model = _model(lambda x: getattr(opset, fn)(x, np.array(axes, np.int64), keep), x)
    req = run_shapes(model, [{"x": randn_f32(rng, 2, 3, 4)}, {"x": randn_f32(rng, 3, 70, 5)}])
    assert req.stats["host_fallbacks"] == 0


@pytest.mark.parametrize("axis", [-1, 1])
def test_softmax(axis, run_shapes, rng):
    x = _param("x", 3)
    req = run_shapes(_model(lambda x: opset.softmax(x, axis), x),
                     [{"x": randn_f32(rng, 2, 3, 5)}, {"x": randn_f32(rng, 1, 130, 9)}])
    assert req.stats["host_fallbacks"] == 0


def test_log_softmax(run_shapes, rng):
    x = _param("x", 2)
    run_shapes(_model(lambda x: opset.log_softmax(x, -1), x), [{"x": randn_f32(rng, 3, 5)}, {"x": randn_f32(rng, 2, 100)}])


def test_mvn(run_shapes, rng):
    x = _param("x", 3)
    model = _model(lambda x: opset.mvn(x, np.array([-1], np.int64), True, 1e-5, "inside_sqrt"), x)
    req = run_shapes(model, [{"x": randn_f32(rng, 2, 3, 16)}, {"x": randn_f32(rng, 1, 5, 200)}])
    assert req.stats["host_fallbacks"] == 0


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul_batched(ta, tb, run_shapes, rng):
    a, b = _param("a", 3), _param("b", 3)
    model = _model(lambda a, b: opset.matmul(a, b, ta, tb), a, b)
    feeds = []
    for bt, m, k, n in ((2, 3, 5, 4), (1, 70, 33, 65)):
        sa = (bt, k, m) if ta else (bt, m, k)
        sb = (bt, n, k) if tb else (bt, k, n)
        feeds.append({"a": randn_f32(rng, *sa), "b": randn_f32(rng, *sb)})
    req = run_shapes(model, feeds)
    assert req.stats["host_fallbacks"] == 0


def test_matmul_broadcast_batch_with_fused_bias_relu(run_shapes, rng):
    a = _param("a", 4)
    w = randn_f32(rng, 16, 8)
    model = _model(lambda a: opset.relu(opset.add(opset.matmul(a, w, False, False), randn_f32(rng, 8))), a)
    req = run_shapes(model, [{"a": randn_f32(rng, 2, 3, 5, 16)}, {"a": randn_f32(rng, 1, 2, 9, 16)}])
    assert req.stats["fused"] == 4  # the Add and the Relu, twice


def test_convolution_with_fused_bias(run_shapes, rng):
    x = _param("x", 4, dims=[-1, 3, -1, -1])
    w = randn_f32(rng, 4, 3, 3, 3)
    model = _model(lambda x: opset.relu(opset.add(
        opset.convolution(x, w, [1, 2], [1, 0], [1, 1], [1, 1]), randn_f32(rng, 1, 4, 1, 1))), x)
    req = run_shapes(model, [{"x": randn_f32(rng, 1, 3, 8, 9)}, {"x": randn_f32(rng, 2, 3, 5, 12)}])
    assert req.stats["host_fallbacks"] == 0


def test_group_convolution(run_shapes, rng):
    x = _param("x", 4, dims=[-1, 4, -1, -1])
    w = randn_f32(rng, 2, 3, 2, 3, 3)
    model = _model(lambda x: opset.group_convolution(x, w, [1, 1], [1, 1], [1, 1], [1, 1]), x)
    run_shapes(model, [{"x": randn_f32(rng, 1, 4, 6, 6)}, {"x": randn_f32(rng, 1, 4, 3, 7)}])


@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pooling(kind, run_shapes, rng):
    x = _param("x", 4, dims=[-1, 3, -1, -1])
    if kind == "max":
        build = lambda x: opset.max_pool(x, [2, 2], [1, 1], [1, 1], [0, 0], [3, 3]).output(0)  # noqa: E731
    else:
        build = lambda x: opset.avg_pool(x, [2, 2], [1, 1], [0, 0], [3, 3], True)  # noqa: E731
    req = run_shapes(_model(build, x), [{"x": randn_f32(rng, 1, 3, 7, 7)}, {"x": randn_f32(rng, 2, 3, 6, 9)}])
    assert req.stats["host_fallbacks"] == 0


def test_transpose_concat_split(run_shapes, rng):
    x, y = _param("x", 3), _param("y", 3)

    def build(x, y):
        t = opset.transpose(x, np.array([2, 0, 1], np.int64))
        c = opset.concat([t, opset.transpose(y, np.array([2, 0, 1], np.int64))], 1)
        parts = opset.split(c, np.int64(0), 2)
        return opset.add(parts.output(0), parts.output(1))
    run_shapes(_model(build, x, y), [{"x": randn_f32(rng, 2, 3, 4), "y": randn_f32(rng, 5, 3, 4)},
                                     {"x": randn_f32(rng, 1, 6, 2), "y": randn_f32(rng, 2, 6, 2)}])


def test_slice_pad_tile_broadcast(run_shapes, rng):
    x = _param("x", 2)

    def build(x):
        s = opset.slice(x, np.array([1, 0], np.int64), np.array([-1, 100], np.int64),
                        np.array([1, 2], np.int64))
        p = opset.pad(s, np.array([1, 0], np.int64), np.array([0, 2], np.int64), "constant",
                      np.float32(0.5))
        t = opset.tile(p, np.array([2, 1], np.int64))
        return opset.add(t, opset.broadcast(np.float32(1.0), np.array([1, 1], np.int64)))
    req = run_shapes(_model(build, x), [{"x": randn_f32(rng, 4, 5)}, {"x": randn_f32(rng, 7, 8)}])
    assert req.stats["host_fallbacks"] == 0


def test_transposes_keeping_the_innermost_dim(run_shapes, rng):
    """Strided copies whose last dim is contiguous on both sides and a multiple of 4 move 4
    elements per work-item (``copy4``): a transpose of odd outer dims, and one of a slice
    that starts one element into its input (a view at an odd offset: loads aligned to the
    element only)."""
    x = _param("x", 3, dims=[-1, 5, 8])
    flat = _param("flat", 1)
    i64 = lambda *v: np.array(v, np.int64)  # noqa: E731
    inner = opset.reshape(opset.slice(flat, i64(1), i64(1 + 3 * 7 * 4), i64(1)), i64(3, 7, 4), False)
    y = opset.add(opset.transpose(x, i64(1, 0, 2)), np.float32(1.0))
    z = opset.transpose(inner, i64(1, 0, 2))
    model = Model([opset.result(y, name="y"), opset.result(z, name="z")], [x, flat])
    req = run_shapes(model, [{"x": randn_f32(rng, 3, 5, 8), "flat": randn_f32(rng, 90)},
                             {"x": randn_f32(rng, 7, 5, 8), "flat": randn_f32(rng, 85)}])
    assert sum("void copy4(" in key[2] for key in req.network.kernel_objects) == 2
    assert req.stats["host_fallbacks"] == 0


def test_gather_embedding(run_shapes, rng):
    ids = opset.parameter([1, -1], np.int64, name="ids")
    table = randn_f32(rng, 10, 6)
    model = Model([opset.result(opset.gather(table, ids, np.int64(0)), name="y")], [ids])
    req = run_shapes(model, [{"ids": np.array([[1, 9, 3]], np.int64)},
                             {"ids": np.array([[0, 2, 2, 5, 8]], np.int64)}])
    assert req.stats["host_fallbacks"] == 0


@pytest.mark.parametrize("index,axis,view", [(0, 0, True), (2, 0, True), (-1, 0, True),
                                             (1, 1, True), (1, 2, False)])
def test_gather_of_one_constant_index(index, axis, view, run_shapes, rng):
    """q, k or v of a packed [3, S, B, D] projection (torch's MultiheadAttention export):
    one constant index on an axis with only size-1 dims before it is a contiguous piece, a
    view of the input (no launch); elsewhere the kernel runs. The piece feeds a kernel and
    is an output itself."""
    x = _param("x", 4, dims=[1, 3, -1, 4]) if axis else _param("x", 4, dims=[3, -1, 2, 4])
    doubled = opset.multiply(x, np.float32(2.0))
    piece = opset.gather(doubled, np.int64(index), np.int64(axis))
    model = Model([opset.result(opset.add(piece, np.float32(1.0)), name="y"),
                   opset.result(piece, name="piece")], [x])
    shapes = [(1, 3, 5, 4), (1, 3, 9, 4)] if axis else [(3, 5, 2, 4), (3, 7, 2, 4)]
    req = run_shapes(model, [{"x": randn_f32(rng, *s)} for s in shapes])
    gathers = sum("void gather(" in key[2] for key in req.network.kernel_objects)
    assert gathers == (0 if view else 1)
    assert req.stats["host_fallbacks"] == 0


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("dtype,idx_dtype", [(np.float32, np.int64), (np.int64, np.int32),
                                             (np.float16, np.int64)])
def test_gather_elements(axis, dtype, idx_dtype, run_shapes, rng):
    """GatherElements on its template: random data and indices in [-D, D) (negative ones count
    from the end), two shapes on one request, the axis dim of the indices longer and shorter
    than the data's; float16 moves as 16 bits (no cl_khr_fp16 needed)."""
    x = _param("x", 3, dtype)
    i = _param("i", 3, idx_dtype)
    model = _model(lambda x, i: opset.gather_elements(x, i, axis), x, i)
    feeds = []
    for shape, length in (((2, 5, 3), 7), ((3, 4, 6), 2)):
        d = shape[axis]
        ishape = list(shape)
        ishape[axis] = length
        data = (rng.standard_normal(shape) * 10).astype(dtype)
        feeds.append({"x": data, "i": rng.integers(-d, d, ishape).astype(idx_dtype)})
    req = run_shapes(model, feeds)
    assert req.stats["host_fallbacks"] == 0


def test_gather_elements_with_mismatched_dims_names_the_node(rng):
    """Data and indices that differ off the axis: the row's shape rule declines, the op's own
    shape inference raises, naming the op and the dims."""
    from netpass.errors import NetpassError
    from netpass.runtime import compile_program
    x, i = _param("x", 2), _param("i", 2, np.int64)
    req = compile_program(_model(lambda x, i: opset.gather_elements(x, i, 1), x, i),
                          RUNTIME_DEVICE).create_infer_request()
    with pytest.raises(NetpassError, match=r"GatherElements.*dim 0 differs"):
        req.infer({"x": randn_f32(rng, 3, 4), "i": rng.integers(0, 4, (2, 4))})


def test_legacy_layers(run_shapes, rng):
    x = _param("x", 2, dims=[-1, 6])
    w, b = randn_f32(rng, 5, 6), randn_f32(rng, 5)

    def build(x):
        fc = opset.fully_connected(x, w, b)
        p = opset.power_ie(fc, 2.0, 0.5, 1.0)
        e = opset.eltwise(p, fc, "prod")
        return opset.scale_shift_ie(opset.unsqueeze(e, np.array([2], np.int64)), randn_f32(rng, 5), randn_f32(rng, 5))
    req = run_shapes(_model(build, x), [{"x": randn_f32(rng, 3, 6)}, {"x": randn_f32(rng, 11, 6)}])
    assert req.stats["host_fallbacks"] == 0
    assert req.stats["weight_reorders"] == 1


def test_gna_convolution_and_pool(run_shapes, rng):
    x = _param("x", 4, dims=[1, -1, -1, 3])
    w = randn_f32(rng, 4, 2, 3, 3)

    def build(x):
        c = opset.gna_convolution(x, w, [1, 1], [0, 1], [0, 1], [1, 1], bias=randn_f32(rng, 4), activation="RELU")
        return opset.gna_max_pool(c, [1, 2], [0, 0], [0, 0], [1, 2])
    req = run_shapes(_model(build, x), [{"x": randn_f32(rng, 1, 4, 6, 3)}, {"x": randn_f32(rng, 1, 3, 9, 3)}])
    assert req.stats["host_fallbacks"] == 0


def test_host_fallback_is_counted(run_shapes, rng):
    """OneHot has no kernel: each infer runs it on the host."""
    x = _param("x", 2, np.int64)
    model = _model(lambda x: opset.one_hot(x, np.int64(5), np.float32(1), np.float32(0), -1), x)
    req = run_shapes(model, [{"x": rng.integers(0, 5, (3, 4))}, {"x": rng.integers(0, 5, (2, 9))}])
    assert req.stats["host_fallbacks"] == 2
    assert req.stats["host_fallback_kinds"] == {"OneHot": 2}


def test_fused_ops_apply_on_host_fallback(run_shapes, rng):
    x = _param("x", 3)
    # MVN over a non-contiguous axis pair has no kernel: the fused scale/shift must still apply
    model = _model(lambda x: opset.add(opset.multiply(
        opset.mvn(x, np.array([0, 2], np.int64), True, 1e-5, "inside_sqrt"), randn_f32(rng, 5)), randn_f32(rng, 5)), x)
    req = run_shapes(model, [{"x": randn_f32(rng, 2, 3, 5)}, {"x": randn_f32(rng, 4, 2, 5)}])
    assert req.stats["host_fallback_kinds"] == {"MVN": 2}


@pocl_only
def test_aligned_gpu_gemm_kernel_with_epilogue(rng, monkeypatch):
    """The float4 128x128 GEMM that GPUs use for aligned shapes, run on PoCL."""
    import netpass
    from netpass.runtime import compile_program
    a = _param("a", 3, dims=[-1, -1, 64])
    w, b = randn_f32(rng, 64, 256), randn_f32(rng, 256)
    model = _model(lambda a: opset.relu(opset.add(opset.matmul(a, w, False, False), b)), a)
    cm = compile_program(model, "CPU")
    monkeypatch.setattr(cm.engine, "is_gpu", True)
    req = cm.create_infer_request()
    for shape in ((2, 128, 64), (1, 256, 64), (1, 100, 64)):
        x = randn_f32(rng, *shape)
        np.testing.assert_allclose(req.infer({"a": x})["y"], netpass.reference.infer(model, {"a": x})["y"],
                                   rtol=1e-4, atol=1e-4)
    assert any("vload4(0, A" in src for src in cm.engine._programs)


@pocl_only
def test_pipelined_gpu_gemm_kernel_with_epilogue(rng, monkeypatch):
    """The staged-ring GEMM that NVIDIA GPUs use for aligned shapes, run on PoCL with plain
    copies filling the stages (PoCL has no cp.async): batched A and B, a fused epilogue."""
    import netpass
    from netpass.runtime import compile_program
    from netpass.runtime.kinds import matmul
    a, b = _param("a", 3, dims=[-1, -1, 64]), _param("b", 3, dims=[-1, 64, 256])
    bias = randn_f32(rng, 256)
    model = Model([opset.result(opset.relu(opset.add(opset.matmul(a, b, False, False), bias)), name="y")], [a, b])
    cm = compile_program(model, "CPU")
    monkeypatch.setattr(cm.engine, "is_gpu", True)
    monkeypatch.setattr(cm.engine, "cp_async", True)
    pipelined = matmul.gemm_pipelined
    monkeypatch.setattr(matmul, "gemm_pipelined", lambda *args: pipelined(*args[:-1], False))
    req = cm.create_infer_request()
    for batch, m in ((2, 128), (1, 256), (3, 128)):
        feeds = {"a": randn_f32(rng, batch, m, 64), "b": randn_f32(rng, batch, 64, 256)}
        np.testing.assert_allclose(req.infer(feeds)["y"], netpass.reference.infer(model, feeds)["y"],
                                   rtol=1e-4, atol=1e-4)
    assert any("#define STAGES" in src for src in cm.engine._programs)


def test_slice_with_negative_steps_and_variadic_split(run_shapes, rng):
    x = _param("x", 3)

    def build(x):
        s = opset.slice(x, np.array([-1, 1], np.int64), np.array([-100, 100], np.int64),
                        np.array([-2, 1], np.int64), np.array([2, 0], np.int64))
        parts = opset.variadic_split(s, np.int64(1), np.array([1, -1], np.int64))
        return opset.concat([parts.output(1), parts.output(0)], 1)
    req = run_shapes(_model(build, x), [{"x": randn_f32(rng, 3, 4, 7)}, {"x": randn_f32(rng, 2, 2, 4)}])
    assert req.stats["host_fallbacks"] == 0


def _rnn_weights(rng, gates, nd, hs, i_size, bias_blocks=None):
    w = randn_f32(rng, nd, gates * hs, i_size) * 0.5
    r = randn_f32(rng, nd, gates * hs, hs) * 0.5
    b = randn_f32(rng, nd, (bias_blocks or gates) * hs) * 0.5
    return w, r, b


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_lstm_sequence_kernel(direction, run_shapes, rng):
    nd, hs, i_size = (2 if direction == "bidirectional" else 1), 8, 5
    x = opset.parameter([-1, -1, i_size], np.float32, name="x")
    h0 = opset.parameter([-1, nd, hs], np.float32, name="h0")
    c0 = opset.parameter([-1, nd, hs], np.float32, name="c0")
    lens = opset.parameter([-1], np.int32, name="lens")
    w, r, b = _rnn_weights(rng, 4, nd, hs, i_size)
    seq = opset.lstm_sequence(x, h0, c0, lens, w, r, b, hs, direction)
    model = Model([opset.result(o, name=f"o{i}") for i, o in enumerate(seq.outputs())], [x, h0, c0, lens])
    feeds = [{"x": randn_f32(rng, bt, t, i_size), "h0": randn_f32(rng, bt, nd, hs), "c0": randn_f32(rng, bt, nd, hs),
              "lens": np.array(ls, np.int32)} for bt, t, ls in ((2, 4, [4, 2]), (3, 7, [7, 1, 5]))]
    req = run_shapes(model, feeds)
    assert req.stats["host_fallbacks"] == 0


@pytest.mark.parametrize("lbr", [False, True])
def test_gru_sequence_kernel(lbr, run_shapes, rng):
    hs, i_size = 6, 4
    x = opset.parameter([-1, -1, i_size], np.float32, name="x")
    h0 = opset.parameter([-1, 1, hs], np.float32, name="h0")
    lens = opset.parameter([-1], np.int64, name="lens")
    w, r, b = _rnn_weights(rng, 3, 1, hs, i_size, 4 if lbr else 3)
    seq = opset.gru_sequence(x, h0, lens, w, r, b, hs, "forward", linear_before_reset=lbr)
    model = Model([opset.result(o, name=f"o{i}") for i, o in enumerate(seq.outputs())], [x, h0, lens])
    feeds = [{"x": randn_f32(rng, bt, t, i_size), "h0": randn_f32(rng, bt, 1, hs), "lens": np.array(ls, np.int64)}
             for bt, t, ls in ((2, 3, [3, 2]), (1, 6, [6]))]
    req = run_shapes(model, feeds)
    assert req.stats["host_fallbacks"] == 0


def test_lstm_and_rnn_cells(run_shapes, rng):
    hs, i_size = 7, 3
    x = opset.parameter([-1, i_size], np.float32, name="x")
    h0 = opset.parameter([-1, hs], np.float32, name="h0")
    c0 = opset.parameter([-1, hs], np.float32, name="c0")
    w, r, b = (a[0] for a in _rnn_weights(rng, 4, 1, hs, i_size))
    cell = opset.lstm_cell(x, h0, c0, w, r, b, hs)
    wr, rr, br = (a[0] for a in _rnn_weights(rng, 1, 1, hs, i_size))
    rnn = opset.rnn_cell(x, h0, wr, rr, br, hs)
    outs = [opset.result(cell.output(0), name="h"), opset.result(cell.output(1), name="c"),
            opset.result(rnn, name="hr")]
    model = Model(outs, [x, h0, c0])
    feeds = [{"x": randn_f32(rng, bt, i_size), "h0": randn_f32(rng, bt, hs), "c0": randn_f32(rng, bt, hs)} for bt in (1, 4)]
    req = run_shapes(model, feeds)
    assert req.stats["host_fallbacks"] == 0
