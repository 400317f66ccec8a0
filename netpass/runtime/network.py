"""Per-request execution: a :class:`Network` of :class:`PrimitiveInst` over a shared
:class:`~netpass.runtime.program.Program`.

Each primitive, in exec order, runs the reference's sequence: runtime in-place concat (for its
concat user), ``update_shape``, zero-size / shape_of skips, runtime skip checks,
``update_impl`` (program-level LRU cache), ``update_weights``, ``realloc_if_needed``, setting
the kernel arguments that changed, then enqueue on the in-order queue (flushed every
FLUSH_EVERY primitives). A symbolic binding met again replays that sequence's outcome from its
:class:`~netpass.runtime.step_plan.StepPlan`. The host waits only to read a device value that a
shape needs, for a host fallback's inputs, and for the outputs.
"""
from __future__ import annotations

import time
from typing import Any, Mapping

import numpy as np

from ..core.gc_pause import gc_paused
from ..errors import AllocationError, FileAccessError, HostFallbackError, NetpassError
from . import impls
from .invariants import check_read
from .launcher import KernelHandle, make_launcher
from .lru import LruCache
from .memory import MemoryPool, Tensor, fake_aligned_shapes, oversized, reusable
from . import outputs
from .outputs import check_output_sizes
from .program import ALWAYS_OPTIMIZED, DYNAMIC_OUTPUT_KINDS, Program, ProgramNode
from .shape_infer import ShapeInfer, infer_host
from .shape_predictor import ShapePredictor
from .state import VariableStore
from .step_plan import StepPlan
from .symbolic import SymbolicShapes, substitute

FLUSH_EVERY = 64  # (NVIDIA H200, GPT loop: every 16 costs 7% more host time than 64)
SYMBOLIC_CHECKS = 2  # distinct input-shape bindings checked against full shape inference
SYMBOLIC_RECORDS = 256  # per node: bindings whose shapes and implementation are kept
GATHER_MAX_INDICES = 10 * 1024
KERNEL_LISTS = 512  # per primitive: implementations whose kernel objects are kept
SEEN = object()  # Network step plans: a binding met once, no plan built yet
STAT_KEYS = ("allocations", "allocated_bytes", "reuses", "pool_hits", "reclaims",
             "impl_cache_hits", "impl_cache_misses", "kernel_builds", "weight_reorders",
             "skipped", "fused", "shape_updates", "host_waits", "host_fallbacks",
             "kernels_enqueued", "set_arguments", "primitives", "infers", "symbolic_infers",
             "state_allocations", "state_appends")


def _size(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def primitive_error(inst: "PrimitiveInst", e: Exception) -> NetpassError:
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


class PrimitiveInst:
    """Runtime state of one program node in one infer request."""

    def __init__(self, net: "Network", node: ProgramNode) -> None:
        self.net = net
        self.node = node
        n_out = node.num_outputs
        self.in_shapes: tuple | None = None
        self.out_shapes: list[tuple] | None = None
        self.outputs: list[Tensor | None] = [None] * n_out
        self.own: list = [None] * n_out          # allocation owned by this inst (or None: alias)
        self.capacity = [0] * n_out              # elements
        self.host: list[np.ndarray | None] = [None] * n_out
        self.host_valid = [False] * n_out
        self.device_valid = [False] * n_out
        self.values: dict[int, np.ndarray] = {}
        self.impl: impls.Impl | None = None
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
        # FullyConnected with constant weights: this request's reordered weights by layout
        self.weights: LruCache | None = LruCache(net.weights_cache_capacity) \
            if node.kind == "FullyConnected" and node.inputs[1][0].kind == "Constant" else None
        self.weights_tensor: Tensor | None = None
        self.shape_fn = ShapeInfer(node)
        self.events: list = []
        self.desc_id: int | None = None
        self.fused_src: PrimitiveInst | None = None
        self.deps = node.get_shape_infer_dependencies()
        self.strided_order = sorted(node.strided_inputs)
        self.impl_memo: dict = {}  # per-primitive stages and kernel sources (impls.Params.cached)
        # the in-place concat candidate this primitive is the single input producer of
        self.concat_user = node.users[0][0][0] if node.num_outputs == 1 and len(node.users[0]) == 1 \
            and node.users[0][0][0].inplace_concat else None
        self.src_insts: list[tuple[PrimitiveInst, int]] = []
        self.extra_insts: list[tuple[PrimitiveInst, int]] = []
        self.computed_extras: list[tuple[PrimitiveInst, int]] = []
        self.shape_of_insts: list[PrimitiveInst] = []
        # FullyConnected itself or feeding one: allocations use fake-aligned sizes
        self.fc_related = node.kind == "FullyConnected" or any(
            u.kind == "FullyConnected" for lst in node.users for u, _ in lst)
        self.view_offset: int | None = None
        self.result_names: dict[int, str] = {}  # output -> the network output it is (Network)
        self.zero_copy = [False] * n_out  # output written in place into the returned array
        # symbolic mode: deps read from the device/host (not substituted), dead producers fed
        self.sym_need = [j for j in self.deps
                         if j not in node.sym_deps and node.inputs[j][0].kind != "Constant"]
        self.sym_feeds: dict[int, tuple[PrimitiveInst, int]] = {}
        self.node_static_shapes: list[tuple] | None = None
        self.passive = node.kind in ("Constant", "Parameter", "Result") or node.fused_into is not None
        self.state_role = node.state_role  # ReadValue, Assign, in-place append: state.py
        self.n_fused = len(node.fused)
        self.single = node.num_outputs == 1 and not self.fc_related  # _realloc_single applies
        self.out_dtype = node.out_dtypes[0] if node.out_dtypes else None
        # a kernel primitive with none of the special cases: step_recorded applies
        self.plain = node.has_kernel and not self.passive and not node.in_shape_of_subgraph \
            and node.kind not in DYNAMIC_OUTPUT_KINDS and not node.runtime_skippable \
            and not node.inplace_concat and self.concat_user is None and not node.shape_only \
            and node.kind not in ALWAYS_OPTIMIZED and node.permute_view is None \
            and node.state_role is None
        self._empty_for: list | None = None  # the out_shapes list ``_empty`` was computed for
        self._empty = False
        self.recordable = not self.sym_need and not node.in_shape_of_subgraph and \
            node.kind not in DYNAMIC_OUTPUT_KINDS and node.kind not in ("Parameter", "Constant", "Result") \
            and node.state_role is None
        self.rec_key: tuple | None = None
        self.rec_impl: impls.Impl | None = None
        self.desc_key = (node.kind, repr(sorted(node.attrs.items(), key=lambda kv: kv[0])),
                         tuple(f.key() for f in node.fused), tuple(sorted(node.permuted_inputs.items())),
                         node.subgraph.key() if node.subgraph is not None else None)
        if node.kind == "Constant":
            self.out_shapes = [tuple(node.value.shape)]
            self.host[0] = node.value
            self.host_valid[0] = True

    # -- helpers ----------------------------------------------------------------------------------
    def src(self, j: int) -> tuple["PrimitiveInst", int]:
        return self.src_insts[j]

    def reset_flags(self) -> None:
        self.shape_changed = self.impl_changed = self.skip = False
        self.done_by_other = self.allocation_done_by_other = self.concat_decided = False

    # -- the per-primitive sequence ---------------------------------------------------------------
    def prepare(self) -> None:
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
            self._empty = all(_size(s) == 0 for s in self.out_shapes)
        if self._empty or node.shape_only:
            self.skip = True
        elif node.in_shape_of_subgraph and self.executed_once and net.binding is None and \
                not any(so.shape_changed for so in self.shape_of_insts):
            self.skip = True  # (symbolic mode: the ShapeOfs may not have run; always re-run)
        if self.skip:
            self.done_by_other = False
            return
        if node.in_shape_of_subgraph or node.kind in DYNAMIC_OUTPUT_KINDS:
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
                self.realloc_if_needed()
            return
        else:
            self._refresh_inplace_view()
        if self.rec_key is not None:
            self._record(None)

    def do_runtime_in_place_concat(self) -> None:
        c = self.concat_user
        if c is None or self.done_by_other:
            return
        net = self.net
        cinst = net.insts[c.index]
        if cinst.concat_decided:
            return
        for s, _ in c.inputs:
            pi = net.insts[s.index]
            pi.update_shape()
            pi.done_by_other = True
        cinst.update_shape()
        cinst.done_by_other = True
        cinst.concat_decided = True
        shape = cinst.out_shapes[0]
        axis = c.attrs.get("axis", 0)
        axis = axis + len(shape) if axis < 0 else axis
        ok = _size(shape[:axis]) == 1 and all(_size(net.insts[s.index].out_shapes[0]) > 0 for s, _ in c.inputs)
        cinst.inplace_now = ok

    def update_shape(self) -> None:
        if self.done_by_other:
            self.done_by_other = False
            return
        node, net = self.node, self.net
        if node.kind == "Constant":
            return
        if node.kind == "Parameter":
            return  # set by the network from the user's array
        if net.binding is not None:
            self._update_shape_symbolic(net.binding)
            return
        insts = net.insts
        in_shapes = tuple([i.out_shapes[k] for i, k in self.src_insts])
        changed = in_shapes != self.in_shapes
        self.in_shapes = in_shapes
        self.shape_changed = changed
        first = self.out_shapes is None
        if node.kind == "ShapeOf" and not changed and not first:
            return
        if node.in_shape_of_subgraph and not first and \
                not any(so.shape_changed for so in self.shape_of_insts):
            self.shape_changed = False
            return
        need = []
        for j in self.deps:
            s, k = node.inputs[j]
            if s.kind == "Constant":
                self.values[j] = s.value
                continue
            if s.in_shape_of_subgraph and j in self.values and \
                    not any(insts[so.index].shape_changed for so in s.dependant_shape_ofs):
                continue
            changed = True
            need.append(j)
        if not changed and not first:
            return
        if need:
            vals = net.host_values([self.src(j) for j in need])
            for j, v in zip(need, vals):
                self.values[j] = v
        out = self._infer_outputs(in_shapes)
        if out != self.out_shapes:
            self.shape_changed = True
        self.out_shapes = out
        if net.check_binding is not None:
            self._check_symbolic(net.check_binding)

    def _infer_outputs(self, in_shapes: tuple, binding: dict | None = None) -> list[tuple]:
        """Output shapes from the input shapes and ``self.values`` (``_output_shapes``); a
        network output over ``MAX_OUTPUT_BYTES`` is refused here, before any allocation."""
        out = self._output_shapes(in_shapes, binding)
        if self.result_names:
            check_output_sizes(self.result_names, out, self.node.out_dtypes, self.net.max_output_bytes)
        return out

    def _output_shapes(self, in_shapes: tuple, binding: dict | None) -> list[tuple]:
        """Data-dependent ops run on the host, substitution where the binding allows it, else
        the shape rules."""
        node = self.node
        self.net.stats["shape_updates"] += 1
        if node.kind in DYNAMIC_OUTPUT_KINDS:
            arrays = self.net.host_values([self.src(j) for j in range(len(node.inputs))])
            self.pending_host = infer_host(node, arrays)
            return [tuple(a.shape) for a in self.pending_host]
        if binding is not None and node.sym_out is not None:
            return [substitute(e, binding) for e in node.sym_out]
        if node.kind == "ShapeOf":
            return [(len(in_shapes[0]),)]
        return self.shape_fn(list(in_shapes), self.values)

    def _update_shape_symbolic(self, b: dict) -> None:
        """update_shape when the inputs bind the program's symbols: dep values and output
        shapes by substitution where the partial shapes allow it (their ShapeOf sub-graphs
        do not run; values are handed to those dead producers for any other reader).

        What a node computes here is a function of its input shapes and the binding when
        every dep is substituted or constant: such nodes keep it, with their implementation,
        in ``node.sym_records`` (shared by the compiled model's requests; the kernels that
        run the implementation are each request's own), so that a binding seen before costs
        one lookup."""
        node, net = self.node, self.net
        in_shapes = tuple([i.out_shapes[k] for i, k in self.src_insts])
        self.rec_key = self.rec_impl = None  # (a record's impl is only for this binding)
        if self.recordable:
            key = (net.binding_key, in_shapes)
            rec = node.sym_records.get(key)
            if rec is not None:
                out, values, self.rec_impl = rec
                self.shape_changed = out != self.out_shapes or in_shapes != self.in_shapes
                self.in_shapes, self.out_shapes, self.values = in_shapes, out, values
                if self.sym_feeds:
                    self._feed_dead_producers(values)
                return
            self.rec_key = key
        values = self.values = dict(self.values)
        changed = in_shapes != self.in_shapes
        for j, dep in node.sym_deps.items():
            v = SymbolicShapes.value(dep, b)
            old = values.get(j)
            if old is None or old.shape != v.shape or not (old == v).all():
                changed = True
                values[j] = v
        if self.sym_feeds:
            self._feed_dead_producers(values)
        self.in_shapes = in_shapes
        need = self.sym_need
        if not changed and not need and self.out_shapes is not None and not node.in_shape_of_subgraph:
            self.shape_changed = False
            return
        for j in self.deps:
            if node.inputs[j][0].kind == "Constant":
                values[j] = node.inputs[j][0].value
        if need:
            for j, v in zip(need, net.host_values([self.src(j) for j in need])):
                values[j] = v
        out = self._infer_outputs(in_shapes, b)
        self.shape_changed = changed or out != self.out_shapes
        self.out_shapes = out

    def _feed_dead_producers(self, values: dict) -> None:
        epoch = self.net.epoch
        for j, (src, k) in self.sym_feeds.items():
            src.stamp = epoch
            src.out_shapes = src.node_static_shapes
            src.host[k] = values[j]
            src.host_valid[k] = True
            src.device_valid[k] = False

    def _record(self, impl: impls.Impl | None) -> None:
        """Keep this binding's shapes, values and implementation (see above)."""
        self.net.compiled.store(self.node.sym_records, self.rec_key,
                                (self.out_shapes, self.values, impl), SYMBOLIC_RECORDS)
        self.rec_key = None

    def _check_symbolic(self, b: dict) -> None:
        """Full-path shapes and values against what substitution would give; a difference
        turns the symbolic path off for the compiled model."""
        node = self.node
        bad = node.sym_out is not None and [substitute(e, b) for e in node.sym_out] != self.out_shapes
        for j, dep in node.sym_deps.items():
            v = self.values.get(j)
            if v is not None and not np.array_equal(SymbolicShapes.value(dep, b), v):
                bad = True
        if bad:
            self.net.compiled.symbolic_ok = False
            self.net.stats["symbolic_mismatches"] = self.net.stats.get("symbolic_mismatches", 0) + 1

    def runtime_skip_checks(self) -> None:
        node = self.node
        was = self.can_be_optimized
        self.can_be_optimized = False
        k = node.kind
        if k in ALWAYS_OPTIMIZED or node.permute_view is not None:
            self.can_be_optimized = True
        elif node.inplace_concat:
            if not self.concat_decided:
                self.inplace_now = False
            self.can_be_optimized = self.inplace_now
        elif node.runtime_skippable:
            ins, outs = self.in_shapes, self.out_shapes
            if k == "Transpose":
                self.can_be_optimized = self._permute_is_noop()
            elif k == "Gather":
                self.can_be_optimized = self._gather_is_identity()
            elif k == "CropIE":
                self.view_offset = self._contiguous_crop_offset()
                self.can_be_optimized = self.view_offset is not None
            elif node.strided_view:
                self.can_be_optimized = k != "Slice" or self._positive_steps()
            elif k == "Slice":
                self.view_offset = self._contiguous_slice_offset()
                self.can_be_optimized = self.view_offset is not None
            elif k in ("StridedSlice", "Broadcast"):
                same = ins[0] == outs[0]
                if same and k == "StridedSlice":
                    step = self.values.get(3)
                    same = step is None or bool(np.all(np.asarray(step) == 1))
                self.can_be_optimized = same
        if was != self.can_be_optimized:
            self.shape_changed = True

    def _permute_is_noop(self) -> bool:
        shape = self.in_shapes[0]
        v = self.values.get(1)
        order = [int(x) for x in np.asarray(v).reshape(-1)] if v is not None and np.asarray(v).size \
            else list(range(len(shape)))[::-1]
        dest = [0] * len(order)
        for i, o in enumerate(order):
            dest[o] = i
        last = -1
        for i, d in enumerate(shape):
            if d > 1:
                if dest[i] < last:
                    return False
                last = dest[i]
        return True

    def _gather_is_identity(self) -> bool:
        data, idx = self.in_shapes[0], self.in_shapes[1]
        axis_v = self.values.get(2)
        if axis_v is None or _size(data) == 0 or len(idx) != 1:
            return False
        axis = int(np.asarray(axis_v).reshape(-1)[0]) % len(data)
        dim = data[axis]
        if idx[0] != dim or dim > GATHER_MAX_INDICES:
            return False
        if dim == 1:
            return True
        ind = self.net.host_values([self.src(1)])[0]
        return bool(np.array_equal(np.asarray(ind).reshape(-1), np.arange(dim)))

    def _contiguous_crop_offset(self) -> int | None:
        """Element offset of a CropIE whose result is one contiguous piece of its input (all
        dims before the first cropped one are 1, all after it are whole), else None."""
        a = self.node.attrs
        shape, out = self.in_shapes[0], self.out_shapes[0]
        cropped = [i for i, (d, o) in enumerate(zip(shape, out)) if d != o]
        if not cropped:
            return 0
        first = cropped[0]
        if _size(shape[:first]) != 1 or cropped != [first]:
            return None
        stride = _size(shape[first + 1:])
        off = dict(zip(a.get("axes", []), a.get("offset", [])))
        return sum(int(off.get(i, 0)) * (stride if i == first else 0) for i in range(len(shape)))

    def _positive_steps(self) -> bool:
        v = self.values
        return all(j in v for j in (1, 2, 3)) and all(int(x) > 0 for x in np.asarray(v[3]).reshape(-1))

    def _contiguous_slice_offset(self) -> int | None:
        """Element offset of a unit-step Slice whose result is one contiguous piece of its
        input (the rows ``[:s]`` of a mask, a whole tensor), else None."""
        shape, out = self.in_shapes[0], self.out_shapes[0]
        v = self.values
        if any(j not in v for j in (1, 2, 3)):
            return None
        starts, ends, steps = (np.asarray(v[j]).reshape(-1).tolist() for j in (1, 2, 3))
        axes = np.asarray(v[4]).reshape(-1).tolist() if 4 in v else list(range(len(starts)))
        begin = [0] * len(shape)
        for a, b, e, st in zip(axes, starts, ends, steps):
            if st != 1:
                return None
            a %= len(shape)
            begin[a] = slice(b, e, 1).indices(shape[a])[0]
        cut = [i for i, (d, o) in enumerate(zip(shape, out)) if d != o]
        if not cut:
            return 0
        first = cut[0]
        if _size(shape[:first]) != 1 or cut != [first] or any(begin[i] for i in range(len(shape)) if i != first):
            return None
        return begin[first] * _size(shape[first + 1:])

    def update_output_memory(self) -> None:
        """A skipped primitive's outputs are views of its input buffer: at the crop or slice
        offset, through a permutation (read by its MatMul), or strided (``strided_view``: split
        pieces, a stepped slice; a Reshape of such a view keeps walking its strides)."""
        src, k = self.src(0)
        t = self.net.device_tensor(src, k)
        self.set_views(t, self._views(t))
        self.net.stats["skipped"] += 1

    def set_views(self, t: Tensor, views: list[tuple[int, tuple | None]]) -> None:
        """Outputs as views of ``t``: per output, (element offset from ``t``'s, strides)."""
        for i, (offset, strides) in enumerate(views):
            self._release_own(i)
            self.outputs[i] = Tensor(t.alloc, t.offset + offset, self.out_shapes[i], t.dtype, strides)
            self.device_valid[i] = True
            self.host_valid[i] = False

    def _views(self, t: Tensor) -> list[tuple[int, tuple | None]]:
        """(element offset from ``t``'s, strides or None: contiguous) of each output."""
        node = self.node
        base = t.strides
        if node.permute_view is not None:
            st = base if base is not None else impls.contiguous_strides(t.shape)
            return [(0, tuple(st[o] for o in node.permute_view))]
        kind = node.kind
        if node.strided_view or (base is not None and kind in ALWAYS_OPTIMIZED):
            st = list(base) if base is not None else impls.contiguous_strides(t.shape)
            if kind == "Slice":
                offset, out = impls.slice_view(t.shape, st, self.values)
                return [(offset, tuple(out))]
            if kind in ("Split", "VariadicSplit"):
                axis = int(np.asarray(self.values[1]).reshape(-1)[0]) % len(t.shape)
                views, pos = [], 0
                for shape in self.out_shapes:
                    views.append((pos * st[axis], tuple(st)))
                    pos += shape[axis]
                return views
            strides = impls.reshape_strides(t.shape, st, self.out_shapes[0])
            if strides is None:  # (Program._mark_strided_views admits only reshapes that fit)
                raise NetpassError(f"{kind} '{node.name}': no strided view of {list(t.shape)} as "
                                   f"{list(self.out_shapes[0])}")
            return [(0, tuple(strides))]
        offset = self.view_offset if kind in ("CropIE", "Slice") else 0
        return [(offset, None)]

    def _params(self, values: dict) -> impls.Params:
        node = self.node
        attrs = node.attrs
        if self.weights_tensor is not None:
            attrs = dict(attrs, _weights_reordered=True)
        strides = None
        if node.permuted_inputs or node.strided_inputs:
            strides = [None] * len(node.inputs)
            for j in set(node.permuted_inputs) | node.strided_inputs:
                i, k = self.src_insts[j]
                strides[j] = i.outputs[k].strides
        return impls.Params(kind=node.kind, attrs=attrs, in_shapes=list(self.in_shapes), in_strides=strides,
                        in_dtypes=[s.out_dtypes[k] for s, k in node.inputs],
                        out_shapes=list(self.out_shapes), out_dtypes=node.out_dtypes, values=values,
                        fused=node.fused, extra_shapes=[tuple(i.out_shapes[k]) for i, k in self.extra_insts],
                        extra_dtypes=[s.out_dtypes[k] for s, k in node.fused_inputs],
                        node=node, engine=self.net.engine, memo=self.impl_memo,
                        precision=self.net.compiled.precision)

    def update_impl(self) -> None:
        node, net = self.node, self.net
        reorder = self.weights is not None
        impl = self.rec_impl
        if impl is not None:
            self.rec_impl = None
            net.stats["impl_cache_hits"] += 1
            self._set_impl(impl)
            return
        vals = self.values
        if self.desc_id is None:
            extras = tuple((tuple(s.value.shape) if s.value is not None else None, s.out_dtypes[k].str)
                           for s, k in node.fused_inputs)  # fused constants' shapes set strides
            desc = (self.desc_key, tuple(s.out_dtypes[k].str for s, k in node.inputs), extras, reorder)
            self.desc_id = net.compiled.desc_id(desc)
        key = (self.desc_id, self.in_shapes, tuple(self.out_shapes),
               tuple([(j, v.tobytes()) for j, v in vals.items()]) if vals else (),
               # computed side inputs of the epilogue broadcast by their own shapes
               tuple([i.out_shapes[k] for i, k in self.computed_extras]) if self.computed_extras else (),
               # strided views are read through their strides
               tuple([self.src_insts[j][0].outputs[self.src_insts[j][1]].strides
                      for j in self.strided_order]) if self.strided_order else ())
        impl = net.compiled.cached_impl(key)
        if impl is not None:
            net.stats["impl_cache_hits"] += 1
        else:
            net.stats["impl_cache_misses"] += 1
            p = self._params(vals)
            if reorder:
                p.attrs = dict(p.attrs, _weights_reordered=True)
            impl = impls.create_device_impl(p, key) if node.has_kernel else None
            if impl is None:
                impl = impls.Impl(key, host=True)
            else:
                for ln in impl.launches:
                    net.engine.build(ln.source.text, net.stats)
            net.compiled.cache_impl(key, impl)
        self._set_impl(impl)

    def _set_impl(self, impl: impls.Impl) -> None:
        """Make ``impl`` current, with this request's kernel objects for it."""
        if impl is not self.impl:
            self.impl = impl
            self.impl_changed = True
            self.kernels = self.kernels_for(impl)

    def kernels_for(self, impl: impls.Impl) -> list[KernelHandle]:
        """This request's kernel objects for the launches of ``impl`` (made at first use,
        then kept by the launches' sources, which the implementations of most shapes share:
        a lookup per new implementation)."""
        kernels = self.kernels_of.get(impl.sources)
        if kernels is None:
            if len(self.kernels_of) >= KERNEL_LISTS:
                self.kernels_of.clear()
            objs, index = self.net.kernel_objects, self.node.index
            kernels = []
            for slot, ln in enumerate(impl.launches):
                h = objs.get((index, slot, ln.source.text))
                kernels.append(h if h is not None else self._kernel(slot, ln))
            self.kernels_of[impl.sources] = kernels
        return kernels

    def _kernel(self, slot: int, ln: impls.Launch) -> KernelHandle:
        """The kernel of this primitive's launch ``slot`` running ``ln``'s source. Each request
        has its own (a kernel's arguments are state: ``clSetKernelArg`` on a kernel shared by
        two threads is a race): one a request before it left behind (``RuntimeCompiledModel.
        take_kernel``: making one costs about 0.25 ms in pyopencl on PoCL), else a new one from
        the engine's built program; its handle knows the arguments last set on it."""
        net = self.net
        objs = net.kernel_objects
        key = (self.node.index, slot, ln.source.text)
        h = objs.get(key)
        if h is None:
            h = net.compiled.take_kernel(key)
            if h is None:
                kern = net.engine.cl.Kernel(net.engine.build(ln.source.text, net.stats), ln.source.name)
                h = KernelHandle(kern)
            objs[key] = h
        return h

    def update_weights(self) -> None:
        """FullyConnected: weights [N, K] reordered once to [K, N] (coalesced GEMM reads),
        kept in a per-inst LRU cache keyed by the target layout."""
        if self.weights is None or self.impl is None or self.impl.is_host:
            return
        net = self.net
        s, k = self.node.inputs[1]
        w = s.value
        layout = ("KN", tuple(w.shape), w.dtype.str)
        t = self.weights.get(layout)
        if t is None:
            n_, k_ = w.shape[0], _size(w.shape[1:])
            src = net.device_tensor(net.insts[s.index], k)
            alloc = net.engine.allocate(w.nbytes)
            net.count_alloc(alloc)
            t = Tensor(alloc, 0, (k_, n_), w.dtype)
            ln = impls.strided_copy(w.dtype, (k_, n_), [1, k_], 0, [n_, 1], 0, 0, 0)
            h = KernelHandle(net.engine.cl.Kernel(net.engine.build(ln.source.text, net.stats), ln.source.name))
            net.launcher.set_args(h, *ln.args([src], [t], []))
            net.launcher.launch(h, ln)
            self.weights.add(layout, t)
            net.stats["weight_reorders"] += 1
        self.weights_tensor = t

    def _fc_alloc_shape(self, i: int) -> tuple:
        """Allocation shape of output i: fake-aligned for FullyConnected, enlarged to what a
        FullyConnected user reads."""
        node, net = self.node, self.net
        shape = self.out_shapes[i]
        n = _size(shape)
        if node.kind == "FullyConnected" and len(shape) >= 2:
            n = max(n, _size(fake_aligned_shapes(self.in_shapes[0], shape[-1],
                                                 integrated=net.engine.integrated)[1]))
        for u, j in node.users[i]:
            if u.kind == "FullyConnected" and j == 0 and len(shape) >= 2:
                w = u.inputs[1][0].out_pshapes[u.inputs[1][1]]
                if w.is_static:
                    n = max(n, _size(fake_aligned_shapes(shape, w.to_shape()[0],
                                                         integrated=net.engine.integrated)[0]))
        return n

    def realloc_if_needed(self) -> None:
        node, net = self.node, self.net
        if self.impl is not None and self.impl.host:
            return
        c = self.concat_user
        if c is not None and net.insts[c.index].inplace_now:
            self._write_into_concat(c)
            return
        if self.allocation_done_by_other:
            self.allocation_done_by_other = False
            return
        pred = net.predictor
        capacity = self.capacity
        for i, shape in enumerate(self.out_shapes):
            dt = node.out_dtypes[i]
            if self.zero_copy[i] and _size(shape) * dt.itemsize >= net.zero_copy_min_bytes:
                # a new array per infer, returned as is
                pred.record(ShapePredictor.key(node.id, i), shape)
                self._release_own(i)
                alloc = net.engine.allocate_host(shape, dt, f"output '{self.result_names[i]}'")
                self.own[i], self.capacity[i] = alloc, _size(shape)
                self.outputs[i] = Tensor(alloc, 0, tuple(shape), dt)
                continue
            need = self._fc_alloc_shape(i) if self.fc_related else _size(shape)
            if capacity[i] and oversized(need, capacity[i]):
                capacity[i] = 0
                net.stats["reclaims"] += 1
            can_reuse = self.own[i] is not None and need <= capacity[i]
            ok, pshape = pred.predict_preallocation_shape(node.id, shape, dt.itemsize * 8, can_reuse, i)
            if can_reuse:
                self.outputs[i] = Tensor(self.own[i], 0, shape, dt)
                net.stats["reuses"] += 1
                continue
            size = need
            if ok and pred.can_preallocate(_size(pshape) * dt.itemsize):
                size = max(size, _size(pshape))
            self._release_own(i)
            alloc = net.allocate_output(node, size * dt.itemsize)
            self.own[i] = alloc
            self.capacity[i] = alloc.nbytes // dt.itemsize
            self.outputs[i] = Tensor(alloc, 0, tuple(shape), dt)

    def _realloc_single(self) -> None:
        """realloc_if_needed of a plain one-output primitive, reuse first: the same decisions
        (the predictor records the shape on reuse too), fewer steps."""
        shape = self.out_shapes[0]
        need = _size(shape)
        own = self.own[0]
        if not reusable(own, self.capacity[0], need):
            self.realloc_if_needed()
            return
        net = self.net
        net.predictor.record(self.node.id, shape)
        self.outputs[0] = Tensor(own, 0, shape, self.out_dtype)
        net.stats["reuses"] += 1

    def _write_into_concat(self, c: ProgramNode) -> None:
        net = self.net
        cinst = net.insts[c.index]
        if not cinst.allocation_done_by_other:
            cinst.realloc_if_needed()
            cinst.allocation_done_by_other = True
        self._release_own(0)
        self._refresh_inplace_view()

    def _refresh_inplace_view(self) -> None:
        node = self.node
        c = self.concat_user
        if c is None:
            return
        cinst = self.net.insts[c.index]
        if not cinst.inplace_now:
            if self.own[0] is None:
                self.realloc_if_needed()
            return
        if not cinst.allocation_done_by_other:
            cinst.realloc_if_needed()
            cinst.allocation_done_by_other = True
        off = 0
        for s, _ in c.inputs:
            if s is node:
                break
            off += _size(self.net.insts[s.index].out_shapes[0])
        self.outputs[0] = cinst.outputs[0].view(tuple(self.out_shapes[0]), off)

    def _release_own(self, i: int) -> None:
        alloc = self.own[i]
        if alloc is not None:
            if alloc.pooled:
                self.net.pool.release(alloc, id(self.node))
            self.own[i] = None
            self.capacity[i] = 0

    # -- execution --------------------------------------------------------------------------------
    def execute(self) -> None:
        node = self.node
        if self.state_role is not None:
            self.net.state.execute(self)
            return
        if self.skip or self.passive:
            self.executed_once = self.executed_once or not self.skip
            if self.skip and all(_size(s) == 0 for s in self.out_shapes) and not node.shape_only:
                self._empty_outputs()
            return
        self.executed_once = True
        if node.in_shape_of_subgraph:
            self._host_eval()
            return
        if node.kind in DYNAMIC_OUTPUT_KINDS:  # computed on the host with its shapes
            self._count_host_fallback()
            self._set_host(self.pending_host)
            self.pending_host = None
            return
        if self.can_be_optimized:
            return
        if self.impl.host:
            self._host_run()
            return
        self._launch()

    def _count_host_fallback(self) -> None:
        net, kind = self.net, self.node.kind
        if not net.compiled.host_fallback:  # a fallback only these shapes or dtypes need
            raise HostFallbackError([(kind, self.node.name, "no kernel for these shapes")])
        net.stats["host_fallbacks"] += 1
        by_kind = net.stats["host_fallback_kinds"]
        by_kind[kind] = by_kind.get(kind, 0) + 1

    def step_recorded(self) -> None:
        """prepare + execute of a plain kernel primitive (``self.plain``) in symbolic mode:
        with a record for this binding and input shapes, what remains is memory and the
        launch; otherwise the full sequence."""
        net = self.net
        in_shapes = tuple([i.out_shapes[k] for i, k in self.src_insts])
        rec = self.node.sym_records.get((net.binding_key, in_shapes))
        if rec is None or rec[2] is None or rec[2].host:
            self.prepare()
            self.execute()
            return
        out, self.values, impl = rec
        self.in_shapes = in_shapes
        net.stats["impl_cache_hits"] += 1
        new_impl = impl is not self.impl
        if new_impl:
            self._set_impl(impl)
            if self.weights is not None:
                self.update_weights()
        if new_impl or out is not self.out_shapes or None in self.own:
            self.out_shapes = out
            self._realloc_single() if self.single else self.realloc_if_needed()
        self.executed_once = True
        self._launch()

    def _launch(self) -> None:
        """Set what changed of the kernels' arguments and enqueue them."""
        net, impl = self.net, self.impl
        stats = net.stats
        stats["primitives"] += 1
        used = impl.used_inputs
        if net.debug:
            for j in used:
                check_read(net, *self.src_insts[j])
            for i, k in self.extra_insts:
                check_read(net, i, k)
        ins: list = []
        for j, (i, k) in enumerate(self.src_insts):
            if j in used:
                t = i.outputs[k]
                ins.append(t if t is not None and i.device_valid[k] else net.device_tensor(i, k))
            else:
                ins.append(None)
        if self.weights_tensor is not None:
            ins[1] = self.weights_tensor
        extras = [net.device_tensor(i, k) for i, k in self.extra_insts] if self.extra_insts else ()
        outs = self.outputs
        bufs = net.impl_buffers(impl) if impl.buffers else None
        launcher = net.launcher
        changed = False
        for h, ln in zip(self.kernels, impl.launches):
            buffers, ints = ln.args(ins, outs, extras, bufs)
            # set only what changed since this request's last launch of the kernel
            if buffers != h.bufs or ints != h.ints:
                changed = launcher.set_args(h, buffers, ints) or changed
            ev = launcher.launch(h, ln)
            if ev is not None and net.profiling:
                self.events.append(ev)
        if changed:
            stats["set_arguments"] += 1
        stats["kernels_enqueued"] += len(impl.launches)
        if self.n_fused:
            stats["fused"] += self.n_fused
        dv, hv = self.device_valid, self.host_valid
        for i in range(len(dv)):
            dv[i] = True
            hv[i] = False

    def _empty_outputs(self) -> None:
        for i, s in enumerate(self.out_shapes):
            self._set_host_one(i, np.zeros(s, dtype=self.node.out_dtypes[i]))

    def _host_eval(self) -> None:
        node = self.node
        if node.kind == "ShapeOf":
            dt = node.out_dtypes[0]
            self._set_host([np.asarray(self.in_shapes[0], dtype=dt).reshape(-1)])
            return
        # only the data inputs: the target of a reshape-like is a shape-infer value whose
        # producer does not run in symbolic mode
        arrays = self.net.host_values([self.src(j) for j in node.data_inputs()])
        kind = node.kind
        if kind in ALWAYS_OPTIMIZED:  # shape math: the shape is known
            self._set_host([arrays[0].reshape(self.out_shapes[0])])
        elif kind == "Concat":
            self._set_host([np.concatenate(arrays, axis=node.attrs.get("axis", 0))])
        elif kind == "Gather" and not node.attrs.get("batch_dims", 0) and arrays[2].size == 1 \
                and arrays[1].dtype.kind in "iu" and arrays[0].ndim:
            axis = int(arrays[2].reshape(-1)[0]) % arrays[0].ndim
            idx = arrays[1]
            if idx.size and (idx.min() < -arrays[0].shape[axis] or idx.max() >= arrays[0].shape[axis]):
                self._set_host(infer_host(node, arrays))  # out-of-range semantics of the op
            else:
                self._set_host([np.take(arrays[0], idx, axis=axis)])
        else:
            self._set_host(infer_host(node, arrays))

    def _host_run(self) -> None:
        """Host fallback: the op's numpy reference on inputs read back from the device."""
        net = self.net
        node = self.node
        self._count_host_fallback()
        arrays = net.host_values([self.src(j) for j in range(len(node.inputs))])
        outs = infer_host(node, arrays)
        if node.fused:  # the kernel would have applied them
            def side(s, k):
                return s.value if s.value is not None else \
                    net.host_values([net.resolve(net.insts[s.index], k)])[0]
            outs = [impls.evaluate_fused(node.fused, outs[0], side, infer_host)] + outs[1:]
            net.stats["fused"] += len(node.fused)
        self._set_host(outs)
        if self.concat_user is not None and net.insts[self.concat_user.index].inplace_now:
            self._refresh_inplace_view()
            net.upload(self, 0, into=self.outputs[0])

    def _set_host(self, arrays: list[np.ndarray]) -> None:
        for i, a in enumerate(arrays):
            self._set_host_one(i, a)

    def _set_host_one(self, i: int, a: np.ndarray) -> None:
        dt = self.node.out_dtypes[i]
        a = np.asarray(a, dtype=dt, order="C")
        self.host[i] = a
        self.host_valid[i] = True
        self.device_valid[i] = False
        if self.out_shapes is not None and tuple(a.shape) != tuple(self.out_shapes[i]):
            self.out_shapes = list(self.out_shapes)  # (records may share the old list)
            self.out_shapes[i] = tuple(a.shape)


class Network:
    """One infer request's primitives, memory pool, predictor, kernel objects, command queue
    and counters."""

    def __init__(self, compiled: "Any") -> None:
        self.compiled = compiled
        self.program: Program = compiled.program
        self.engine = compiled.engine
        self.queue = self.engine.new_queue()
        self.launcher = make_launcher(self.engine, self.queue)
        self.kernel_objects: dict = {}  # (node index, launch slot, source) -> KernelHandle
        self.profiling = compiled.profiling
        self.stats: dict[str, Any] = {k: 0 for k in STAT_KEYS}
        self.stats["host_fallback_kinds"] = {}
        self.stats["host_wait_s"] = 0.0
        if self.profiling:
            self.stats["primitive_times_us"] = {}
        eng = self.engine
        self.predictor: ShapePredictor = compiled.make_predictor(
            max_global_mem_size=eng.max_global_mem_size, max_alloc_mem_size=eng.max_alloc_mem_size,
            used_device_memory=lambda: eng.used_device_memory)
        self.pool = MemoryPool(self._pool_alloc)
        self.weights_cache_capacity = compiled.weights_cache_capacity
        self.max_output_bytes = compiled.max_output_bytes
        self.zero_copy_min_bytes = max(outputs.ZERO_COPY_MIN_BYTES, 1)
        self.insts = [PrimitiveInst(self, n) for n in self.program.nodes]
        for inst in self.insts:
            node = inst.node
            if node.fused_into is not None:  # the chain predecessor whose output it is
                src = next(s for s, _ in node.inputs
                           if s is node.fused_into or s.fused_into is node.fused_into)
                inst.fused_src = self.insts[src.index]
        for inst in self.insts:
            node = inst.node
            # fused primitives never run: their users read the producer's output directly
            inst.src_insts = [self.resolve(self.insts[s.index], k) for s, k in node.inputs]
            inst.extra_insts = [self.resolve(self.insts[s.index], k) for s, k in node.fused_inputs]
            inst.computed_extras = [r for r, (s, _) in zip(inst.extra_insts, node.fused_inputs)
                                    if s.kind != "Constant"]
            inst.shape_of_insts = [self.insts[so.index] for so in node.dependant_shape_ofs]
        # constants, inputs (set from the user's arrays) and results (read from their source)
        # have nothing to do per primitive
        for r in self.program.outputs:  # which primitive holds each network output
            holder, k = self.resolve(self.insts[r.inputs[0][0].index], r.inputs[0][1])
            holder.result_names.setdefault(k, r.name)
            # written in place where device memory is host memory: a buffer of its own (not
            # a view, not an FC's fake-aligned one, not an input's or a constant's)
            holder.zero_copy[k] = self.engine.host_memory and holder.node.has_kernel \
                and not holder.fc_related and holder.node.kind not in ALWAYS_OPTIMIZED \
                and not holder.node.runtime_skippable and holder.node.permute_view is None \
                and not holder.node.in_shape_of_subgraph and not holder.node.strided_view
        self.order = [self.insts[n.index] for n in self.program.exec_order
                      if n.kind not in ("Constant", "Parameter", "Result") and n.fused_into is None]
        sym = self.program.symbolic
        live = {id(n) for n in sym.order}
        self.sym_order = [i for i in self.order if id(i.node) in live]
        for inst in self.insts:
            n = inst.node
            for j in n.sym_deps:
                s, k = n.inputs[j]
                if id(s) not in live:
                    src = self.insts[s.index]
                    src.node_static_shapes = SymbolicShapes.static_shapes(s)
                    if j in n.data_inputs():  # (a reader of the value only has it already)
                        inst.sym_feeds[j] = (src, k)
        self.binding: dict | None = None        # symbol values of this infer (symbolic mode)
        self.check_binding: dict | None = None  # full path, checked against substitution
        self.was_symbolic = False
        self.active_order = self.order  # the primitives the last infer went through
        self.debug = compiled.debug_checks  # invariants.check_read on every read
        self.epoch = 0  # infers begun; PrimitiveInst.stamp says which produced an output
        self.reader: PrimitiveInst | None = None  # (debug mode) the primitive running now
        self._impl_bufs: dict[int, list] = {}
        self._scratch: dict[tuple, object] = {}  # (size class, slot) -> allocation (scratch)
        self.state = VariableStore(self)  # this request's variables

    @staticmethod
    def resolve(inst: PrimitiveInst, k: int) -> tuple[PrimitiveInst, int]:
        """The instance that really holds output ``k`` of ``inst`` (a fused op's producer)."""
        while inst.fused_src is not None:
            inst, k = inst.fused_src, 0
        return inst, k

    def close(self) -> None:
        """Drop the links back to this network (primitives, pool), so that reference counting
        frees it and its device buffers as soon as its request is gone."""
        for inst in self.insts:
            inst.net = None
        self.pool = None
        self.state = None
        self.compiled.give_back_kernels(self.kernel_objects)
        self.kernel_objects = {}

    # -- memory -----------------------------------------------------------------------------------
    def count_alloc(self, alloc) -> None:
        self.stats["allocations"] += 1
        self.stats["allocated_bytes"] += alloc.nbytes

    def _pool_alloc(self, nbytes: int):
        alloc = self.engine.allocate(nbytes)
        self.count_alloc(alloc)
        return alloc

    def allocate_output(self, node: ProgramNode, nbytes: int):
        """Outputs of the network and nodes that must not share come straight from the engine;
        everything else from the pool (restricted by overlapping lifetimes)."""
        if node.is_output or node.in_shape_of_subgraph:
            alloc = self.engine.allocate(nbytes, what=f"{node.kind} '{node.name}'")
            self.count_alloc(alloc)
            return alloc
        before = self.pool.hits
        alloc, _ = self.pool.get_memory(nbytes, id(node), node.restrictions, node.is_dynamic)
        if self.pool.hits != before:
            self.stats["pool_hits"] += 1
        return alloc

    def impl_buffers(self, impl: impls.Impl) -> list:
        bufs = self._impl_bufs.get(id(impl))
        if bufs is None or len(bufs) != len(impl.buffers):
            bufs = []
            for slot, arr in enumerate(impl.buffers):
                if isinstance(arr, impls.Scratch):
                    bufs.append(self.scratch(arr.nbytes, slot))
                    continue
                alloc = self.engine.upload(arr, queue=self.queue)
                self.count_alloc(alloc)
                bufs.append(alloc)
            if len(self._impl_bufs) > 256:
                self._impl_bufs.clear()
            self._impl_bufs[id(impl)] = bufs
        return bufs

    def scratch(self, nbytes: int, slot: int = 0):
        """A device buffer of at least ``nbytes`` that no tensor owns (impls.Scratch), one per
        power-of-two size class and impl buffer position, shared by every primitive of this
        request."""
        size = 1 << max(int(nbytes) - 1, 0).bit_length()
        alloc = self._scratch.get((size, slot))
        if alloc is None:
            alloc = self._scratch[(size, slot)] = self.engine.allocate(size, what="GEMM scratch")
            self.count_alloc(alloc)
        return alloc

    def device_tensor(self, inst: PrimitiveInst, k: int) -> Tensor | None:
        """The device tensor of ``inst`` output ``k``, uploading a host value when needed."""
        if self.debug:
            check_read(self, inst, k)
        if inst.device_valid[k] and inst.outputs[k] is not None:
            return inst.outputs[k]
        node = inst.node
        if node.kind == "Constant":
            t = self.compiled.constant_tensor(node)
            inst.outputs[k] = t
            inst.device_valid[k] = True
            return t
        if inst.host_valid[k]:
            return self.upload(inst, k)
        if inst.outputs[k] is not None:
            return inst.outputs[k]
        raise NetpassError(f"{node.kind} '{node.name}': output {k} has no value yet")

    def upload(self, inst: PrimitiveInst, k: int, into: Tensor | None = None) -> Tensor:
        a = inst.host[k]
        if into is None:
            need = max(a.size, 1)
            can_reuse = inst.own[k] is not None and inst.capacity[k] >= need
            ok, pshape = self.predictor.predict_preallocation_shape(
                inst.node.id + "_upload", a.shape, a.dtype.itemsize * 8, can_reuse, k)
            if not can_reuse:
                if ok and self.predictor.can_preallocate(_size(pshape) * a.dtype.itemsize):
                    need = max(need, _size(pshape))
                inst._release_own(k)
                alloc = self.engine.allocate(need * a.dtype.itemsize)
                self.count_alloc(alloc)
                inst.own[k] = alloc
                inst.capacity[k] = alloc.nbytes // a.dtype.itemsize
            into = Tensor(inst.own[k], 0, tuple(a.shape), a.dtype)
        if a.size:  # (inst.host keeps ``a`` alive until the copy has run)
            self.launcher.write(into.alloc.buffer, into.offset * a.dtype.itemsize, a)
        inst.outputs[k] = into
        inst.device_valid[k] = True
        return into

    def host_values(self, refs: list[tuple[PrimitiveInst, int]]) -> list[np.ndarray]:
        """Host arrays of the given outputs; device values are read back with one wait. The
        wait is timed from the first read: a read enqueue may itself block until the queue
        has run (PoCL does), so timing ``finish`` alone would count device time as host time."""
        if self.debug:
            for inst, k in refs:
                check_read(self, inst, k)
        pending = []
        t0 = time.perf_counter()
        for inst, k in refs:
            if not inst.host_valid[k]:
                t = inst.outputs[k]
                if t is None:
                    raise NetpassError(f"{inst.node.kind} '{inst.node.name}': no value for output {k}")
                arr = t.alloc.host
                if arr is not None and t.offset == 0 and t.strides is None and arr.shape == t.shape:
                    # the buffer's memory is the array: a read onto itself (in-order queue)
                    self.launcher.read(arr, t.alloc.buffer, 0)
                    pending.append((inst, k, arr))
                    continue
                arr = self._host_array(t, inst, k)
                if arr.size:
                    self.launcher.read(arr, t.alloc.buffer, t.offset * t.dtype.itemsize)
                pending.append((inst, k, arr))
        if pending:
            self.queue.finish()
            self.stats["host_wait_s"] += time.perf_counter() - t0
            self.stats["host_waits"] += 1
            for inst, k, arr in pending:
                t = inst.outputs[k]
                if t.strides is not None:  # a permuted view: gather it from the region read
                    it = arr.itemsize
                    arr = np.lib.stride_tricks.as_strided(
                        arr, t.shape, tuple(s * it for s in t.strides)).copy()
                inst.host[k] = arr
                inst.host_valid[k] = True
        return [inst.host[k] for inst, k in refs]

    @staticmethod
    def _host_array(t: Tensor, inst: PrimitiveInst, k: int) -> np.ndarray:
        """A new array to read ``t`` (output ``k`` of ``inst``) into."""
        shape = (t.extent(),) if t.strides is not None else t.shape
        try:
            return np.empty(shape, dtype=t.dtype)
        except MemoryError as e:
            n = int(np.prod(shape, dtype=np.int64)) * t.dtype.itemsize
            raise AllocationError(f"allocating {n} bytes on the host for output {k} of "
                                  f"{inst.node.kind} '{inst.node.name}' {list(t.shape)} failed") from e

    # -- a whole inference ------------------------------------------------------------------------
    def set_input(self, inst: PrimitiveInst, arr: np.ndarray) -> None:
        node = inst.node
        shape = tuple(arr.shape)
        inst.shape_changed = shape != (inst.out_shapes[0] if inst.out_shapes else None)
        inst.out_shapes = [shape]
        inst.stamp = self.epoch
        inst.host[0] = arr
        inst.host_valid[0] = True
        need = max(arr.size, 1)
        can_reuse = inst.own[0] is not None and need <= inst.capacity[0]
        if not can_reuse:
            ok, pshape = self.predictor.predict_preallocation_shape(node.id, shape, arr.dtype.itemsize * 8, False)
            size = need
            if ok and self.predictor.can_preallocate(_size(pshape) * arr.dtype.itemsize):
                size = max(size, _size(pshape))
            inst._release_own(0)
            alloc = self.engine.allocate(size * arr.dtype.itemsize)
            self.count_alloc(alloc)
            inst.own[0] = alloc
            inst.capacity[0] = size
        else:
            self.predictor.predict_preallocation_shape(node.id, shape, arr.dtype.itemsize * 8, True)
        inst.outputs[0] = Tensor(inst.own[0], 0, shape, arr.dtype)
        if arr.size:  # (inst.host keeps ``arr`` alive until the copy has run)
            self.launcher.write(inst.own[0].buffer, 0, arr)
        inst.device_valid[0] = True

    def _choose_mode(self, feeds: Mapping[str, np.ndarray]) -> list[PrimitiveInst]:
        """Symbolic mode when the inputs bind the program's symbols consistently and the
        compiled model's substitution has been checked on enough distinct bindings, or on
        this very binding (until then the full path runs and checks it: a model always fed
        one shape takes the symbolic path from its second infer); the exec order of the
        chosen mode."""
        sym, compiled = self.program.symbolic, self.compiled
        binding = None
        if sym.active and compiled.symbolic_ok:
            binding = sym.bind([feeds[p.name].shape for p in self.program.inputs]
                               + self.state.read_shapes())
        self.binding = self.check_binding = None
        if binding is not None:
            if len(compiled.symbolic_checked) < SYMBOLIC_CHECKS and \
                    tuple(binding.values()) not in compiled.symbolic_checked:
                self.check_binding = binding
            else:
                self.binding = binding
        symbolic = self.binding is not None
        # (the variables' layouts too: their readers' implementations depend on the strides)
        self.binding_key = tuple(self.binding.values()) + self.state.layout_key() \
            if symbolic else None
        if symbolic != self.was_symbolic:
            self._reset_shape_state(symbolic)
            self.was_symbolic = symbolic
        return self.sym_order if symbolic else self.order

    def _reset_shape_state(self, entering_symbolic: bool) -> None:
        """Forget remembered shapes and values: nodes that did not run in the other mode
        hold stale ones."""
        for inst in self.insts:
            if inst.node.kind == "Constant":
                continue
            inst.in_shapes = None
            inst.values = {}
            if inst.node.in_shape_of_subgraph:
                inst.out_shapes = None
                inst.executed_once = False
                inst.host_valid = [False] * inst.node.num_outputs
            if entering_symbolic and inst.node_static_shapes is not None:
                inst.out_shapes = inst.node_static_shapes  # producers that will not run

    def execute(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One inference. The cyclic garbage collector is paused meanwhile (``gc_paused``): an
        infer makes no reference cycles, and collections triggered inside it would rescan the
        whole model and program (a quarter of a first pass over new shapes went there)."""
        with gc_paused():
            return self._execute(feeds)

    def _execute(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.epoch += 1
        self.state.begin()
        for p in self.program.inputs:
            self.set_input(self.insts[p.index], feeds[p.name])
        order = self.active_order = self._choose_mode(feeds)
        symbolic = self.binding is not None
        plans = self.compiled.step_plans
        use_plans = symbolic and self.compiled.use_step_plans
        plan = plans.get(self.binding_key) if use_plans else None
        if plan is not None and plan is not SEEN:
            try:
                plan.run(self, FLUSH_EVERY)
            except NetpassError:
                raise
            except MemoryError as e:
                raise AllocationError(f"replaying the step plan of binding {self.binding_key}: out of "
                                      f"memory ({e})") from e
            except Exception as e:
                raise NetpassError(f"replaying the step plan of binding {self.binding_key} failed: "
                                   f"{type(e).__name__}: {e}") from e
            insts = self.insts
            for i in plan.general:
                insts[i].reset_flags()
        else:
            self._run_order(order, symbolic)
            if use_plans:
                # a plan is built when a binding comes back (a decoder with past keys and
                # values meets each length once: no plan is worth building for it)
                self.compiled.store(plans, self.binding_key,
                                    SEEN if plan is None else StepPlan.build(self, order), SYMBOLIC_RECORDS)
            for inst in order:  # (inputs' flags are set again by set_input)
                inst.reset_flags()
        return self._finish()

    def _run_order(self, order: list[PrimitiveInst], symbolic: bool) -> None:
        """The per-primitive path over ``order``."""
        count = 0
        epoch, debug = self.epoch, self.debug
        for inst in order:
            if debug:
                self.reader = inst
            try:
                if symbolic and inst.plain and inst.recordable:
                    inst.step_recorded()
                else:
                    inst.prepare()
                    inst.execute()
            except NetpassError:
                raise
            except Exception as e:
                raise primitive_error(inst, e) from e
            inst.stamp = epoch
            count += 1
            if count % FLUSH_EVERY == 0:
                self.queue.flush()

    def _finish(self) -> dict[str, np.ndarray]:
        """Commit the variables, read the outputs (one host wait), collect profiling times,
        count the infer. Arrays the request keeps (constants, shape_of values it reuses) or
        returns twice are copied; an array written in place is handed over (its primitive
        gets a new one next time)."""
        self.state.commit()
        results = {}
        refs = []
        for r in self.program.outputs:
            s, k = r.inputs[0]
            refs.append(self.resolve(self.insts[s.index], k))
        self.reader = None
        arrays = self.host_values(refs)
        given: set[int] = set()
        for r, (inst, k), a in zip(self.program.outputs, refs, arrays):
            if id(a) in given or inst.node.kind == "Constant" or inst.node.in_shape_of_subgraph:
                a = a.copy()
            elif inst.zero_copy[k] and inst.own[k] is not None and inst.own[k].host is a:
                inst._release_own(k)
            given.add(id(a))
            results[r.name] = a
        if self.profiling:
            times = self.stats["primitive_times_us"]
            for inst in self.order:
                for ev in inst.events:
                    times[inst.node.id] = times.get(inst.node.id, 0.0) + \
                        (ev.profile.end - ev.profile.start) / 1000.0
                inst.events = []
        self.stats["infers"] += 1
        if self.binding is not None:
            self.stats["symbolic_infers"] += 1
        elif self.check_binding is not None and self.compiled.symbolic_ok:
            self.compiled.symbolic_check_passed(tuple(self.check_binding.values()))
        return results
