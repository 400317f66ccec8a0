"""Pausing Python's cyclic garbage collector around whole-graph work.

The IR holds no reference cycles (a node holds its producers strongly and its consumers
weakly), so reference counting frees what a rewrite drops; the cyclic collector only rescans
the (large, garbage-free) graph, which makes building or rewriting big models super-linear.
:func:`gc_paused` is the one place that pauses it: around reading and writing ONNX, each
matcher traversal, the GNA pipeline, ``compile_model`` and ``compile_program``, and each
runtime inference (which makes no reference cycles either).
"""
from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic collector around a whole-model rewrite: each collection rescans the
    (large, garbage-free) graph, which makes rewrites of big models super-linear; the graph
    holds no reference cycles (consumers are weak), so refcounting frees what a pass drops.

    On resuming, the objects the rewrite left (the new graph nodes: long-lived, and no
    garbage) go straight to the oldest generation, as :func:`promote_to_old_generation` says."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            promote_to_old_generation()
            gc.enable()


# Young objects above which a resumed collector would spend noticeable time rescanning them.
PROMOTE_ABOVE = 10_000


def promote_to_old_generation() -> None:
    """Move every object the collector tracks into its oldest generation without scanning.

    After a pause over a large model, the young generation holds everything allocated meanwhile
    (the rewritten graph's new nodes); the first allocation after resuming would scan all of
    it, and a later collection scan it again, only to find no garbage. ``gc.freeze()`` +
    ``gc.unfreeze()`` moves all tracked objects to the oldest generation in constant time
    instead (they are then looked at by full collections only). Done only when the young
    generation is that large, and not when the program froze objects itself (unfreezing would
    release them)."""
    if gc.get_count()[0] > PROMOTE_ABOVE and gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()
