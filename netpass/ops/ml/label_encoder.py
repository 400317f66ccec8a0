"""LabelEncoder (``ai.onnx.ml`` versions 1 to 4): a lookup table from keys to values."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...core.node import Node
from ...core.types import Type, string
from ..base import NETPASS_OPSET, set_name, to_output
from ..registry import onnx_export, onnx_rule

__all__ = ["label_encoder"]

ML = "ai.onnx.ml"


def _array(values: Any, dtype: Any) -> np.ndarray:
    """A 1-D array of ``values`` (strings as an object array of ``str``)."""
    if dtype is object or np.dtype(dtype) == object:
        out = np.empty(len(values), object)
        out[:] = [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in values]
        return out
    return np.asarray(values, dtype).reshape(-1)


class LabelEncoder(Node):
    """Each element of ``X`` replaced by the value of its key in ``keys`` -> ``values`` (1-D
    arrays of one length; a key given twice maps to its last value), ``default`` (a one-element
    array) where it has none. ``X`` has the keys' type, the output the values' (strings are
    object arrays of ``str``). A NaN key matches NaN elements."""

    type_name = "LabelEncoder"
    version = NETPASS_OPSET
    ATTRS = {"keys": None, "values": None, "default": None}

    def infer_types(self) -> None:
        self.check(self.get_input_size() == 1, "expects 1 input")
        self.check(isinstance(self.keys, np.ndarray) and isinstance(self.values, np.ndarray)
                   and isinstance(self.default, np.ndarray), "needs keys, values and default")
        self.check(self.keys.ndim == 1 and self.values.ndim == 1 and
                   len(self.keys) == len(self.values),
                   "keys and values must be two lists of one length, got {} and {}",
                   self.keys.shape, self.values.shape)
        self.check(self.default.size == 1, "default must hold one value, got {}",
                   self.default.shape)
        key_type = Type.of(self.keys.dtype)
        et = self.get_input_element_type(0)
        self.check(et.compatible(key_type), "X has type {} but the keys are {}", et, key_type)
        self.set_output_type(0, Type.of(self.values.dtype), self.get_input_partial_shape(0))

    def evaluate(self, inputs):
        x = inputs[0]
        default = self.default.reshape(-1)[0]
        if self.keys.dtype == object:
            table = {str(k): v for k, v in zip(self.keys, self.values)}
            out = np.empty(x.shape, self.values.dtype)
            out.reshape(-1)[:] = [table.get(v.decode("utf-8") if isinstance(v, bytes) else v,
                                            default) for v in x.reshape(-1)]
            return [out]
        keys, values = self.keys, self.values
        real = keys.dtype.kind == "f"
        nan_keys = np.isnan(keys) if real else np.zeros(len(keys), bool)
        nan_value = values[nan_keys][-1:]
        keys, values = keys[~nan_keys], values[~nan_keys]
        # the last value of each key, the keys sorted, then a binary search per element
        last = len(keys) - 1 - np.unique(keys[::-1], return_index=True)[1]
        keys, values = keys[last], values[last]
        pos = np.clip(np.searchsorted(keys, x), 0, max(len(keys) - 1, 0))
        out = np.full(x.shape, default, values.dtype)
        if len(keys):
            hit = keys[pos] == x
            out[hit] = values[pos[hit]]
        if len(nan_value):
            out[np.isnan(x)] = nan_value[0]
        return [out]


def label_encoder(x: Any, keys: Any, values: Any, default: Any, name: str | None = None
                  ) -> Node:
    """LabelEncoder: ``x``'s elements mapped through ``keys`` -> ``values`` (lists or arrays;
    strings as ``str``), ``default`` where a key is missing."""
    def arr(v: Any) -> np.ndarray:
        a = np.asarray(v)
        return _array(list(a.reshape(-1)), object) if a.dtype.kind in "OUS" else a.reshape(-1)
    return set_name(LabelEncoder([to_output(x)], keys=arr(keys), values=arr(values),
                                 default=arr(default)), name)


# -- ONNX import and export ----------------------------------------------------------------------

# attribute suffix -> element type of the lists of versions 2 and 3
_LISTS = {"floats": np.float32, "int64s": np.int64, "strings": object}
# the default of a values type, where none is given
_DEFAULTS = {"floats": ("default_float", -0.0), "int64s": ("default_int64", -1),
             "strings": ("default_string", "_Unused")}


def _one_of(ctx, prefix: str) -> tuple[str, np.ndarray]:
    """The one ``keys_*`` / ``values_*`` attribute given: (its suffix, its values)."""
    given = [s for s in (*_LISTS, "tensor") if ctx.has_attr(f"{prefix}_{s}")]
    if len(given) != 1:
        ctx.error(f"needs exactly one {prefix}_* attribute, got "
                  f"{[f'{prefix}_{s}' for s in given] or 'none'}")
    suffix = given[0]
    if suffix == "tensor":
        return suffix, np.asarray(ctx.attr(f"{prefix}_tensor")).reshape(-1)
    return suffix, _array(ctx.attr(f"{prefix}_{suffix}", []), _LISTS[suffix])


@onnx_rule("LabelEncoder", since=1, domain=ML)
def _import_label_encoder_1(ctx):
    """Version 1: ``classes_strings`` maps strings to their index (``default_int64``) or
    int64 indices to strings (``default_string``), by the input's type."""
    classes = _array(ctx.attr("classes_strings", []), object)
    index = np.arange(len(classes), dtype=np.int64)
    if ctx.inputs[0].element_type is string:
        keys, values = classes, index
        default = np.array([ctx.attr("default_int64", -1)], np.int64)
    else:
        keys, values = index, classes
        default = _array([ctx.attr("default_string", "_Unused")], object)
    return LabelEncoder(ctx.inputs[:1], keys=keys, values=values, default=default)


@onnx_rule("LabelEncoder", since=2, domain=ML)
def _import_label_encoder(ctx):
    _, keys = _one_of(ctx, "keys")
    kind, values = _one_of(ctx, "values")
    if ctx.has_attr("default_tensor"):
        default = np.asarray(ctx.attr("default_tensor")).reshape(-1)
        if default.dtype.kind in "OUS":
            default = _array(list(default), object)
    elif kind == "tensor":
        fallback = {"O": "_Unused", "U": "_Unused", "S": "_Unused", "f": -0.0}
        default = _array([fallback.get(values.dtype.kind, -1)], values.dtype)
    else:
        attr, value = _DEFAULTS[kind]
        default = _array([ctx.attr(attr, value)], _LISTS[kind])
    if default.dtype != values.dtype:
        ctx.error(f"default has type {default.dtype}, the values {values.dtype}")
    return LabelEncoder(ctx.inputs[:1], keys=keys, values=values, default=default)


def _export_list(prefix: str, array: np.ndarray, attrs: dict[str, Any]) -> bool:
    """Set ``prefix_<kind>`` for ``array``; True when it needed a tensor (version 4)."""
    for suffix, dtype in _LISTS.items():
        if array.dtype == np.dtype(dtype):
            attrs[f"{prefix}_{suffix}"] = array.tolist()
            return False
    attrs[f"{prefix}_tensor"] = array
    return True


@onnx_export(LabelEncoder)
def _export_label_encoder(node, ectx):
    attrs: dict[str, Any] = {}
    tensors = _export_list("keys", node.keys, attrs) | _export_list("values", node.values, attrs)
    if tensors:
        default = node.default.reshape(1)
        attrs["default_tensor"] = default.astype(str) if default.dtype == object else default
        for name in ("keys_tensor", "values_tensor"):
            if name in attrs and attrs[name].dtype == object:
                attrs[name] = attrs[name].astype(str)
    else:
        kind = next(s for s, d in _LISTS.items() if node.values.dtype == np.dtype(d))
        attrs[_DEFAULTS[kind][0]] = node.default.reshape(-1)[0].item() \
            if kind != "strings" else str(node.default.reshape(-1)[0])
    ectx.add_node("LabelEncoder", ectx.inputs(node), ectx.outputs(node), domain=ML,
                  version=4 if tensors else 2, **attrs)

