"""TensorScatter (ONNX 24): write ``update`` into a copy of a fixed-size cache along ``axis``,
starting per batch entry at ``write_indices[b]`` (0 without them); ``circular`` wraps around the
cache length. The functional form of a KV-cache update (see Attention's nonpad_kv_seqlen)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...core.node import Node
from ..base import NETPASS_OPSET, normalize_axis, set_name, to_output
from ..registry import onnx_export, onnx_rule

__all__ = ["tensor_scatter"]


class TensorScatter(Node):
    type_name = "TensorScatter"
    version = NETPASS_OPSET
    ATTRS = {"axis": -2, "mode": "linear"}

    def infer_types(self) -> None:
        self.check(self.get_input_size() in (2, 3), "expects inputs (past_cache, update"
                   "[, write_indices])")
        self.check(self.mode in ("linear", "circular"), "mode must be linear or circular, got "
                   "'{}'", self.mode)
        past, upd = self.get_input_partial_shape(0), self.get_input_partial_shape(1)
        et = self.get_input_element_type(0)
        self.check(et.merge(self.get_input_element_type(1)) is not None,
                   "update type {} differs from the cache's {}", self.get_input_element_type(1),
                   et)
        if past.rank_is_static:
            axis = normalize_axis(self, self.axis, len(past))
            self.check(axis != 0, "axis cannot be the batch axis")
            if upd.rank_is_static:
                self.check(len(upd) == len(past), "update rank {} differs from cache rank {}",
                           len(upd), len(past))
                for i, (p, u) in enumerate(zip(past, upd)):
                    self.check(i == axis or p.compatible(u), "update {} does not fit cache {}",
                               upd, past)
        self.set_output_type(0, et, past)

    def evaluate(self, inputs):
        cache, upd = inputs[0], inputs[1]
        axis = self.axis % cache.ndim
        starts = np.asarray(inputs[2]).astype(np.int64).reshape(-1) if len(inputs) > 2 else \
            np.zeros(cache.shape[0], np.int64)
        out = cache.copy()
        length, n = cache.shape[axis], upd.shape[axis]
        for b in range(cache.shape[0]):
            pos = starts[b] + np.arange(n)
            if self.mode == "circular":
                pos %= length
            self.check(bool(((pos >= 0) & (pos < length)).all()), "batch {}: writes at {}..{} "
                       "leave the cache of length {}", b, pos.min(), pos.max(), length)
            dst = np.moveaxis(out[b], axis - 1, 0)
            dst[pos] = np.moveaxis(upd[b], axis - 1, 0)
        return [out]


def tensor_scatter(past_cache: Any, update: Any, write_indices: Any = None, axis: int = -2,
                   mode: str = "linear", name: str | None = None) -> Node:
    """TensorScatter (ONNX 24): a copy of ``past_cache`` with ``update`` written along ``axis``,
    starting per batch entry at ``write_indices[b]`` (0 without them); ``mode`` "circular" wraps
    around the cache length, "linear" does not (the functional form of a KV-cache update)."""
    ins = [to_output(past_cache), to_output(update)]
    if write_indices is not None:
        ins.append(to_output(write_indices))
    return set_name(TensorScatter(ins, axis=axis, mode=mode), name)


@onnx_rule("TensorScatter", since=24)
def _import_tensor_scatter(ctx):
    return TensorScatter([i for i in ctx.inputs[:3] if i is not None], axis=ctx.attr("axis", -2),
                         mode=ctx.attr("mode", "linear"))


@onnx_export(TensorScatter, opset=24)
def _export_tensor_scatter(node, ectx):
    ectx.add_node("TensorScatter", ectx.inputs(node), ectx.outputs(node), axis=int(node.axis),
                  mode=node.mode)
