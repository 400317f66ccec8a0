"""Common sub-expressions: nodes of one deterministic kind with the same attributes over the
same inputs compute the same value; the program keeps the first.

Exporters repeat what every layer needs: torch's ``scaled_dot_product_attention`` export turns
the boolean causal mask into an additive one (``Where(mask, 0, -inf)``) inside each of GPT-2's
12 layers, a [1, 1, S, S] tensor written 12 times per prefill. Small constants are compared by
value (each layer has its own 0 and -inf), larger ones by identity.
"""
from __future__ import annotations

from typing import Any

from .const_fold import FOLDABLE

VALUE_ELEMENTS = 64  # constants up to this size are the same by value


def _constant_key(c: Any) -> tuple:
    v = c.value
    if v.size <= VALUE_ELEMENTS:
        return ("value", v.dtype.str, v.shape, v.tobytes())
    return ("node", id(c))


def merge_common_subexpressions(nodes: list) -> list:
    """``nodes`` (topological, users not linked yet) with each repeated computation (same
    op class in ``FOLDABLE``, attributes, inputs and output types; not read by a Result) replaced
    by its first occurrence."""
    canonical: dict[int, Any] = {}  # id(node) -> the node standing for it
    seen: dict[tuple, Any] = {}
    read_by_result: set[int] = {id(s) for n in nodes if n.is_result for s, _ in n.inputs}
    out = []
    for n in nodes:
        n.inputs = [(canonical.get(id(s), s), k) for s, k in n.inputs]
        if n.is_constant:
            key = _constant_key(n)
        elif n.row.cls in FOLDABLE and id(n) not in read_by_result and n.num_outputs == 1:
            key = (n.op_class, repr(sorted(n.attrs.items())), tuple(n.out_dtypes),
                   tuple((id(s), k) for s, k in n.inputs))
        else:
            out.append(n)
            continue
        first = seen.get(key)
        if first is None:
            seen[key] = n
            out.append(n)
        else:
            canonical[id(n)] = first
    return out

