"""Write the example models committed under ``examples/`` (onnx.helper only; no torch).

    python examples/make_examples.py [OUT_DIR]

Weights come from a seeded numpy generator, so the files are byte-for-byte reproducible.
Every model is ONNX opset 17, IR version 8 (onnxruntime refuses newer IR versions):

- ``kws_cnn.onnx``: keyword spotting CNN on MFCC frames, input ``input`` [1,1,49,10].
- ``lstm_speech.onnx``: acoustic model, input ``features`` [1,time,40] -> LSTM -> MatMul.
- ``transformer_block.onnx``: pre-norm transformer block, input ``x`` [batch,seq,64], with the
  Shape -> Gather -> Concat -> Reshape head-split sub-graph that torch exports produce.
- ``transpose_heavy.onnx``: NCHW <-> NHWC Transposes around elementwise ops, Split/Concat,
  Slice, and a Reshape right after a Transpose (what the GNA layout passes must sink away).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8


class GraphBuilder:
    """Collects nodes and seeded initializers; names every tensor it creates."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._n = 0

    def name(self, hint: str) -> str:
        self._n += 1
        return f"{hint}_{self._n}"

    def const(self, value: np.ndarray, hint: str = "c") -> str:
        name = self.name(hint)
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def weight(self, shape: tuple[int, ...], scale: float | None = None, hint: str = "w") -> str:
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
        s = scale if scale is not None else 1.0 / np.sqrt(max(fan_in, 1))
        return self.const((self.rng.standard_normal(shape) * s).astype(np.float32), hint)

    def ints(self, values: list[int], hint: str = "i") -> str:
        return self.const(np.array(values, dtype=np.int64), hint)

    def op(self, op_type: str, inputs: list[str], n_out: int = 1, out: str | None = None,
           **attrs) -> str | list[str]:
        outs = [out] if out is not None else [self.name(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=self.name(op_type),
                                           **attrs))
        return outs[0] if n_out == 1 else outs

    def model(self, name: str, inputs: list[onnx.ValueInfoProto],
              outputs: list[onnx.ValueInfoProto]) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        proto = helper.make_model(graph, producer_name="netpass-examples",
                                  opset_imports=[helper.make_opsetid("", OPSET)])
        proto.ir_version = IR_VERSION
        onnx.checker.check_model(proto, full_check=True)
        return proto


def kws_cnn() -> onnx.ModelProto:
    g = GraphBuilder(seed=1)
    x = "input"
    channels = [1, 8, 16]
    for cin, cout in zip(channels, channels[1:]):
        x = g.op("Conv", [x, g.weight((cout, cin, 3, 3)), g.weight((cout,), 0.1)],
                 kernel_shape=[3, 3], pads=[1, 1, 1, 1])
        x = g.op("BatchNormalization",
                 [x, g.const((1 + 0.1 * g.rng.standard_normal(cout)).astype(np.float32)),
                  g.weight((cout,), 0.1), g.weight((cout,), 0.1),
                  g.const((1 + 0.2 * g.rng.random(cout)).astype(np.float32))], epsilon=1e-5)
        x = g.op("Relu", [x])
        x = g.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = g.op("Flatten", [x], axis=1)                                  # [1, 16*12*2]
    x = g.op("Gemm", [x, g.weight((12, 16 * 12 * 2)), g.weight((12,), 0.1)], transB=1)
    g.op("Softmax", [x], out="probs", axis=1)
    return g.model("kws_cnn",
                   [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 1, 49, 10])],
                   [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 12])])


def lstm_speech() -> onnx.ModelProto:
    g = GraphBuilder(seed=2)
    feat, hidden, classes = 40, 32, 12
    x = g.op("Transpose", ["features"], perm=[1, 0, 2])               # [time, 1, 40]
    y, _, _ = g.op("LSTM", [x, g.weight((1, 4 * hidden, feat)), g.weight((1, 4 * hidden, hidden)),
                            g.weight((1, 8 * hidden), 0.1)], n_out=3, hidden_size=hidden)
    y = g.op("Squeeze", [y, g.ints([1])])                              # [time, 1, 32]
    y = g.op("Transpose", [y], perm=[1, 0, 2])                         # [1, time, 32]
    y = g.op("MatMul", [y, g.weight((hidden, classes))])
    y = g.op("Add", [y, g.weight((classes,), 0.1)])
    g.op("LogSoftmax", [y], out="logits", axis=-1)
    vi = helper.make_tensor_value_info
    return g.model("lstm_speech", [vi("features", TensorProto.FLOAT, [1, "time", feat])],
                   [vi("logits", TensorProto.FLOAT, [1, "time", classes])])


def transformer_block() -> onnx.ModelProto:
    g = GraphBuilder(seed=3)
    d, heads, mlp = 64, 4, 128
    hd = d // heads

    def layer_norm(v: str) -> str:
        return g.op("LayerNormalization", [v, g.const(np.ones(d, np.float32)),
                                           g.weight((d,), 0.1)], axis=-1, epsilon=1e-5)

    def linear(v: str, n_in: int, n_out: int) -> str:
        return g.op("Add", [g.op("MatMul", [v, g.weight((n_in, n_out))]), g.weight((n_out,), 0.1)])

    # Shape sub-graph: [batch, seq] of x, as torch exports it, for the head split and merge.
    shape = g.op("Shape", ["x"])
    batch = g.op("Unsqueeze", [g.op("Gather", [shape, g.const(np.array(0, np.int64))], axis=0),
                               g.ints([0])])
    seq = g.op("Unsqueeze", [g.op("Gather", [shape, g.const(np.array(1, np.int64))], axis=0),
                             g.ints([0])])
    split_shape = g.op("Concat", [batch, seq, g.ints([heads, hd])], axis=0)
    merge_shape = g.op("Concat", [batch, seq, g.ints([d])], axis=0)

    h = layer_norm("x")
    q, k, v = (g.op("Reshape", [linear(h, d, d), split_shape]) for _ in range(3))
    q = g.op("Transpose", [q], perm=[0, 2, 1, 3])                      # [b, heads, s, hd]
    k = g.op("Transpose", [k], perm=[0, 2, 3, 1])                      # [b, heads, hd, s]
    v = g.op("Transpose", [v], perm=[0, 2, 1, 3])
    scores = g.op("Mul", [g.op("MatMul", [q, k]), g.const(np.array(hd ** -0.5, np.float32))])
    att = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])      # [b, heads, s, hd]
    att = g.op("Reshape", [g.op("Transpose", [att], perm=[0, 2, 1, 3]), merge_shape])
    x1 = g.op("Add", ["x", linear(att, d, d)])
    m = linear(layer_norm(x1), d, mlp)
    # GELU (erf form, as torch exports nn.GELU at opset 17)
    gelu = g.op("Mul", [g.op("Mul", [m, g.op("Add", [g.op("Erf", [g.op("Div", [
        m, g.const(np.array(np.sqrt(2.0), np.float32))])]), g.const(np.array(1.0, np.float32))])]),
        g.const(np.array(0.5, np.float32))])
    g.op("Add", [x1, linear(gelu, mlp, d)], out="y")
    return g.model("transformer_block",
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", d])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", d])])


def transpose_heavy() -> onnx.ModelProto:
    g = GraphBuilder(seed=4)
    c = 16
    x = g.op("Transpose", ["x"], perm=[0, 2, 3, 1])                   # NCHW -> NHWC
    x = g.op("Mul", [g.op("Sigmoid", [x]), g.weight((c,), 1.0)])
    a, b = g.op("Split", [x, g.ints([c // 2, c // 2])], n_out=2, axis=3)
    x = g.op("Concat", [g.op("Relu", [a]), g.op("Tanh", [b])], axis=3)
    x = g.op("Add", [x, g.weight((c,), 0.5)])
    x = g.op("Transpose", [x], perm=[0, 3, 1, 2])                     # NHWC -> NCHW
    x = g.op("Slice", [x, g.ints([2]), g.ints([14]), g.ints([1])])   # channels 2..13
    x = g.op("Transpose", [x], perm=[0, 2, 3, 1])                     # [1, 8, 8, 12]
    x = g.op("Reshape", [x, g.ints([1, 64, 12])])
    g.op("MatMul", [x, g.weight((12, 10))], out="y")
    return g.model("transpose_heavy",
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 8, 8])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 10])])


EXAMPLES = {"kws_cnn": kws_cnn, "lstm_speech": lstm_speech,
            "transformer_block": transformer_block, "transpose_heavy": transpose_heavy}


def main(out_dir: str | None = None) -> None:
    out = Path(out_dir) if out_dir else Path(__file__).resolve().parent
    out.mkdir(parents=True, exist_ok=True)
    for name, build in EXAMPLES.items():
        onnx.save_model(build(), str(out / f"{name}.onnx"))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
