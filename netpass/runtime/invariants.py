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
