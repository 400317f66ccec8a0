"""A generator of the conv nets GNA users bring (keyword-spotting CNNs, TDNNs), independent of
``netpass.synthetic`` and of the other GNA property generators: Conv1d/Conv2d (NCHW) with random
kernels (1xK and Kx1 too), strides, pads (asymmetric, ``auto_pad``), dilations, groups
(depthwise too), with or without bias, BatchNormalization, Relu/Sigmoid/Tanh/Clip,
MaxPool/AveragePool (1-D and 2-D, ``ceil_mode``, ``count_include_pad``), residual Adds, channel
Concats of branches, time/channel Transposes around per-frame MatMuls (as exported TDNNs have),
Squeeze/Unsqueeze of unit axes, channel-permutation Gathers, and Flatten/Reshape into
MatMul/Gemm heads; batch 1, static odd shapes. ``conv_net_onnx(seed)`` writes one with
onnx.helper, ``torch_conv_net_onnx(seed)`` exports a random ``torch.nn`` module."""
from __future__ import annotations

import io
import warnings

import numpy as np
import onnx
from gna_graphs import OnnxGraph
from onnx import TensorProto, helper

Shape = list[int]


def _out_dim(size: int, k: int, s: int, d: int, pb: int, pe: int, ceil: bool = False) -> int:
    span = size + pb + pe - d * (k - 1) - 1
    if ceil:
        out = -(-span // s) + 1
        # (ONNX / torch: the last window must start inside the input or its left padding)
        return out - 1 if (out - 1) * s >= size + pb else out
    return span // s + 1


class ConvNet(OnnxGraph):
    """A conv net under construction: ``x``/``shape`` are the newest tensor and its shape
    ([1, C, T] or [1, C, H, W]); each block reads and replaces them."""

    def coin(self, p: float = 0.5) -> bool:
        return bool(self.rng.random() < p)

    def pick(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def randn(self, *shape: int, scale: float = 1.0) -> np.ndarray:
        return (self.rng.standard_normal(shape) * scale).astype(np.float32)

    # -- layers: (tensor, shape) -> (tensor, shape) ---------------------------------------------
    def conv(self, x: str, s: Shape, same: bool = False, out_c: int | None = None):
        c, spatial = s[1], s[2:]
        groups = 1
        if not same and c > 1 and self.coin(0.35):
            divisors = [g for g in range(2, c + 1) if c % g == 0]
            groups = c if self.coin() else self.pick(divisors)
        oc = out_c or int(self.pick([1, 2, 3, 4, 5, 6, 8, 12])) * (groups if groups > 1 else 1)
        if groups > 1 and oc % groups:
            oc = groups * max(1, oc // groups)
        ks, strides, dils, pads_b, pads_e, out = [], [], [], [], [], []
        for size in spatial:
            if same:
                k = int(self.pick([1, 3, 5]))
                k = min(k, 2 * size - 1) if k > size else k
                d = 2 if k > 1 and self.coin(0.2) and size > 2 * (k - 1) else 1
                st, pb = 1, d * (k // 2)
                pe = pb
            else:
                k = int(self.rng.integers(1, min(size, 6) + 1))
                d = 2 if self.coin(0.2) and 2 * (k - 1) + 1 <= size else 1
                st = int(self.pick([1, 1, 1, 2, 2, 3]))
                pb = int(self.rng.integers(0, k)) if self.coin(0.5) else 0
                pe = int(self.rng.integers(0, k)) if self.coin(0.5) else pb
            ks.append(k)
            strides.append(st)
            dils.append(d)
            pads_b.append(pb)
            pads_e.append(pe)
            out.append(_out_dim(size, k, st, d, pb, pe))
        if len(spatial) == 2 and not same and self.coin(0.3):  # 1xK / Kx1
            axis = int(self.rng.integers(2))
            ks[axis], dils[axis], pads_b[axis], pads_e[axis], strides[axis] = 1, 1, 0, 0, 1
            out[axis] = spatial[axis]
        wgt = self.randn(oc, c // groups, *ks, scale=1.0 / np.sqrt(c // groups * np.prod(ks)))
        ins = [x, self.const(wgt)]
        if self.coin(0.6):
            ins.append(self.const(self.randn(oc, scale=0.3)))
        attrs = {"kernel_shape": ks, "strides": strides, "dilations": dils, "group": groups}
        if not same and self.coin(0.15) and all(d == 1 for d in dils):
            attrs["auto_pad"] = self.pick(["SAME_UPPER", "SAME_LOWER", "VALID"])
            out = [-(-n // st) for n, st in zip(spatial, strides)] if \
                attrs["auto_pad"] != "VALID" else \
                [_out_dim(n, k, st, 1, 0, 0) for n, k, st in zip(spatial, ks, strides)]
        else:
            attrs["pads"] = pads_b + pads_e
        y = self.op("Conv", ins, **attrs)
        return y, [1, oc, *out]

    def batch_norm(self, x: str, s: Shape):
        c = s[1]
        ins = [x, self.const(self.rng.uniform(0.5, 1.5, c).astype(np.float32)),
               self.const(self.randn(c, scale=0.2)), self.const(self.randn(c, scale=0.2)),
               self.const(self.rng.uniform(0.5, 2.0, c).astype(np.float32))]
        return self.op("BatchNormalization", ins, epsilon=1e-5), s

    def act(self, x: str, s: Shape):
        kind = self.pick(["Relu", "Relu", "Sigmoid", "Tanh", "Clip"])
        if kind == "Clip":
            lo, hi = sorted(self.rng.uniform(-1.5, 1.5, 2).tolist())
            return self.op("Clip", [x, self.const(np.float32(lo)),
                                    self.const(np.float32(hi + 0.5))]), s
        return self.op(kind, [x]), s

    def pool(self, x: str, s: Shape):
        spatial = s[2:]
        kind = self.pick(["MaxPool", "MaxPool", "AveragePool"])
        ks, strides, pads_b, pads_e = [], [], [], []
        for size in spatial:
            k = int(self.rng.integers(1, min(size, 4) + 1))
            st = int(self.rng.integers(1, k + 1)) if self.coin(0.8) else k + 1
            pb = int(self.rng.integers(0, k)) if self.coin(0.3) else 0
            pe = int(self.rng.integers(0, k)) if self.coin(0.3) else pb
            ks.append(k)
            strides.append(st)
            pads_b.append(pb)
            pads_e.append(pe)
        if ks == [1] * len(ks):
            ks[-1] = min(2, spatial[-1])
        ceil = self.coin(0.2)
        out = [_out_dim(n, k, st, 1, pb, pe, ceil)
               for n, k, st, pb, pe in zip(spatial, ks, strides, pads_b, pads_e)]
        if ceil and any(o != _out_dim(n, k, st, 1, pb, pe + st - 1) for o, n, k, st, pb, pe
                        in zip(out, spatial, ks, strides, pads_b, pads_e)):
            # (a last window that would start in the right padding is dropped by onnxruntime
            # and torch, not by ONNX's shape inference, which the checker then holds against
            # the shapes declared here: floor rounding instead)
            ceil = False
            out = [_out_dim(n, k, st, 1, pb, pe)
                   for n, k, st, pb, pe in zip(spatial, ks, strides, pads_b, pads_e)]
        attrs = {"kernel_shape": ks, "strides": strides, "pads": pads_b + pads_e,
                 "ceil_mode": int(ceil)}
        if kind == "AveragePool":
            attrs["count_include_pad"] = int(self.coin())
        return self.op(kind, [x], **attrs), [1, s[1], *out]

    def conv_block(self, x: str, s: Shape):
        """Conv [-> BatchNorm] [-> activation] [-> pooling]."""
        x, s = self.conv(x, s)
        if self.coin(0.4):
            x, s = self.batch_norm(x, s)
        if self.coin(0.8):
            x, s = self.act(x, s)
        if self.coin(0.3) and min(s[2:]) >= 2:
            x, s = self.pool(x, s)
        return x, s

    def residual(self, x: str, s: Shape):
        """x + act(conv_same(x)) (a shape-keeping conv, maybe with BatchNorm)."""
        y, ys = self.conv(x, s, same=True, out_c=s[1])
        if self.coin(0.4):
            y, ys = self.batch_norm(y, ys)
        y, ys = self.act(y, ys)
        if ys != s:
            return x, s
        return self.op("Add", [x, y] if self.coin() else [y, x]), s

    def branches(self, x: str, s: Shape):
        """Concat (channels) of 2-3 shape-keeping branches: convs, a 3-wide stride-1 MaxPool."""
        outs, c = [], 0
        for _ in range(int(self.rng.integers(2, 4))):
            if self.coin(0.25) and min(s[2:]) >= 2:
                k = [3] * (len(s) - 2)
                y = self.op("MaxPool", [x], kernel_shape=k, strides=[1] * len(k),
                            pads=[1] * 2 * len(k))
                ys = s
            else:
                y, ys = self.conv(x, s, same=True)
                y, ys = self.act(y, ys)
            if ys[2:] != s[2:]:
                continue
            outs.append(y)
            c += ys[1]
        if len(outs) < 2:
            return (outs[0], [1, c, *s[2:]]) if outs else (x, s)
        return self.op("Concat", outs, axis=self.pick([1, 1 - len(s)])), [1, c, *s[2:]]

    def frame_linear(self, x: str, s: Shape):
        """TDNN style on [1, C, T]: Transpose to [1, T, C] -> MatMul [C, D] (+ bias) ->
        activation -> Transpose back to [1, D, T]."""
        if len(s) != 3:
            return x, s
        c, t = s[1], s[2]
        d = int(self.pick([2, 4, 5, 8, 16]))
        y = self.op("Transpose", [x], perm=[0, 2, 1])
        y = self.op("MatMul", [y, self.const(self.randn(c, d, scale=1 / np.sqrt(c)))])
        if self.coin():
            y = self.op("Add", [y, self.const(self.randn(d, scale=0.2))])
        y, _ = self.act(y, [1, t, d])
        return self.op("Transpose", [y], perm=[0, 2, 1]), [1, d, t]

    def frame_act(self, x: str, s: Shape):
        """Transpose time and channels, an activation (or a per-channel scale), back."""
        perm = [0, 2, 1] if len(s) == 3 else self.pick([[0, 2, 3, 1], [0, 3, 2, 1], [0, 2, 1, 3]])
        y = self.op("Transpose", [x], perm=perm)
        ts = [s[p] for p in perm]
        if self.coin():
            y, _ = self.act(y, ts)
        else:
            y = self.op("Mul", [y, self.const(self.rng.uniform(0.5, 1.5, ts[-1])
                                              .astype(np.float32))])
        back = [perm.index(i) for i in range(len(perm))]
        return self.op("Transpose", [y], perm=back), s

    def squeeze_unsqueeze(self, x: str, s: Shape):
        """[1, C, T] -> Unsqueeze -> [1, C, 1, T] (a 1xK 2-D conv follows) or back with
        Squeeze when a spatial dim is 1."""
        if len(s) == 3:
            axis = self.pick([2, 3])
            u = self.op("Unsqueeze", [x, self.const(np.array([axis], np.int64))])
            return u, s[:axis] + [1] + s[axis:]
        unit = [a for a in (2, 3) if s[a] == 1]
        if unit:
            a = self.pick(unit)
            return self.op("Squeeze", [x, self.const(np.array([a], np.int64))]), \
                s[:a] + s[a + 1:]
        if self.coin():  # [1, C, H, W] -> [1, C*H, W]: frequency bands into channels
            shape = [1, s[1] * s[2], s[3]]
            return self.op("Reshape", [x, self.const(np.array([0, -1, s[3]], np.int64))]), shape
        # CRNN style: [1, C, H, W] -> Transpose [1, W, C, H] -> Reshape [1, W, C*H] -> [1, CH, W]
        y = self.op("Transpose", [x], perm=[0, 3, 1, 2])
        y = self.op("Reshape", [y, self.const(np.array([1, s[3], s[1] * s[2]], np.int64))])
        return self.op("Transpose", [y], perm=[0, 2, 1]), [1, s[1] * s[2], s[3]]

    def gather(self, x: str, s: Shape):
        idx = self.rng.permutation(s[1]).astype(self.pick([np.int64, np.int32]))
        return self.op("Gather", [x, self.const(idx)], axis=self.pick([1, 1 - len(s)])), s

    # -- heads ----------------------------------------------------------------------------------
    def head(self, x: str, s: Shape) -> tuple[str, Shape]:
        kind = self.pick(["flatten_gemm", "reshape_matmul", "gap_gemm", "frames", "none"])
        n = int(np.prod(s))
        d = int(self.pick([2, 3, 5, 8, 10, 12]))
        if kind == "frames" and len(s) == 3:  # per-frame classifier [1, T, D]
            y = self.op("Transpose", [x], perm=[0, 2, 1])
            y = self.op("MatMul", [y, self.const(self.randn(s[1], d, scale=1 / np.sqrt(s[1])))])
            return y, [1, s[2], d]
        if kind == "gap_gemm":
            x = self.op("GlobalAveragePool", [x]) if self.coin() else \
                self.op("ReduceMean", [x], axes=list(range(2, len(s))), keepdims=1)
            n = s[1]
        if kind == "none":
            return x, s
        if kind == "reshape_matmul":
            flat = self.op("Reshape", [x, self.const(np.array([1, -1], np.int64))])
            y = self.op("MatMul", [flat, self.const(self.randn(n, d, scale=1 / np.sqrt(n)))])
            if self.coin():
                y = self.op("Add", [y, self.const(self.randn(d, scale=0.2))])
        else:
            flat = self.op("Flatten", [x], axis=1)
            trans_b = int(self.coin())
            w = self.randn(n, d, scale=1 / np.sqrt(n))
            ins = [flat, self.const(w.T.copy() if trans_b else w)]
            if self.coin():
                ins.append(self.const(self.randn(d, scale=0.2)))
            y = self.op("Gemm", ins, transB=trans_b)
        if self.coin(0.3):
            y, _ = self.act(y, [1, d])
            y = self.op("Gemm", [y, self.const(self.randn(d, 4, scale=0.5))])
            d = 4
        return y, [1, d]


LAYERS = ("conv_block", "conv_block", "conv_block", "residual", "branches", "frame_linear",
          "frame_act", "squeeze_unsqueeze", "gather", "pool", "act")


def conv_net_onnx(seed: int) -> bytes:
    """ONNX bytes of a random conv net: input ``x`` ([1, C, H, W], [1, C, T], a TDNN's
    [1, T, F] transposed in, or a KWS [1, H, W] unsqueezed), 1-6 layers, a head, output ``y``
    (and ``z``, an inner tensor, now and then)."""
    rng = np.random.default_rng(seed)
    g = ConvNet(rng, int(rng.choice([13, 17])))
    form = g.pick(["nchw", "nct", "ntf", "kws"])
    odd = [5, 7, 9, 11, 13, 15, 17, 6, 8, 10]
    if form == "nchw":
        s_in = [1, int(rng.integers(1, 5)), int(g.pick(odd)), int(g.pick(odd))]
        x, s = "x", list(s_in)
    elif form == "nct":
        s_in = [1, int(rng.integers(1, 13)), int(rng.integers(7, 26))]
        x, s = "x", list(s_in)
    elif form == "ntf":
        s_in = [1, int(rng.integers(7, 26)), int(rng.integers(1, 13))]
        x, s = g.op("Transpose", ["x"], perm=[0, 2, 1]), [1, s_in[2], s_in[1]]
    else:
        s_in = [1, int(g.pick(odd)), int(g.pick(odd))]
        x, s = g.op("Unsqueeze", ["x", g.const(np.array([1], np.int64))]), [1, 1, *s_in[1:]]
    inner = []
    for _ in range(int(rng.integers(1, 7))):
        x, s = getattr(g, g.pick(LAYERS))(x, s)
        inner.append((x, s))
    y, ys = g.head(x, s)
    outs = [(y, ys)]
    if len(inner) > 1 and g.coin(0.2):
        outs.append(inner[int(rng.integers(len(inner) - 1))])
    results = []
    for name, (t, shape) in zip("yz", outs):
        g.nodes.append(helper.make_node("Identity", [t], [name], name=f"out_{name}"))
        results.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape)))
    graph = helper.make_graph(g.nodes, "conv_net",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, s_in)],
                              results, g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", g.opset)],
                              ir_version=7)
    onnx.checker.check_model(model, full_check=True)  # (the shapes above are the inferred ones)
    return model.SerializeToString()


def torch_conv_net_onnx(seed: int) -> bytes:
    """ONNX bytes of a random small ``torch.nn`` conv net (1-D on [1, T, F] features read as
    a TDNN does, transposed to [1, F, T], or 2-D on [1, 1, H, W]), exported by
    ``torch.onnx.export`` (opset 17): Conv with groups/dilation/padding/stride, BatchNorm,
    activations, pooling, a residual and a Linear head (per frame or over the flattened map)."""
    import torch
    from torch import nn

    residual_cls, net_cls = _torch_classes()
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    two_d = bool(rng.random() < 0.5)
    shape = [1, 1, int(rng.integers(5, 18)), int(rng.integers(5, 14))] if two_d else \
        [1, int(rng.integers(7, 26)), int(rng.integers(2, 13))]
    conv, bn, maxpool, avgpool = (nn.Conv2d, nn.BatchNorm2d, nn.MaxPool2d, nn.AvgPool2d) \
        if two_d else (nn.Conv1d, nn.BatchNorm1d, nn.MaxPool1d, nn.AvgPool1d)
    x = torch.randn(*shape)
    h = x if two_d else x.transpose(1, 2)
    layers: list = []
    for _ in range(int(rng.integers(1, 5))):
        c = h.shape[1]
        kind = rng.choice(["conv", "conv", "pool", "residual"])
        if kind == "pool" and min(h.shape[2:]) >= 2:
            k = int(rng.integers(2, min(3, *h.shape[2:]) + 1))
            cls = maxpool if rng.random() < 0.6 else avgpool
            layer: nn.Module = cls(k, stride=int(rng.integers(1, k + 1)),
                                   ceil_mode=bool(rng.random() < 0.2))
        elif kind == "residual":
            k = int(rng.choice([1, 3]))
            layer = residual_cls(nn.Sequential(conv(c, c, k, padding=k // 2), bn(c), nn.ReLU()))
        else:
            groups = c if c > 1 and rng.random() < 0.3 else 1
            oc = groups * int(rng.integers(1, 3)) if groups > 1 else int(rng.integers(2, 9))
            k = int(rng.integers(1, min(5, min(h.shape[2:])) + 1))
            dil = 2 if rng.random() < 0.2 and 2 * (k - 1) < min(h.shape[2:]) else 1
            layer = nn.Sequential(
                conv(c, oc, k, stride=int(rng.choice([1, 1, 2])), padding=int(rng.integers(0, k)),
                     dilation=dil, groups=groups, bias=bool(rng.random() < 0.5)),
                *([bn(oc)] if rng.random() < 0.5 else []),
                [nn.ReLU(), nn.Sigmoid(), nn.Tanh(), nn.Hardtanh(-0.5, 1.0)][rng.integers(4)])
        with torch.no_grad():
            out = layer.eval()(h)
        if min(out.shape[2:]) < 1:
            continue
        layers.append(layer)
        h = out
    per_frame = not two_d and rng.random() < 0.5
    features = h.shape[1] if per_frame else int(np.prod(h.shape[1:]))
    model = net_cls(nn.Sequential(*layers), nn.Linear(features, int(rng.integers(2, 9))),
                      two_d, per_frame).eval()
    for m in model.modules():  # (random running statistics: BatchNorm does something)
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.running_mean.uniform_(-0.3, 0.3)
            m.running_var.uniform_(0.5, 2.0)
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), buf, dynamo=False, opset_version=17,
                          input_names=["x"], output_names=["y"])
    return buf.getvalue()


def _torch_classes():
    from torch import nn

    class Residual(nn.Module):
        def __init__(self, body) -> None:
            super().__init__()
            self.body = body

        def forward(self, x):
            return x + self.body(x)

    class TorchNet(nn.Module):
        def __init__(self, body, linear, two_d: bool, per_frame: bool) -> None:
            super().__init__()
            self.body, self.linear, self.two_d, self.per_frame = body, linear, two_d, per_frame

        def forward(self, x):
            h = self.body(x if self.two_d else x.transpose(1, 2))
            if self.per_frame:
                return self.linear(h.transpose(1, 2))
            return self.linear(h.flatten(1))

    return Residual, TorchNet

