"""A primitive of one infer request: :class:`PrimitiveInst` holds its runtime state; its steps,
in the order the reference runs them, live one per module of this package (``update_shape``
with the runtime skip checks, ``update_impl``, ``update_weights``, ``realloc`` with the views
of skipped primitives, ``execute``) and :meth:`PrimitiveInst.prepare` chains them."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import AllocationError, FileAccessError, NetpassError
from ...ops.shape_ops import ShapeOf
from ..impls import Impl, extras_fit, size
from ..lru import LruCache
from ..memory import Tensor
from ..program_node import ProgramNode
from ..shape_infer import ShapeInfer
from .execute import Execute
from .realloc import Realloc
from .update_impl import UpdateImpl
from .update_shape import UpdateShape
from .update_weights import UpdateWeights

if TYPE_CHECKING:  # pragma: no cover
    from ..network import Network


def primitive_error(inst: PrimitiveInst, e: Exception) -> NetpassError:
    """The NetpassError for ``e`` raised by ``inst``'s step, naming its kind, id and input
    shapes (an AllocationError for lack of memory)."""
    n = inst.node
    shapes = [list(s) for s in (inst.in_shapes or ())]
    if isinstance(e, MemoryError):
        return AllocationError(f"{n.kind} '{n.name}' ran out of memory at runtime with input "
                               f"shapes {shapes} ({e})")
    if isinstance(e, OSError):  # (pyopencl's kernel cache on a full or read-only disk)
        return FileAccessError(f"{n.kind} '{n.name}' with input shapes {shapes}: "
                               f"{e.strerror or e}" + (f": {e.filename}" if e.filename else ""))
    return NetpassError(f"{n.kind} '{n.name}' failed at runtime with input shapes {shapes}: "
                        f"{type(e).__name__}: {e}")


class PrimitiveInst(UpdateShape, UpdateImpl, UpdateWeights, Realloc, Execute):
    """Runtime state of one program node in one infer request (its steps: the base classes)."""

    def __init__(self, net: Network, node: ProgramNode) -> None:
        self.net = net
        self.node = node
        n_out = node.num_outputs
        self.in_shapes: tuple | None = None
        self.out_shapes: list[tuple] | None = None
        self.outputs: list[Tensor | None] = [None] * n_out
        self.own: list = [None] * n_out          # allocation owned by this inst (or None: alias)
        self.parked: list | None = None  # per output, (own, capacity) set aside while a view
        self.capacity = [0] * n_out              # elements
        self.host: list[np.ndarray | None] = [None] * n_out
        self.host_valid = [False] * n_out
        self.device_valid = [False] * n_out
        self.values: dict[int, np.ndarray] = {}
        self.impl: Impl | None = None
        self.kernels: list = []  # launcher.KernelHandle per launch of the impl
        self.kernels_of: dict = {}  # Impl.sources -> this request's kernels for those launches
        self.shape_changed = self.impl_changed = self.skip = False
        self.can_be_optimized = False
        self.done_by_other = False
        self.allocation_done_by_other = False
        self.concat_decided = False
        self.inplace_now = False
        self.executed_once = False
        self.stamp = -1  # the infer (Network.epoch) that last produced the outputs
        self.pending_host: list[np.ndarray] | None = None
        row = node.row
        # FullyConnected with constant weights: this request's reordered weights by layout
        self.weights: LruCache | None = LruCache(net.weights_cache_capacity) \
            if row.reorders_weights and node.inputs[1][0].is_constant else None
        self.weights_tensor: Tensor | None = None
        self.weights_layout: tuple | None = None  # the reordered weights' key in ``weights``
        self.shape_fn = ShapeInfer(node)
        self.events: list = []
        self.desc_id: int | None = None
        self.fused_src: PrimitiveInst | None = None
        self.deps = node.get_shape_infer_dependencies()
        self.strided_order = sorted(node.strided_inputs)
        self.impl_memo: dict = {}  # per-primitive stages and kernel sources (impls.Params.cached)
        # the in-place concat candidate this primitive is the single input producer of
        self.concat_user = node.users[0][0][0] \
            if node.num_outputs == 1 and len(node.users[0]) == 1 \
            and node.users[0][0][0].inplace_concat else None
        self.src_insts: list[tuple[PrimitiveInst, int]] = []
        self.extra_insts: list[tuple[PrimitiveInst, int]] = []
        self.computed_extras: list[tuple[PrimitiveInst, int]] = []
        self.shape_of_insts: list[PrimitiveInst] = []
        # FullyConnected itself or feeding one: allocations use fake-aligned sizes
        self.fc_related: bool = row.fake_aligned or any(
            u.row.fake_aligned for lst in node.users for u, _ in lst)
        self.view_offset: int | None = None
        self.result_names: dict[int, str] = {}  # output -> the network output it is (Network)
        self.zero_copy = [False] * n_out  # output written in place into the returned array
        # symbolic mode: deps read from the device/host (not substituted), dead producers fed
        self.sym_need = [j for j in self.deps
                         if j not in node.sym_deps and not node.inputs[j][0].is_constant]
        self.sym_feeds: dict[int, tuple[PrimitiveInst, int]] = {}
        self.node_static_shapes: list[tuple] | None = None
        boundary = node.is_constant or node.is_parameter or node.is_result
        self.passive = boundary or node.fused_into is not None
        self.shape_of = node.is_a(ShapeOf)
        self.data_dependent = row.data_dependent  # output shapes from the data: on the host
        # ReadValue, Assign, in-place append: state_marks.py
        self.state_role: str | None = node.state_role
        self.n_fused = len(node.fused)
        self.single = node.num_outputs == 1 and not self.fc_related  # _realloc_single applies
        self.out_dtype = node.out_dtypes[0] if node.out_dtypes else None
        # a kernel primitive with none of the special cases: step_recorded applies
        self.plain = node.has_kernel and not self.passive and not node.in_shape_of_subgraph \
            and not self.data_dependent and not node.runtime_skippable \
            and not node.inplace_concat and self.concat_user is None and not node.shape_only \
            and not row.always_view and node.permute_view is None \
            and node.state_role is None
        self._empty_for: list | None = None  # the out_shapes list ``_empty`` was computed for
        self._empty = False
        self.recordable = not self.sym_need and not node.in_shape_of_subgraph and \
            not self.data_dependent and not boundary and node.state_role is None
        self.rec_key: tuple | None = None
        self.rec_impl: Impl | None = None
        self.desc_key = (node.op_class, repr(sorted(node.attrs.items(), key=lambda kv: kv[0])),
                         tuple(f.key() for f in node.fused),
                         tuple(sorted(node.permuted_inputs.items())),
                         node.subgraph.key() if node.subgraph is not None else None,
                         node.mlp_fold is not None, node.rotary_fold is not None,
                         node.proj_fold is not None)
        if node.is_constant:
            self.out_shapes = [tuple(node.value.shape)]
            self.host[0] = node.value
            self.host_valid[0] = True

    # -- helpers ----------------------------------------------------------------------------------
    def src(self, j: int) -> tuple[PrimitiveInst, int]:
        return self.src_insts[j]

    def reset_flags(self) -> None:
        self.shape_changed = self.impl_changed = self.skip = False
        self.done_by_other = self.allocation_done_by_other = self.concat_decided = False

    @property
    def keeps_host_arrays(self) -> bool:
        """Whether its host arrays stay the request's or the caller's (a constant, a shape_of
        value the request reuses, an input): an inference hands them out as copies."""
        node = self.node
        return node.is_constant or node.in_shape_of_subgraph or node.is_parameter

    def hand_over(self, k: int, arr: Any) -> None:
        """Output ``k``'s array ``arr`` goes to the caller: where it is the memory the output
        was written into in place, the primitive lets it go (a new buffer next time)."""
        own = self.own[k]
        if self.zero_copy[k] and own is not None and own.host is arr:
            self._release_own(k)

    def add_event_times(self, times: dict) -> None:
        """Its profiling events' microseconds added into ``times`` (by node id), then dropped."""
        for ev in self.events:
            times[self.node.id] = times.get(self.node.id, 0.0) + \
                (ev.profile.end - ev.profile.start) / 1000.0
        self.events = []

    def forget_shapes(self, entering_symbolic: bool) -> None:
        """Forget the shapes and values this primitive remembers (a mode switch, a failed
        inference): held over, they are stale. ``entering_symbolic``: a producer that will not
        run in symbolic mode takes its node's static shapes."""
        if self.node.is_constant:
            return
        self.in_shapes = None
        self.values = {}
        self.rec_key = self.rec_impl = None  # (a symbolic record is for its binding only)
        if self.node.in_shape_of_subgraph:
            self.out_shapes = None
            self.executed_once = False
            self.host_valid = [False] * self.node.num_outputs
        if entering_symbolic and self.node_static_shapes is not None:
            self.out_shapes = self.node_static_shapes

    # -- the per-primitive sequence ---------------------------------------------------------------
    def prepare(self) -> None:
        """Every step before the launch: in-place concat, update_shape, the skips,
        update_impl, update_weights and realloc_if_needed (or the views of a skipped
        primitive)."""
        node = self.node
        net = self.net
        if self.state_role is not None:
            net.state.prepare(self)
            return
        if self.concat_user is not None:
            self.do_runtime_in_place_concat()
        self.update_shape()
        if self.passive:
            return
        if self.out_shapes is not self._empty_for:  # other outputs may still need values
            self._empty_for = self.out_shapes
            self._empty = all(size(s) == 0 for s in self.out_shapes)
        # an empty output that a fused side input grows (relu(c[1, 0]) + a[2, 0]) is the host
        # path's to size (update_impl): skipped, it kept the producer's shape
        out = self.out_shapes
        grows = self._empty and bool(self.computed_extras) and out is not None and not \
            extras_fit([i.out_shapes[k] for i, k in self.extra_insts if i.out_shapes], out[0])
        if self._empty and not grows or node.shape_only:
            self.skip = True
        elif node.in_shape_of_subgraph and self.executed_once and net.binding is None and \
                not any(so.shape_changed for so in self.shape_of_insts):
            self.skip = True  # (symbolic mode: the ShapeOfs may not have run; always re-run)
        if self.skip:
            self.done_by_other = False
            return
        if node.in_shape_of_subgraph or self.data_dependent:
            return
        self.runtime_skip_checks()
        if self.can_be_optimized and node.inplace_concat:
            # the inputs already wrote into the buffer their first one allocated
            self.device_valid[0], self.host_valid[0] = True, False
            net.stats["skipped"] += 1
        elif self.can_be_optimized:
            self.update_output_memory()
        elif self.shape_changed or self.impl is None:
            self.update_impl()
            if self.rec_key is not None:
                self._record(self.impl)
            if self.impl_changed or any(o is None for o in self.own):
                self.update_weights()
            # an unchanged implementation does not mean unchanged outputs: its shapes may be
            # back after infers that were views (an in-place concat whose inputs resized its
            # buffer to a batch of 1 in between)
            self.realloc_if_needed()
            return
        else:
            self._refresh_inplace_view()
        if self.rec_key is not None:
            self._record(None)
