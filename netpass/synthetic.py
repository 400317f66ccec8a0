"""Synthetic layout-heavy graphs for tests and benchmarks: chains of the blocks that GNA
layout work meets (NHWC transposes around channel Split/Concat, channel-permutation Gathers
with residual Adds, Slice/Pad shifts, ReduceMean/Reshape, a mid-graph channel shuffle).

``gna_blocks_onnx(blocks, ...)`` writes ONNX bytes (so benchmarks can time ``read_model`` and
onnxruntime can run the original); ``random_blocks(n, seed)`` draws a block sequence. Every
block keeps the tensor's shape, so any sequence chains. Block kinds:

- ``"shuffle"``: ``Transpose(NHWC) -> Mul(const) -> Split(axis 3) -> Sigmoid/Tanh ->
  Concat(axis 3) -> Transpose(NCHW) -> Gather(axis 1, channel permutation) -> Add(block input)
  -> Mul(0.5)``;
- ``"slice_pad"``: ``Pad(H, W by 1) -> Slice`` back to the input size at an offset (a shift
  with a zero border);
- ``"reduce_reshape"``: ``x + ReduceMean(x, channels) -> Reshape [N, C, H*W] -> Relu ->
  Reshape back``; ``"reduce_unsqueeze"`` the same with ``ReduceMean(keepdims=0) -> Unsqueeze``
  (not among the default kinds, ``BLOCK_KINDS``: ``ALL_BLOCK_KINDS`` has it);
- ``"channel_shuffle"``: ``VariadicSplit(axis 1) -> Sigmoid/Tanh -> Concat(axis 1) ->
  Transpose(NHWC) -> Gather(last axis, permutation)``, then (``back``) a Transpose to NCHW.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

BLOCK_KINDS = ("shuffle", "slice_pad", "reduce_reshape", "channel_shuffle")
ALL_BLOCK_KINDS = (*BLOCK_KINDS, "reduce_unsqueeze")


@dataclass(frozen=True)
class Block:
    """One block and its random choices (``perm``: a channel permutation; ``split``: the first
    piece's size; ``acts``: the activations of the two pieces; ``offset``: the Slice start
    on H and W; ``back``: whether a channel shuffle returns to NCHW)."""

    kind: str
    perm: tuple[int, ...] = ()
    split: int = 1
    acts: tuple[str, str] = ("Sigmoid", "Tanh")
    offset: tuple[int, int] = (1, 1)
    back: bool = True


def random_blocks(count: int, seed: int, channels: int = 8,
                  kinds: Sequence[str] = BLOCK_KINDS) -> list[Block]:
    """``count`` blocks drawn with ``seed`` for tensors of ``channels`` channels (the channel
    count a block sees is the previous layout's axis 1: it stays ``channels`` only while
    H = W = C, which ``gna_blocks_onnx``'s default shape keeps)."""
    rng = np.random.default_rng(seed)
    blocks = []
    for _ in range(count):
        kind = str(rng.choice(list(kinds)))
        acts = ("Sigmoid", "Tanh") if rng.random() < 0.5 else ("Tanh", "Sigmoid")
        blocks.append(Block(kind, tuple(int(i) for i in rng.permutation(channels)),
                            int(rng.integers(1, channels)), acts,
                            (int(rng.integers(0, 3)), int(rng.integers(0, 3))),
                            bool(rng.random() < 0.5)))
    return blocks


@dataclass
class _Builder:
    nodes: list = field(default_factory=list)
    inits: list = field(default_factory=list)
    count: int = 0

    def name(self, stem: str) -> str:
        self.count += 1
        return f"{stem}_{self.count}"

    def const(self, value: np.ndarray, stem: str = "c") -> str:
        name = self.name(stem)
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, op_type: str, inputs: Sequence[str], n_out: int = 1, **attrs) -> list[str]:
        outs = [self.name(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=self.name(op_type),
                                           **attrs))
        return outs


def _shuffle(b: _Builder, x: str, blk: Block, c: int, rng: np.random.Generator) -> str:
    t = b.op("Transpose", [x], perm=[0, 2, 3, 1])[0]
    m = b.op("Mul", [t, b.const(rng.uniform(0.5, 1.5, c).astype(np.float32), "w")])[0]
    s = b.op("Split", [m, b.const(np.array([blk.split, c - blk.split], np.int64))], 2, axis=3)
    acts = [b.op(blk.acts[i], [s[i]])[0] for i in range(2)]
    cat = b.op("Concat", acts, axis=3)[0]
    t2 = b.op("Transpose", [cat], perm=[0, 3, 1, 2])[0]
    g = b.op("Gather", [t2, b.const(np.array(blk.perm, np.int64), "perm")], axis=1)[0]
    r = b.op("Add", [g, x])[0]
    return b.op("Mul", [r, b.const(np.array(0.5, np.float32))])[0]


def _slice_pad(b: _Builder, x: str, blk: Block, shape: Sequence[int | str]) -> str:
    p = b.op("Pad", [x, b.const(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))])[0]
    starts = np.array(blk.offset, np.int64)
    ends = starts + np.array(shape[2:4], np.int64)
    axes = b.const(np.array([2, 3], np.int64))
    return b.op("Slice", [p, b.const(starts), b.const(ends), axes])[0]


def _reduce_reshape(b: _Builder, x: str, shape: Sequence[int | str],
                    unsqueeze: bool = False) -> str:
    """(``shape``'s batch may be a name; its other dims are ints.)"""
    if unsqueeze:
        mean = b.op("ReduceMean", [x], axes=[1], keepdims=0)[0]
        mean = b.op("Unsqueeze", [mean, b.const(np.array([1], np.int64))])[0]
    else:
        mean = b.op("ReduceMean", [x], axes=[1], keepdims=1)[0]
    s = b.op("Add", [x, mean])[0]
    c, h, w = (int(d) for d in shape[1:4])
    flat = b.op("Reshape", [s, b.const(np.array([0, c, h * w], np.int64))])[0]
    r = b.op("Relu", [flat])[0]
    return b.op("Reshape", [r, b.const(np.array([0, *shape[1:]], np.int64))])[0]


def _channel_shuffle(b: _Builder, x: str, blk: Block, c: int) -> tuple[str, bool]:
    s = b.op("Split", [x, b.const(np.array([blk.split, c - blk.split], np.int64))], 2, axis=1)
    acts = [b.op(blk.acts[i], [s[i]])[0] for i in range(2)]
    cat = b.op("Concat", acts, axis=1)[0]
    t = b.op("Transpose", [cat], perm=[0, 2, 3, 1])[0]
    g = b.op("Gather", [t, b.const(np.array(blk.perm, np.int64), "perm")], axis=-1)[0]
    if blk.back:
        return b.op("Transpose", [g], perm=[0, 3, 1, 2])[0], False
    return g, True


def gna_blocks_onnx(blocks: Sequence[Block], shape: Sequence[int | str] = (1, 8, 8, 8),
                    seed: int = 0) -> bytes:
    """ONNX bytes (opset 13) of ``x -> blocks -> y``; ``shape`` may name a dynamic batch
    (``("N", 8, 8, 8)``). Channel permutations longer than a block's channel count are cut to
    a permutation of that count; constants are drawn with ``seed``."""
    rng = np.random.default_rng(seed)
    b = _Builder()
    dims = list(shape)
    x = "x"
    for blk in blocks:
        c = int(dims[1])
        blk = _fit(blk, c)
        if blk.kind == "shuffle":
            x = _shuffle(b, x, blk, c, rng)
        elif blk.kind == "slice_pad":
            x = _slice_pad(b, x, blk, dims)
        elif blk.kind in ("reduce_reshape", "reduce_unsqueeze"):
            x = _reduce_reshape(b, x, dims, blk.kind == "reduce_unsqueeze")
        elif blk.kind == "channel_shuffle":
            x, nhwc = _channel_shuffle(b, x, blk, c)
            if nhwc:
                dims = [dims[0], dims[2], dims[3], dims[1]]
        else:
            raise ValueError(f"unknown block kind {blk.kind!r} (known: "
                             f"{', '.join(ALL_BLOCK_KINDS)})")
    b.nodes.append(helper.make_node("Identity", [x], ["y"], name="output"))
    graph = helper.make_graph(
        b.nodes, "gna_blocks", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)], b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    return model.SerializeToString()


def _fit(blk: Block, channels: int) -> Block:
    """``blk`` for a tensor of ``channels`` channels (permutation and split size cut to fit)."""
    if len(blk.perm) == channels and blk.split < channels:
        return blk
    head = np.array((blk.perm + tuple(range(len(blk.perm), channels)))[:channels])
    perm = tuple(int(p) for p in np.argsort(np.argsort(head, kind="stable")))  # ranks
    return Block(blk.kind, perm, min(max(blk.split, 1), channels - 1), blk.acts, blk.offset,
                 blk.back)


def block_graph_nodes(data: bytes) -> int:
    """Number of ONNX nodes plus initializers of a generated model (the graph's size)."""
    g = onnx.load_from_string(data).graph
    return len(g.node) + len(g.initializer)
