"""Run-time invariants checked in debug mode (config ``DEBUG_CHECKS``, default from the
environment variable ``NETPASS_DEBUG``).

Every value a primitive reads (on the host or on the device) must have been produced in the
current infer, before it is read: by its producer's step in the exec order, by the input copy,
or by a reader that hands a dead producer its substituted value (symbolic mode). The runtime
keeps that as a stamp per primitive (``PrimitiveInst.stamp``: the number of the infer that last
produced its outputs; ``Network.epoch``: the current one). A read of an older value is a stale
read, a read of a never-produced one a missing read: both are bugs of the runtime, which debug
mode turns into a :class:`~netpass.errors.RuntimeInvariantError` naming the reading primitive,
its op and the producer instead of a wrong number or an error far from the cause.

Every kernel a primitive launches writes its outputs at the shapes the primitive computed:
each output tensor must have those shapes and lie within the buffer under it. A kernel writing
past its buffer corrupts whatever memory follows (on a host-memory device such as PoCL, the
process's heap: a crash far from the cause); debug mode checks that before every launch.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import RuntimeInvariantError

if TYPE_CHECKING:  # pragma: no cover
    from .network import Network, PrimitiveInst

ENV_DEBUG = "NETPASS_DEBUG"


def debug_checks(config: Mapping[str, Any]) -> bool:
    """Whether the invariant checks are on: ``config["DEBUG_CHECKS"]``, else ``NETPASS_DEBUG``
    set to anything but ``""`` or ``"0"``."""
    if "DEBUG_CHECKS" in config:
        return bool(config["DEBUG_CHECKS"])
    return os.environ.get(ENV_DEBUG, "").strip() not in ("", "0")


def check_read(net: Network, src: PrimitiveInst, k: int) -> None:
    """Raise when output ``k`` of ``src`` was not produced in ``net``'s current infer; the
    reader is ``net.reader`` (None: the network's outputs)."""
    if src.stamp == net.epoch or src.node.is_constant:
        return
    reader = net.reader
    who = (f"{reader.node.kind} '{reader.node.name}'" if reader is not None
           else "reading the outputs")
    node = src.node
    order = net.active_order
    if src not in order and not node.is_parameter:
        why = ("it is not in this infer's exec order (symbolic mode: its value is substituted "
               "and it does not run) and no reader handed it its value")
    elif reader is not None and reader in order and order.index(src) > order.index(reader):
        why = "it comes after the reader in the exec order"
    else:
        last = f"infer {src.stamp}" if src.stamp >= 0 else "no infer"
        why = f"its value is from {last} of this request, this is infer {net.epoch}"
    raise RuntimeInvariantError(f"{who} reads output {k} of {node.kind} '{node.name}' "
                                f"(producer), which has not produced it in this infer: {why}")


def check_write(inst: PrimitiveInst) -> None:
    """Raise when a launch of ``inst`` would write outputs that are not the shapes it computed
    or that overrun the buffers under them."""
    node, shapes = inst.node, inst.out_shapes
    if shapes is None:
        raise RuntimeInvariantError(f"{node.kind} '{node.name}' is about to launch with no "
                                    "output shapes")
    for i, t in enumerate(inst.outputs):
        shape = tuple(shapes[i])
        if t is not None and tuple(t.shape) == shape and \
                (t.offset + t.extent()) * t.dtype.itemsize <= t.alloc.nbytes:
            continue
        held = "no tensor" if t is None else \
            f"a tensor {list(t.shape)} at element {t.offset} of {t.alloc.nbytes} bytes"
        raise RuntimeInvariantError(f"{node.kind} '{node.name}' is about to write output {i} "
                                    f"{list(shape)} into {held}")
