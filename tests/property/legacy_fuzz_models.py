"""A hypothesis generator of small static-shape models for the legacy stage's differential fuzz.

The models mix what the legacy layer graph and its passes meet: convolutions (1-D and 2-D,
groups, dilations, asymmetric pads, ``auto_pad``), max/avg pooling (``ceil`` rounding, pads,
dilations, windows over padding only), monotonic and other activations, Eltwise with constants
and between branches, ScaleShift-like Multiply+Add, MatMul by constant 2-D weights (the
FullyConnected conversion, with a bias Add or not), MatMul of two activations, Concat,
Split/VariadicSplit, crops (Slice, StridedSlice), Reshape/Squeeze/Unsqueeze, Transpose, Gather,
and an optional integer branch. Outputs are drawn among every value made (inner tensors,
several outputs of one tensor, a model input read straight, a constant), named or left to
their producer's name.
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from netpass import Model, opset
from netpass.core.model import result_name

F32 = np.float32
I32 = np.int32


def _conv_out(size: int, k: int, s: int, d: int, pb: int, pe: int, ceil: bool = False) -> int:
    span = size + pb + pe - d * (k - 1) - 1
    if span < 0:
        return 0
    return (-(-span // s) if ceil else span // s) + 1


def _o(x):
    """The Output of a Node (opset functions return Nodes)."""
    return x.output(0) if hasattr(x, "outputs") else x


def _is_float(v) -> bool:
    return v.element_type.is_real


def _const(rng, shape, like, lo=0.25, hi=1.0):
    """Random non-zero values of either sign of the element type of ``like`` (an Output or
    a numpy dtype): integers 1..4 of either sign for ints."""
    dtype = np.dtype(like.element_type.dtype if hasattr(like, "element_type") else like)
    sign = rng.choice([-1, 1], size=shape)
    if dtype.kind == "i":
        return (sign * rng.integers(1, 5, size=shape)).astype(dtype)
    return (sign * rng.uniform(lo, hi, size=shape)).astype(dtype)


def _spatial(draw, size: int, max_k: int, pool: bool):
    """(kernel, stride, dilation, pad_begin, pad_end) for one spatial axis of ``size``."""
    k = draw(st.integers(1, max_k))
    s = draw(st.integers(1, 3))
    d = draw(st.sampled_from([1, 1, 2]))
    pad_max = k - 1 if pool else k
    pb = draw(st.integers(0, pad_max))
    pe = draw(st.integers(0, pad_max))
    if _conv_out(size, k, s, d, pb, pe) < 1:
        k, d = 1, 1
    return k, s, d, pb, pe


def conv(draw, rng, v):
    sh = list(v.shape)
    if len(sh) not in (3, 4) or not _is_float(v):
        return None
    c = sh[1]
    groups = draw(st.sampled_from([g for g in range(1, c + 1) if c % g == 0]))
    oc = groups * draw(st.integers(1, 3))
    geo = [_spatial(draw, size, 3, pool=False) for size in sh[2:]]
    ks, ss, ds, pbs, pes = (list(t) for t in zip(*geo))
    auto_pad = draw(st.sampled_from(["explicit"] * 4 + ["same_upper", "same_lower", "valid"]))
    if auto_pad != "explicit":
        ds = [1] * len(ds)
    if auto_pad == "valid" and any(k > size for k, size in zip(ks, sh[2:])):
        auto_pad = "explicit"
    if groups == 1:
        w = _const(rng, [oc, c, *ks], v)
        y = opset.convolution(v, w, ss, pbs, pes, ds, auto_pad)
    else:
        w = _const(rng, [groups, oc // groups, c // groups, *ks], v)
        y = opset.group_convolution(v, w, ss, pbs, pes, ds, auto_pad)
    y = _o(y)
    if draw(st.booleans()):
        y = _o(opset.add(y, _const(rng, [1, oc] + [1] * (len(sh) - 2), v)))
    return y


def pool(draw, rng, v):
    sh = list(v.shape)
    if len(sh) not in (3, 4) or not _is_float(v):
        return None
    is_max = draw(st.booleans()) or draw(st.booleans())
    ceil = draw(st.booleans())
    geo = [_spatial(draw, size, 3, pool=True) for size in sh[2:]]
    ks, ss, ds, pbs, pes = (list(t) for t in zip(*geo))
    if not is_max:
        ds = [1] * len(ds)
    rounding = "ceil" if ceil else "floor"
    if is_max:
        return opset.max_pool(v, ss, ds, pbs, pes, ks, rounding).output(0)
    return opset.avg_pool(v, ss, pbs, pes, ks, draw(st.booleans()), rounding)


def conv_act_pool(draw, rng, v):
    """The ReorderActivationAndPooling pattern: producer -> activation -> MaxPool."""
    y = conv(draw, rng, v)
    if y is None:
        return None
    y = _o(act(draw, rng, y, monotonic=True))
    sh = list(y.shape)
    geo = [_spatial(draw, size, 3, pool=True) for size in sh[2:]]
    ks, ss, ds, pbs, pes = (list(t) for t in zip(*geo))
    rounding = draw(st.sampled_from(["floor", "ceil"]))
    return opset.max_pool(y, ss, ds, pbs, pes, ks, rounding).output(0)


def act(draw, rng, v, monotonic: bool = False):
    if not _is_float(v):
        return None
    kinds = ["relu", "sigmoid", "tanh", "clamp", "exp", "elu"]
    if not monotonic:
        kinds += ["prelu", "abs"]
    kind = draw(st.sampled_from(kinds))
    if kind == "clamp":
        lo = draw(st.sampled_from([-1.0, -0.5, 0.0]))
        return opset.clamp(v, lo, lo + draw(st.sampled_from([0.5, 1.0, 6.0])))
    if kind == "elu":
        return opset.elu(v, 0.5)
    if kind == "prelu":
        c = v.shape[1] if len(v.shape) > 1 else 1
        return opset.prelu(v, _const(rng, [c], v))
    return getattr(opset, kind)(v)


def _broadcastable(draw, sh):
    cshape = [d if draw(st.booleans()) else 1 for d in sh]
    return cshape[draw(st.integers(0, len(sh))):]


def eltwise(draw, rng, v, values):
    sh = list(v.shape)
    fn = draw(st.sampled_from([opset.add, opset.multiply, opset.subtract, opset.maximum,
                               opset.minimum]))
    same = [o for o in values if list(o.shape) == sh and o.element_type == v.element_type]
    if draw(st.booleans()):
        other = draw(st.sampled_from(same))
    else:
        other = opset.constant(_const(rng, _broadcastable(draw, sh), v))
    return fn(v, other) if draw(st.booleans()) else fn(other, v)


def scale_shift(draw, rng, v):
    sh = list(v.shape)
    if len(sh) < 2 or not _is_float(v):
        return None
    cshape = [1, sh[1]] + [1] * (len(sh) - 2)
    return opset.add(opset.multiply(v, _const(rng, cshape, v)), _const(rng, cshape, v))


def fully_connected(draw, rng, v):
    sh = list(v.shape)
    if not sh or not _is_float(v):
        return None
    k, m = sh[-1], draw(st.integers(1, 6))
    tb = draw(st.booleans())
    w = _const(rng, [m, k] if tb else [k, m], v)
    y = _o(opset.matmul(v, w, False, tb))
    bias = draw(st.sampled_from(["none", "vector", "row", "full", "scalar"]))
    out = list(y.shape)
    if bias == "vector":
        y = opset.add(y, _const(rng, [m], v))
    elif bias == "row":
        y = opset.add(_const(rng, [1, m], v), y)
    elif bias == "full":
        y = opset.add(y, _const(rng, out, v))
    elif bias == "scalar":
        y = opset.add(y, _const(rng, [], v))
    return y


def matmul_pair(draw, rng, v):
    sh = list(v.shape)
    if len(sh) < 2 or not _is_float(v):
        return None
    perm = list(range(len(sh) - 2)) + [len(sh) - 1, len(sh) - 2]
    if draw(st.booleans()):
        return opset.matmul(v, opset.transpose(v, perm), False, False)
    return opset.matmul(v, v, draw(st.booleans()), not draw(st.booleans())) \
        if sh[-1] == sh[-2] else opset.matmul(v, v, False, True)


def concat(draw, rng, v, values):
    sh = list(v.shape)
    if not sh:
        return None
    axis = draw(st.integers(-len(sh), len(sh) - 1))
    a = axis % len(sh)
    fits = [o for o in values if o.element_type == v.element_type and len(o.shape) == len(sh)
            and all(d == e for i, (d, e) in enumerate(zip(o.shape, sh)) if i != a)]
    parts = [draw(st.sampled_from(fits)) for _ in range(draw(st.integers(0, 2)))]
    return opset.concat([v, *parts], axis)


def split(draw, rng, v):
    sh = list(v.shape)
    axes = [i for i, d in enumerate(sh) if d > 1]
    if not axes:
        return None
    axis = draw(st.sampled_from(axes))
    d = sh[axis]
    ax = axis - len(sh) if draw(st.booleans()) else axis
    if draw(st.booleans()) and any(d % n == 0 for n in (2, 3)):
        n = draw(st.sampled_from([n for n in (2, 3) if d % n == 0]))
        node = opset.split(v, np.int64(ax), n)
    else:
        first = draw(st.integers(1, d - 1))
        lengths = [first, d - first]
        if draw(st.booleans()):
            lengths[draw(st.integers(0, 1))] = -1
        node = opset.variadic_split(v, np.int64(ax), np.array(lengths, np.int64))
    return list(node.outputs())


def crop(draw, rng, v):
    sh = list(v.shape)
    if not sh:
        return None
    axes = draw(st.lists(st.integers(0, len(sh) - 1), min_size=1, max_size=2, unique=True))
    starts, stops, steps = [], [], []
    for a in axes:
        d = sh[a]
        b = draw(st.integers(0, d - 1))
        e = draw(st.integers(b + 1, d))
        step = draw(st.sampled_from([1, 1, 1, 2]))
        if draw(st.booleans()):
            b -= d  # (negative starts count from the end)
        starts.append(b)
        stops.append(e)
        steps.append(step)
    i64 = lambda x: np.array(x, np.int64)  # noqa: E731
    return opset.slice(v, i64(starts), i64(stops), i64(steps), i64(axes))


def reshape(draw, rng, v):
    sh = list(v.shape)
    n = int(np.prod(sh))
    kind = draw(st.sampled_from(["flat", "row", "reverse", "minus_one", "zero", "squeeze",
                                 "unsqueeze"]))
    i64 = lambda x: np.array(x, np.int64)  # noqa: E731
    if kind == "flat":
        return opset.reshape(v, i64([n]), False)
    if kind == "row":
        return opset.reshape(v, i64([1, n]), False)
    if kind == "reverse":
        return opset.reshape(v, i64(sh[::-1]), False)
    if kind == "minus_one" and sh:
        return opset.reshape(v, i64([sh[0], -1]), False)
    if kind == "zero" and sh:
        return opset.reshape(v, i64([0, -1]), True)
    if kind == "squeeze":
        ones = [i for i, d in enumerate(sh) if d == 1]
        if not ones:
            return None
        return opset.squeeze(v, i64(draw(st.sampled_from(ones))))
    if kind == "unsqueeze":
        return opset.unsqueeze(v, i64(draw(st.integers(-len(sh) - 1, len(sh)))))
    return None


def transpose(draw, rng, v):
    sh = list(v.shape)
    if len(sh) < 2:
        return None
    return opset.transpose(v, np.array(draw(st.permutations(range(len(sh)))), np.int64))


def gather(draw, rng, v):
    sh = list(v.shape)
    if not sh:
        return None
    axis = draw(st.integers(0, len(sh) - 1))
    d = sh[axis]
    if draw(st.booleans()):
        idx = np.array(draw(st.integers(-d, d - 1)), np.int64)
    else:
        idx = np.array(draw(st.lists(st.integers(-d, d - 1), min_size=1, max_size=d + 1)),
                       np.int64)
    return opset.gather(v, idx, np.int64(axis - len(sh) if draw(st.booleans()) else axis))


KINDS = ("conv", "conv_act_pool", "conv_act_pool", "pool", "act", "eltwise", "scale_shift",
         "fc", "matmul", "concat", "split", "crop", "reshape", "transpose", "gather")
INT_KINDS = {"eltwise", "concat", "split", "crop", "reshape", "transpose", "gather"}


def _step(draw, rng, kind, v, values):
    if kind in ("eltwise", "concat"):
        return globals()[kind](draw, rng, v, values)
    table = {"conv": conv, "conv_act_pool": conv_act_pool, "pool": pool, "act": act,
             "scale_shift": scale_shift, "fc": fully_connected, "matmul": matmul_pair,
             "split": split, "crop": crop, "reshape": reshape, "transpose": transpose,
             "gather": gather}
    return table[kind](draw, rng, v)


def _small(shape) -> bool:
    return 0 < int(np.prod(shape)) <= 4096 and len(shape) <= 5


@st.composite
def fuzz_models(draw, max_steps: int = 8, float_type: type = F32) -> Model:
    """A random static-shape model (see the module docstring) whose float tensors are of
    ``float_type``."""
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 16)))
    kind = draw(st.sampled_from(["nchw", "nchw", "nct", "nk", "aligned"]))
    if kind == "nchw":
        shape = [1, draw(st.integers(1, 4)), draw(st.integers(1, 7)), draw(st.integers(1, 7))]
    elif kind == "nct":
        shape = [1, draw(st.integers(1, 4)), draw(st.integers(1, 9))]
    elif kind == "nk":
        shape = [draw(st.integers(1, 3)), draw(st.integers(1, 8))]
    else:  # rows of 16 floats: crops at 64-byte offsets become views
        shape = [1, draw(st.sampled_from([2, 3, 4])), 16]
    params = [opset.parameter(shape, float_type, "x")]
    extra = draw(st.integers(0, 5))
    if extra == 0:
        params.append(opset.parameter([draw(st.integers(1, 3)), draw(st.integers(1, 5))], I32,
                                      "n"))
    elif extra == 1:  # a second float input of the first one's shape (or a row of it)
        params.append(opset.parameter(shape[-draw(st.integers(1, len(shape))):], float_type,
                                      "z"))
    values = [p.output(0) for p in params]
    for _ in range(draw(st.integers(1, max_steps))):
        v = draw(st.sampled_from(values))
        choice = draw(st.sampled_from(KINDS if _is_float(v) else sorted(INT_KINDS)))
        made = _step(draw, rng, choice, v, values)
        if made is None:
            continue
        outs = made if isinstance(made, list) else [_o(made)]
        values += [o for o in outs if _small(o.shape)]
    n_out = draw(st.integers(1, 3))
    outs = [draw(st.sampled_from(values)) for _ in range(n_out)]
    if len(values) > len(params):
        outs[0] = values[-1]
    results = []
    taken: set[str] = set()
    for i, o in enumerate(outs):
        # named, left to the producer (``Split_N.1`` for a multi-output one), or named after
        # the producer explicitly
        naming = draw(st.sampled_from(["named", "named", "producer", "as_producer"]))
        name = f"y{i}" if naming == "named" else \
            o.node.friendly_name if naming == "as_producer" else None
        r = opset.result(o, name)
        if result_name(r) in taken:  # (two outputs of one name: the user's error)
            continue
        taken.add(result_name(r))
        results.append(r)
    if draw(st.integers(0, 5)) == 0:
        results.append(opset.result(opset.constant(_const(rng, [2, 3], float_type)), "c"))
    return Model(results, params, "fuzz")
