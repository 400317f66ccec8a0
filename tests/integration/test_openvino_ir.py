"""IR written by Serialize loads in the real OpenVINO, compiles on its CPU plugin and gives the
outputs of netpass's reference (rtol 1e-4, atol 1e-5), for the example models and for small
inline graphs of standard ops. Ops that have not landed in netpass yet are skipped."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import netpass
from netpass import Model, opset
from netpass.errors import NetpassError, UnsupportedOpError
from netpass.passes.serialize import Serialize
from netpass.testing import random_inputs

ov = pytest.importorskip("openvino")

RTOL, ATOL = 1e-4, 1e-5
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RNG = np.random.default_rng(7)


def _w(*shape: int) -> np.ndarray:
    return RNG.uniform(-1.0, 1.0, size=shape).astype(np.float32)


def _x(shape, name="x", dtype=np.float32):
    return opset.parameter(shape, dtype, name=name)


def _check_in_openvino(model: Model, tmp_path: Path, xml: Path | None = None) -> None:
    """OpenVINO's CPU outputs for ``xml`` (default: ``model`` serialized) equal netpass's
    reference outputs for ``model``."""
    if xml is None:
        xml = tmp_path / "model.xml"
        Serialize(xml).run_on_model(model)
    feeds = random_inputs(model, seed=3)
    expected = netpass.reference.infer(model, feeds)
    core = ov.Core()
    # f32 inference: the CPU plugin would otherwise pick bf16/f16 where the CPU has them.
    compiled = core.compile_model(core.read_model(str(xml)), "CPU",
                                  {"INFERENCE_PRECISION_HINT": "f32"})
    got = compiled([feeds[n] for n in model.input_names])
    assert len(compiled.outputs) == len(expected)
    for i, name in enumerate(model.output_names):
        out = np.asarray(got[compiled.output(i)])
        ref = expected[name]
        assert out.shape == ref.shape, f"output '{name}': {out.shape} vs {ref.shape}"
        np.testing.assert_allclose(out.astype(np.float64), ref.astype(np.float64),
                                   rtol=RTOL, atol=ATOL, err_msg=f"output '{name}'")


def _elementwise() -> Model:
    x, y = _x([2, 3, 4]), _x([1, 3, 1], "y")
    a = opset.add(x, y)
    b = opset.multiply(opset.subtract(a, opset.constant(_w(4))), y)
    c = opset.maximum(opset.relu(b), opset.sigmoid(a))
    d = opset.divide(opset.exp(opset.tanh(c)), opset.constant(np.float32(2.5)))
    e = opset.clamp(opset.prelu(d, opset.constant(np.float32([0.1]))), -0.5, 0.75)
    return Model([e, opset.gelu(x), opset.softplus(a)], [x, y], "elementwise")


def _comparison_select() -> Model:
    x, y = _x([3, 5]), _x([3, 5], "y")
    zero = opset.constant(np.float32(0.0))
    cond = opset.logical_or(opset.greater(x, y), opset.less_equal(x, zero))
    s = opset.select(cond, x, opset.negative(y))
    return Model([s, opset.convert(cond, "f32")], [x, y], "compare")


def _convolution() -> Model:
    x = _x([1, 3, 9, 9])
    c1 = opset.convolution(x, opset.constant(_w(4, 3, 3, 3)), [1, 1], [1, 0], [1, 2], [1, 1])
    c2 = opset.convolution(c1, opset.constant(_w(4, 4, 3, 3)), [2, 2], [0, 0], [0, 0], [1, 1],
                           auto_pad="same_upper")
    g = opset.group_convolution(c2, opset.constant(_w(2, 2, 2, 1, 1)), [1, 1], [0, 0], [0, 0],
                                [1, 1])
    return Model([opset.relu(g)], [x], "conv")


def _deconvolution() -> Model:
    x = _x([1, 2, 4, 4])
    d = opset.convolution_backprop_data(x, opset.constant(_w(2, 3, 3, 3)), [2, 2],
                                        pads_begin=[1, 1], pads_end=[1, 1], dilations=[1, 1],
                                        output_padding=[1, 1])
    return Model([d], [x], "deconv")


def _movement() -> Model:
    x = _x([2, 3, 4, 5])
    t = opset.transpose(x, opset.constant(np.array([0, 2, 3, 1], np.int64)))
    r = opset.reshape(t, opset.constant(np.array([0, -1, 3], np.int64)), True)
    parts = opset.split(r, opset.constant(np.int64(1)), 2)
    cat = opset.concat([parts.output(1), parts.output(0)], 2)
    sq = opset.unsqueeze(cat, opset.constant(np.array([1], np.int64)))
    tl = opset.tile(opset.squeeze(sq, opset.constant(np.array([1], np.int64))),
                    opset.constant(np.array([1, 1, 2], np.int64)))
    return Model([tl], [x], "movement")


def _slicing() -> Model:
    x = _x([4, 6, 8])
    s = opset.slice(x, opset.constant(np.array([1, 0], np.int64)),
                    opset.constant(np.array([4, 8], np.int64)),
                    opset.constant(np.array([2, 3], np.int64)),
                    opset.constant(np.array([0, 2], np.int64)))
    ss = opset.strided_slice(x, opset.constant(np.array([0, 1, 0], np.int64)),
                             opset.constant(np.array([0, 5, 8], np.int64)),
                             opset.constant(np.array([1, 2, 2], np.int64)), [1, 0, 0], [1, 0, 0])
    vs = opset.variadic_split(x, opset.constant(np.int64(2)),
                              opset.constant(np.array([3, 5], np.int64)))
    return Model([s, ss, vs.output(0), vs.output(1)], [x], "slicing")


def _pad_broadcast_space() -> Model:
    x = _x([1, 4, 2, 2])
    p = opset.pad(x, opset.constant(np.array([0, 0, 1, 0], np.int64)),
                  opset.constant(np.array([0, 0, 0, 1], np.int64)), "reflect")
    b = opset.broadcast(opset.constant(_w(1, 1, 4)),
                        opset.constant(np.array([1, 4, 3, 4], np.int64)))
    d2s = opset.depth_to_space(x, "blocks_first", 2)
    s2d = opset.space_to_depth(d2s, "depth_first", 2)
    return Model([p, b, s2d], [x], "pad")


def _lstm_cell() -> Model:
    x, h, c = _x([2, 3]), _x([2, 4], "h"), _x([2, 4], "c")
    cell = opset.lstm_cell(x, h, c, opset.constant(_w(16, 3)), opset.constant(_w(16, 4)),
                           opset.constant(_w(16)), 4)
    return Model([cell.output(0), cell.output(1)], [x, h, c], "lstm_cell")


def _gru_sequence() -> Model:
    x, h = _x([2, 5, 3]), _x([2, 1, 4], "h")
    seq = opset.gru_sequence(x, h, opset.constant(np.array([5, 3], np.int32)),
                             opset.constant(_w(1, 12, 3)), opset.constant(_w(1, 12, 4)),
                             opset.constant(_w(1, 12)), 4, "forward")
    return Model([seq.output(0), seq.output(1)], [x, h], "gru_seq")


def _matmul_reduce_softmax() -> Model:
    x = _x([2, 3, 4])
    m = opset.matmul(x, opset.constant(_w(5, 4)), False, True)
    s = opset.softmax(m, -1)
    r = opset.reduce_mean(s, opset.constant(np.array([1], np.int64)), True)
    total = opset.reduce_sum(m, opset.constant(np.array([2], np.int64)), False)
    return Model([r, total], [x], "mm")


def _pooling() -> Model:
    x = _x([1, 2, 7, 7])
    mp = opset.max_pool(x, [2, 2], [1, 1], [0, 0], [1, 1], [3, 3])
    ap = opset.avg_pool(mp.output(0), [1, 1], [1, 1], [1, 1], [3, 3], True)
    return Model([ap], [x], "pool")


def _pooling_ceil_drops_last_window() -> Model:
    x = _x([1, 2, 2, 7])
    mp = opset.max_pool(x, [2, 3], [1, 1], [0, 1], [0, 0], [1, 2], rounding_type="ceil")
    ap = opset.avg_pool(x, [2, 3], [0, 1], [0, 0], [1, 2], False, rounding_type="ceil")
    return Model([mp.output(0), ap], [x], "pool_ceil")


def _shape_math() -> Model:
    x = _x([2, 3, 4])
    shp = opset.shape_of(x, "i64")
    g = opset.gather(shp, opset.constant(np.array([0, 2], np.int64)), opset.constant(np.int64(0)))
    r = opset.reshape(x, opset.concat([g, opset.constant(np.array([-1], np.int64))], 0), False)
    return Model([r], [x], "shape_math")


def _normalization() -> Model:
    x = _x([2, 3, 4, 4])
    bn = opset.batch_norm_inference(x, opset.constant(_w(3)), opset.constant(_w(3)),
                                    opset.constant(_w(3)), opset.constant(np.abs(_w(3)) + 0.5),
                                    1e-5)
    mvn = opset.mvn(bn, opset.constant(np.array([2, 3], np.int64)), True, 1e-6, "inside_sqrt")
    l2 = opset.normalize_l2(x, opset.constant(np.array([1], np.int64)), 1e-10, "max")
    return Model([mvn, l2, opset.log_softmax(x, 1)], [x], "norm")


def _indexing() -> Model:
    x = _x([3, 4])
    ge = opset.gather_elements(x, opset.constant(np.array([[0, 2], [1, 3], [3, 0]], np.int64)), 1)
    gnd = opset.gather_nd(x, opset.constant(np.array([[2, 1], [0, 3]], np.int64)))
    sc = opset.scatter_elements_update(x, opset.constant(np.array([[1], [0], [2]], np.int64)),
                                       opset.constant(_w(3, 1)), opset.constant(np.int64(1)), "sum")
    tk = opset.topk(x, opset.constant(np.int64(2)), 1, "max", "value")
    cs = opset.cumsum(x, opset.constant(np.int64(1)), True, True)
    return Model([ge, gnd, sc, tk.output(0), tk.output(1), cs], [x], "indexing")


def _reductions_einsum() -> Model:
    x = _x([2, 3, 4])
    axes = opset.constant(np.array([0, 2], np.int64))
    e = opset.einsum([x, opset.constant(_w(4, 5))], "abc,cd->abd")
    return Model([opset.reduce_l2(x, axes, True), opset.reduce_prod(x, axes), e,
                  opset.reduce_logical_and(opset.greater(x, opset.constant(np.float32(-0.5))),
                                           axes)], [x], "reduce")


INLINE: dict[str, Callable[[], Model]] = {
    f.__name__.lstrip("_"): f for f in (
        _elementwise, _comparison_select, _convolution, _deconvolution, _movement, _slicing,
        _pad_broadcast_space, _lstm_cell, _gru_sequence, _matmul_reduce_softmax, _pooling,
        _pooling_ceil_drops_last_window,
        _shape_math, _normalization, _indexing, _reductions_einsum)
}


@pytest.mark.parametrize("case", sorted(INLINE))
def test_inline_graph_runs_in_openvino(case: str, tmp_path: Path) -> None:
    try:
        model = INLINE[case]()
    except (AttributeError, UnsupportedOpError) as e:
        pytest.skip(f"op not available in netpass yet: {e}")
    _check_in_openvino(model, tmp_path)


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.onnx")), ids=lambda p: p.stem)
def test_example_model_runs_in_openvino(path: Path, tmp_path: Path) -> None:
    try:
        model = netpass.read_model(path)
    except NetpassError as e:
        pytest.skip(f"netpass cannot import this example yet: {e}")
    _check_in_openvino(model, tmp_path)


def test_empty_constant_loads_in_openvino(tmp_path: Path) -> None:
    x = _x([2, 3, 4])
    model = Model([opset.transpose(x, opset.constant(np.zeros(0, np.int64)))], [x], "reverse")
    _check_in_openvino(model, tmp_path)


def test_dynamic_batch_runs_in_openvino(tmp_path: Path) -> None:
    x = _x([-1, 3, 5])
    model = Model([opset.add(opset.relu(x), opset.constant(_w(5)))], [x], "dyn")
    _check_in_openvino(model, tmp_path)


def test_ir_written_by_openvino_reads_into_netpass(tmp_path: Path) -> None:
    import openvino.opset8 as ov8
    x = ov8.parameter([1, 2, 6, 6], np.float32, name="x")
    conv = ov8.convolution(x, ov8.constant(_w(3, 2, 3, 3)), [1, 1], [1, 1], [1, 1], [1, 1])
    pool = ov8.avg_pool(ov8.relu(conv), [2, 2], [0, 0], [0, 0], [2, 2], True)
    sm = ov8.softmax(ov8.prelu(pool, ov8.constant(np.float32([0.2]))), 1)
    xml = tmp_path / "ov.xml"
    ov.save_model(ov.Model([sm.output(0)], [x], "from_ov"), str(xml), compress_to_fp16=False)
    model = netpass.read_model(xml)
    assert [n.type_name for n in model.get_ordered_ops()].count("Softmax") == 1
    _check_in_openvino(model, tmp_path, xml)
