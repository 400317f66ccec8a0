"""Property: the GNA layout blocks of ``test_gna_blocks_property`` written in other ONNX forms
than ``netpass.synthetic`` writes them, as another exporter or a hand-written model would:
opsets 13 and 17, a scalar or per-channel scale, Split by sizes input or ``num_outputs`` into
2-4 pieces, negative axes, int32 or int64 Gather indices on axis 1 or -3 (-1 or 3 in NHWC),
Sigmoid/Tanh/Relu, either operand order of Add and Mul, Pad in constant, reflect or edge mode
with a Slice that ends at a negative or an open end, ReduceMean with keepdims or through an
Unsqueeze, Reshape targets with 0 or -1, shapes whose H, W and C differ. After
GnaTransformationsPipeline + split_pre_post_processing: no Gather and no Transpose GNA cannot
run in the main model, and the pre -> main -> post chain computes what onnxruntime computes on
the original (random inputs, relative L2 error <= 1e-5)."""
from __future__ import annotations

import numpy as np
import onnx
from gna_graphs import OnnxGraph, check_gna_flow
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

SHAPES = [(1, 8, 8, 8), (1, 4, 8, 8), (1, 16, 4, 4), (1, 6, 5, 7), (1, 12, 6, 6)]


class _Graph(OnnxGraph):
    """The generator's graph: its blocks' random forms."""

    def either(self, op_type: str, a: str, b: str) -> str:
        return self.op(op_type, [a, b] if self.rng.random() < 0.5 else [b, a])

    def split(self, x: str, sizes: list, axis: int) -> list:
        if len(set(sizes)) == 1 and self.opset >= 18 and self.rng.random() < 0.5:
            return self.op("Split", [x], len(sizes), axis=axis, num_outputs=len(sizes))
        return self.op("Split", [x, self.const(np.array(sizes, np.int64))], len(sizes), axis=axis)

    def act(self, x: str) -> str:
        return self.op(str(self.rng.choice(["Sigmoid", "Tanh", "Relu"])), [x])

    def pieces(self, c: int) -> list:
        k = int(self.rng.integers(2, min(4, c) + 1))
        cuts = sorted(self.rng.choice(np.arange(1, c), k - 1, replace=False).tolist())
        return [b - a for a, b in zip([0, *cuts], [*cuts, c])]

    def gather(self, x: str, c: int, axis: int) -> str:
        idx = self.rng.permutation(c).astype(np.int64 if self.rng.random() < 0.5 else np.int32)
        return self.op("Gather", [x, self.const(idx)], axis=axis if self.rng.random() < 0.5
                       else axis - 4)


def _shuffle(g: _Graph, x: str, shape: tuple) -> tuple[str, tuple]:
    c = shape[1]
    t = g.op("Transpose", [x], perm=[0, 2, 3, 1])
    scale = g.rng.uniform(0.5, 1.5, c) if g.rng.random() < 0.6 else g.rng.uniform(0.5, 1.5)
    m = g.either("Mul", t, g.const(np.asarray(scale, np.float32)))
    parts = g.split(m, g.pieces(c), 3 if g.rng.random() < 0.5 else -1)
    cat = g.op("Concat", [g.act(p) for p in parts], axis=3 if g.rng.random() < 0.5 else -1)
    back = g.gather(g.op("Transpose", [cat], perm=[0, 3, 1, 2]), c, 1)
    return g.either("Mul", g.either("Add", back, x), g.const(np.array(0.5, np.float32))), shape


def _slice_pad(g: _Graph, x: str, shape: tuple) -> tuple[str, tuple]:
    h, w = shape[2:]
    mode = str(g.rng.choice(["constant", "reflect", "edge"]))
    p = g.op("Pad", [x, g.const(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))], mode=mode)
    oh, ow = int(g.rng.integers(0, 3)), int(g.rng.integers(0, 3))
    ends = [oh + h, ow + w]
    if g.rng.random() < 0.5:  # (the same ends from the back, or open)
        ends = [e - (d + 2) if e < d + 2 else 2 ** 31 - 1 for e, d in zip(ends, (h, w))]
    axes = [2, 3] if g.rng.random() < 0.5 else [-2, -1]
    return g.op("Slice", [p, g.const(np.array([oh, ow], np.int64)),
                          g.const(np.array(ends, np.int64)), g.const(np.array(axes, np.int64))]), shape


def _reduce_reshape(g: _Graph, x: str, shape: tuple) -> tuple[str, tuple]:
    n, c, h, w = shape
    if g.rng.random() < 0.5:
        mean = g.op("ReduceMean", [x], axes=[1], keepdims=1)
    else:
        mean = g.op("Unsqueeze", [g.op("ReduceMean", [x], axes=[1], keepdims=0),
                                  g.const(np.array([1], np.int64))])
    flat = [n, c, -1] if g.rng.random() < 0.5 else [0, c, h * w]
    r = g.act(g.op("Reshape", [g.either("Add", x, mean), g.const(np.array(flat, np.int64))]))
    back = [n, c, h, w] if g.rng.random() < 0.5 else [0, c, h, -1]
    return g.op("Reshape", [r, g.const(np.array(back, np.int64))]), shape


def _channel_shuffle(g: _Graph, x: str, shape: tuple) -> tuple[str, tuple]:
    n, c, h, w = shape
    parts = g.split(x, g.pieces(c), 1)
    cat = g.op("Concat", [g.act(p) for p in parts], axis=1)
    shuffled = g.gather(g.op("Transpose", [cat], perm=[0, 2, 3, 1]), c, 3)
    if g.rng.random() < 0.5:
        return g.op("Transpose", [shuffled], perm=[0, 3, 1, 2]), shape
    return shuffled, (n, h, w, c)


BLOCKS = [_shuffle, _slice_pad, _reduce_reshape, _channel_shuffle]


def block_forms_onnx(seed: int, count: int, shape: tuple) -> bytes:
    """ONNX bytes of ``count`` blocks in forms drawn with ``seed`` (an NHWC tail goes back to
    NCHW before the next block that is not a channel shuffle)."""
    rng = np.random.default_rng(seed)
    g = _Graph(rng, int(rng.choice([13, 17])))
    x, cur = "x", shape
    for _ in range(count):
        block = BLOCKS[int(rng.integers(0, len(BLOCKS)))]
        if cur != shape:
            x, cur = g.op("Transpose", [x], perm=[0, 3, 1, 2]), shape
        x, cur = block(g, x, cur)
    g.nodes.append(helper.make_node("Identity", [x], ["y"], name="output"))
    graph = helper.make_graph(g.nodes, "block_forms",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(cur))],
                              g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", g.opset)], ir_version=8)
    onnx.checker.check_model(model)
    return model.SerializeToString()


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(shape=st.sampled_from(SHAPES), count=st.integers(1, 24), seed=st.integers(0, 2 ** 31 - 1))
def test_block_forms_leave_no_layout_op_inside(shape, count, seed):
    check_gna_flow(block_forms_onnx(seed, count, shape))
