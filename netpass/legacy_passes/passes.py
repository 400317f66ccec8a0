"""Legacy passes of OpenVINO's GNA pass manager whose purpose applies to a GPU target.

Kept (reference §3 numbering): RemoveConst (1), RemoveSingleInputConcat (2), ReorderMaxPool as
activation/pooling reordering (8), InsertIdentityLayer and FuseMultipleIdentities for what the
graph compiler needs (15, 20), FuseFullyConnectedWithEltwise (21), the MatMul -> FullyConnected
conversion that ConvertOpSet1ToLegacy does, and crop handling with the alignment rule
(InsertSplitAligningFilter's concern, 9). Left out, with the reason, in docs/legacy.md.
"""
from __future__ import annotations

import numpy as np

from ..core.shape import PartialShape
from ..ngraph_passes.gna.misc import pool_windows_see_data
from ..ops.elementwise import MONOTONIC_ACTIVATIONS
from .convert import legacy_type
from .layer_graph import Layer, LegacyNetwork
from .legacy_pass import LegacyPass

RESHAPE_TYPES = {"Reshape"}
# Max-pooling commutes with these activations (monotonic non-decreasing): their layer types.
MONOTONIC_LAYER_TYPES = frozenset(legacy_type(c) for c in MONOTONIC_ACTIVATIONS)
PRODUCERS_OF_POOLING = {"Convolution", "GNAConvolution", "FullyConnected", "Eltwise", "ScaleShift"}
# A crop whose first element sits at a multiple of this many bytes becomes a zero-copy view.
CROP_ALIGN_BYTES = 64
# Largest selection matrix (elements) an unaligned crop may become as an affine layer.
MAX_AFFINE_ELEMENTS = 1 << 22


def _single_consumer(net: LegacyNetwork, name: str) -> str | None:
    cons = net.consumers(name)
    return cons[0][0] if len(cons) == 1 and net.layer(name).type != "Output" else None


class RemoveConstPass(LegacyPass):
    """Reshape layers take their target shape as a dims parameter.

    The shape blob input is dropped; the static output shape becomes ``params["dims"]``."""

    run_before_copy = True

    def run(self, net: LegacyNetwork) -> bool:
        changed = False
        for layer in net.sorted_layers():
            if layer.type not in RESHAPE_TYPES or not layer.out_shapes[0].is_static:
                continue
            if len(layer.inputs) > 1 and all(src[0] == "blob" for src in layer.inputs[1:]):
                for src in layer.inputs[1:]:
                    layer.blobs.pop(src[1], None)
                layer.inputs = layer.inputs[:1]
                layer.params = {"dims": list(layer.out_shapes[0].to_shape())}
                changed = True
        return changed


class RemoveSingleInputConcatPass(LegacyPass):
    """A Concat of one input is its input."""

    run_before_copy = True

    def run(self, net: LegacyNetwork) -> bool:
        changed = False
        for layer in net.sorted_layers():
            if layer.type == "Concat" and len(layer.inputs) == 1 and layer.inputs[0][0] == "layer":
                net.bypass(layer.name)
                changed = True
        return changed


class ConvertGemmToFullyConnectedPass(LegacyPass):
    """MatMul by constant 2-D weights -> FullyConnected.

    The FullyConnected holds the weights as [N, K]."""

    run_before_copy = True

    def run(self, net: LegacyNetwork) -> bool:
        changed = False
        for layer in net.sorted_layers():
            if layer.type != "Gemm" or len(layer.inputs) != 2:
                continue
            w = layer.blob_for_port(1)
            if w is None or w.ndim != 2 or layer.inputs[0][0] != "layer" \
                    or layer.params.get("transpose_a"):
                continue
            weights = w if layer.params.get("transpose_b") else w.T
            layer.type, layer.op_type = "FullyConnected", "FullyConnected"
            layer.blobs = {"weights": np.ascontiguousarray(weights)}
            layer.inputs = [layer.inputs[0], ("blob", "weights")]
            layer.params = {"out_size": int(weights.shape[0])}
            changed = True
        return changed


class FuseFullyConnectedWithEltwisePass(LegacyPass):
    """Folds a per-output constant sum after an FC into its biases.

    FullyConnected followed by an Eltwise sum with a per-output constant: the constant becomes
    the FullyConnected's biases."""

    def run(self, net: LegacyNetwork) -> bool:
        changed = False
        for layer in net.sorted_layers():
            if layer.type != "FullyConnected" or "biases" in layer.blobs \
                    or layer.name not in net.graph:
                continue
            nxt = _single_consumer(net, layer.name)
            if nxt is None:
                continue
            add = net.layer(nxt)
            if add.type != "Eltwise" or add.params.get("operation") != "sum" \
                    or len(add.inputs) != 2:
                continue
            blob_port = (1 if add.inputs[1][0] == "blob" else
                         0 if add.inputs[0][0] == "blob" else None)
            if blob_port is None:
                continue
            bias = add.blob_for_port(blob_port)
            n = layer.blobs["weights"].shape[0]
            if bias is None or bias.size != n or (bias.ndim and bias.shape[-1] != n):
                continue
            if add.out_shapes[0] != layer.out_shapes[0]:
                continue
            # The bias joins the FC's arithmetic: it takes the weights' type (f16 models).
            layer.blobs["biases"] = bias.reshape(n).astype(layer.blobs["weights"].dtype)
            layer.inputs.append(("blob", "biases"))
            net.bypass(add.name)
            changed = True
        return changed


class ReorderActivationAndPoolingPass(LegacyPass):
    """Conv/FC -> activation -> MaxPool => MaxPool -> activation.

    Conv/FC -> [bias] -> activation -> MaxPool  =>  ... -> MaxPool -> activation.

    Pooling first shrinks the tensor the activation runs on; the result is equal because
    max-pooling commutes with monotonic non-decreasing activations.
    """

    def run(self, net: LegacyNetwork) -> bool:
        changed = False
        for layer in net.sorted_layers():
            if layer.type not in MONOTONIC_LAYER_TYPES or layer.name not in net.graph:
                continue
            data = layer.data_inputs()
            if len(data) != 1 or len(layer.inputs) != 1:
                continue
            producer = data[0][1]
            if net.layer(producer).type not in PRODUCERS_OF_POOLING or \
                    _single_consumer(net, producer) != layer.name:
                continue
            pool_name = _single_consumer(net, layer.name)
            if pool_name is None:
                continue
            pool = net.layer(pool_name)
            if pool.type not in ("Pooling", "GNAPooling") \
                    or pool.params.get("pool-method") != "max":
                continue
            if any(net.consumers(pool.name, port) for port in range(1, len(pool.out_shapes))):
                continue  # the indices output: an activation cannot produce it
            if not self._windows_see_data(pool, net.layer(producer).out_shapes[data[0][2]]):
                continue  # (a window of padding only: -inf, which act(-inf) would replace)
            self._swap(net, layer, pool, producer)
            changed = True
        return changed

    @staticmethod
    def _windows_see_data(pool: Layer, in_shape: PartialShape) -> bool:
        """Every window of ``pool`` (NCHW ``Pooling``, NHWC ``GNAPooling``) covers data."""
        p = pool.params
        kernel = [int(k) for k in p.get("kernel", [])]
        rank = len(kernel)
        out_shape = pool.out_shapes[0]
        if not rank or not (in_shape.is_static and out_shape.is_static):
            return False
        first = 1 if pool.type == "GNAPooling" else len(in_shape) - rank
        return pool_windows_see_data(kernel, p.get("strides", [1] * rank), p.get("dilations"),
                                     p.get("pads_begin", [0] * rank), p.get("pads_end", [0] * rank),
                                     p.get("auto_pad", "explicit"),
                                     in_shape.to_shape()[first:first + rank],
                                     out_shape.to_shape()[first:first + rank])

    @staticmethod
    def _swap(net: LegacyNetwork, act: Layer, pool: Layer, producer: str) -> None:
        out_port = act.inputs[0][2]
        consumers = net.consumers(pool.name)
        net.set_input(pool.name, 0, ("layer", producer, out_port))
        net.set_input(act.name, 0, ("layer", pool.name, 0))
        for consumer, port in consumers:
            net.set_input(consumer, port, ("layer", act.name, 0))
        # the activation takes the pooled values' shape; it has one output, not the pool's two
        act.out_shapes, act.out_types = pool.out_shapes[:1], pool.out_types[:1]


class InsertIdentityPass(LegacyPass):
    """Gives an output read straight from an input a copy layer.

    An output read straight from a network input gets an Identity (a copy) to produce it."""

    def run(self, net: LegacyNetwork) -> bool:
        changed = False
        for name in list(net.output_names):
            out = net.layer(name)
            src = out.inputs[0]
            if src[0] != "layer" or net.layer(src[1]).type != "Input":
                continue
            producer = net.layer(src[1])
            ident = Layer(name=f"{name}/identity", type="Identity", op_type="Identity",
                          inputs=[src], out_shapes=[producer.out_shapes[src[2]]],
                          out_types=[producer.out_types[src[2]]])
            net.add_layer(ident)
            net.set_input(name, 0, ("layer", ident.name, 0))
            changed = True
        return changed


class FuseMultipleIdentitiesPass(LegacyPass):
    """Identity -> Identity collapses to one."""

    def run(self, net: LegacyNetwork) -> bool:
        changed = False
        for layer in net.sorted_layers():
            if layer.type != "Identity" or layer.name not in net.graph:
                continue
            src = layer.inputs[0]
            if src[0] == "layer" and net.layer(src[1]).type == "Identity" \
                    and _single_consumer(net, src[1]) == layer.name:
                net.bypass(src[1])
                changed = True
        return changed


def crop_geometry(layer: Layer, in_shape: tuple[int, ...]) -> tuple[int, int, int, int] | None:
    """(axis, offset, length, inner) of a crop that cuts one axis, else None."""
    axes = [int(a) % len(in_shape) for a in layer.params.get("axes", [])]
    dims = [int(d) for d in layer.params.get("dim", [])]
    offs = [int(o) for o in layer.params.get("offset", [])]
    cut = [(a, o, d) for a, o, d in zip(axes, offs, dims) if not (o == 0 and d == in_shape[a])]
    if len(cut) > 1:
        return None
    if not cut:
        return (0, 0, in_shape[0] if in_shape else 1, int(np.prod(in_shape[1:])))
    axis, off, length = cut[0]
    return axis, off, length, int(np.prod(in_shape[axis + 1:]))


class HandleCropAlignmentPass(LegacyPass):
    """Aligned crops become views; the others affine layers.

    Crop lowering rule: an aligned contiguous crop is a zero-copy view (``params["view"]``);
    an unaligned one-axis crop becomes an ``Affine`` layer (a FullyConnected whose weights
    select the kept elements, as GNA's graph compiler does); anything else stays a copy."""

    def __init__(self, align_bytes: int = CROP_ALIGN_BYTES) -> None:
        self.align_bytes = align_bytes

    def run(self, net: LegacyNetwork) -> bool:
        changed = False
        for layer in net.sorted_layers():
            if layer.type != "Crop" or "view" in layer.params:
                continue
            src = layer.inputs[0]
            in_ps: PartialShape = net.layer(src[1]).out_shapes[src[2]]
            if not in_ps.is_static or not layer.out_shapes[0].is_static:
                layer.params["view"] = False
                continue
            in_shape = in_ps.to_shape()
            geo = crop_geometry(layer, in_shape)
            if geo is None:
                layer.params["view"] = False
                continue
            axis, off, length, inner = geo
            contiguous = all(d == 1 for d in in_shape[:axis])
            itemsize = np.dtype(layer.out_types[0].dtype or np.float32).itemsize
            offset_bytes = off * inner * itemsize
            if contiguous and offset_bytes % self.align_bytes == 0:
                layer.params["view"] = True
                layer.params["offset_elements"] = off * inner
                changed = True
                continue
            k, m = in_shape[axis] * inner, length * inner
            if k * m <= MAX_AFFINE_ELEMENTS and layer.out_types[0].is_real:
                sel = np.zeros((m, k), dtype=layer.out_types[0].dtype)
                sel[np.arange(m), off * inner + np.arange(m)] = 1.0
                layer.type, layer.op_type = "Affine", "Affine"
                layer.blobs = {"weights": sel}
                layer.inputs = [src, ("blob", "weights")]
                layer.params = {"rows": int(np.prod(in_shape[:axis])), "in_size": k,
                                "out_shape": list(layer.out_shapes[0].to_shape())}
            else:
                layer.params["view"] = False
            changed = True
        return changed


DEFAULT_PASSES = (RemoveConstPass, RemoveSingleInputConcatPass, ConvertGemmToFullyConnectedPass,
                  ReorderActivationAndPoolingPass, FuseFullyConnectedWithEltwisePass,
                  InsertIdentityPass, FuseMultipleIdentitiesPass, HandleCropAlignmentPass)
