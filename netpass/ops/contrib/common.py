"""What the contrib-op import rules share: the domain name, a few graph-building shorthands and
the checks that refuse a form of an op netpass does not read."""
from __future__ import annotations

from typing import Any

from ...core.dimension import Dimension
from ...core.node import Output
from ..indexing import gather
from ..shape_ops import shape_of

MS = "com.microsoft"


def dim_of(x: Output, axis: int) -> Output:
    """``x``'s dim ``axis`` as a 1-element i64 tensor, read at run time (dynamic-friendly)."""
    return gather(shape_of(x), [axis], 0).output(0)


def scalar_dim(x: Output, axis: int) -> Output:
    """``x``'s dim ``axis`` as an i64 scalar, read at run time."""
    return gather(shape_of(x), axis, 0).output(0)


def static_last_dim(ctx: Any, x: Output, what: str) -> int:
    """The static last dim of ``x`` (a weight or a cache table), else refuse the node."""
    ps = x.partial_shape
    if not ps.rank_is_static or len(ps) == 0 or not ps[-1].is_static:
        ctx.error(f"{what} must have a static last dim, got {ps}")
    return ps[-1].get_length()


def static_rank_of(ctx: Any, x: Output, what: str, ranks: tuple[int, ...]) -> int:
    """The static rank of ``x``, which must be one of ``ranks``, else refuse the node."""
    ps = x.partial_shape
    if not ps.rank_is_static or len(ps) not in ranks:
        ctx.error(f"{what} must have rank {' or '.join(map(str, ranks))}, got {ps}")
    return len(ps)


def same_dim(a: Dimension, b: Dimension) -> bool:
    """Whether two dims are proven equal: both static and equal, or the same symbol."""
    if a.is_static and b.is_static:
        return a.get_length() == b.get_length()
    return a.symbol is not None and a.symbol is b.symbol


def refuse_outputs(ctx: Any, outputs: dict[int, str]) -> None:
    """Refuse the node when it asks for one of ``outputs`` (index -> why netpass lacks it)."""
    names = ctx.proto.output
    for i, why in outputs.items():
        if i < len(names) and names[i]:
            ctx.error(f"output {i} ('{names[i]}') is not supported: {why}")


def refuse_inputs(ctx: Any, inputs: dict[int, str]) -> None:
    """Refuse the node when it is given one of ``inputs`` (index -> why netpass lacks it)."""
    for i, why in inputs.items():
        if ctx.input(i) is not None:
            ctx.error(f"input {i} ('{ctx.proto.input[i]}') is not supported: {why}")


def wants(ctx: Any, i: int) -> bool:
    """Whether the node's output ``i`` is named (asked for)."""
    return i < len(ctx.proto.output) and bool(ctx.proto.output[i])

