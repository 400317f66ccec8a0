"""The memory step of a primitive (the reference's ``realloc_if_needed``) and the outputs of a
skipped one (``update_output_memory``): views of its input; in-place concat inputs writing into
the concat's buffer; reuse of the own buffer while it is large enough; the predictor consulted
for preallocation; fake-aligned sizes for FullyConnected; outputs of the network and shape_of
nodes allocated directly, everything else from the pool; outputs written in place into the
returned arrays on a host-memory device (from ``outputs.ZERO_COPY_MIN_BYTES``)."""
from __future__ import annotations

from ..impls import contiguous_strides, size
from ..memory import Tensor, fake_aligned_shapes, oversized, reusable
from ..program_node import ProgramNode
from ..shape_predictor import ShapePredictor


class Realloc:
    """``realloc_if_needed`` and the views of skipped primitives."""

    parked: list | None  # (PrimitiveInst.__init__)

    def update_output_memory(self) -> None:
        """A skipped primitive's outputs are views of its input buffer: at the crop or slice
        offset, through a permutation (read by its MatMul), or strided (``strided_view``: split
        pieces, a stepped slice; a Reshape of such a view keeps walking its strides)."""
        src, k = self.src(0)
        t = self.net.device_tensor(src, k)
        self.set_views(t, self._views(t))
        self.net.stats["skipped"] += 1

    def set_views(self, t: Tensor, views: list[tuple[int, tuple | None]]) -> None:
        """Outputs as views of ``t``: per output, (element offset from ``t``'s, strides). A
        decoding loop's steps park the buffer the primitive owned (a transpose over one
        position is a view, over the next prompt a kernel writing that buffer again)."""
        keep = self.net.decoding
        for i, (offset, strides) in enumerate(views):
            if keep:
                self._park_own(i)
            else:
                self._release_own(i)
            self.outputs[i] = Tensor(t.alloc, t.offset + offset, self.out_shapes[i], t.dtype,
                                     strides)
            self.device_valid[i] = True
            self.host_valid[i] = False

    def _views(self, t: Tensor) -> list[tuple[int, tuple | None]]:
        """(element offset from ``t``'s, strides or None: contiguous) of each output: through
        a permutation (read by its MatMul), as the row's strided views (split pieces, a
        stepped slice, a reshape of a strided tensor), else at ``view_offset``."""
        node = self.node
        base = t.strides
        if node.permute_view is not None:
            st = base if base is not None else contiguous_strides(t.shape)
            return [(0, tuple(st[o] for o in node.permute_view))]
        if node.strided_view or (base is not None and node.row.always_view):
            st = list(base) if base is not None else contiguous_strides(t.shape)
            return node.row.strided.views(self, t.shape, st)
        return [(self.view_offset, None)]

    def _fc_alloc_elements(self, i: int) -> int:
        """Allocation size of output i in elements: fake-aligned for FullyConnected, enlarged
        to what a FullyConnected user reads."""
        node, net = self.node, self.net
        shape = self.out_shapes[i]
        n = size(shape)
        if node.row.fake_aligned and len(shape) >= 2:
            # (a length family's moving kernel leaves in_shapes unset: attention_proj)
            src, k = self.src_insts[0]
            x = self.in_shapes[0] if self.in_shapes is not None else src.out_shapes[k]
            n = max(n, size(fake_aligned_shapes(x, shape[-1],
                                                 integrated=net.engine.integrated)[1]))
        for u, j in node.users[i]:
            if u.row.fake_aligned and j == 0 and len(shape) >= 2:
                w = u.inputs[1][0].out_pshapes[u.inputs[1][1]]
                if w.is_static:
                    n = max(n, size(fake_aligned_shapes(shape, w.to_shape()[0],
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
            if self.zero_copy[i] and size(shape) * dt.itemsize >= net.zero_copy_min_bytes:
                # a new array per infer, returned as is
                pred.record(ShapePredictor.key(node.id, i), shape)
                self._release_own(i)
                alloc = net.engine.allocate_host(shape, dt, f"output '{self.result_names[i]}'")
                self.own[i], self.capacity[i] = alloc, size(shape)
                self.outputs[i] = Tensor(alloc, 0, tuple(shape), dt)
                continue
            need = self._fc_alloc_elements(i) if self.fc_related else size(shape)
            if self.own[i] is None and self.parked is not None and self.parked[i] is not None:
                self.own[i], capacity[i] = self.parked[i]
                self.parked[i] = None
            # (a decoding loop's steps keep the prompt's buffers for the next prompt)
            if capacity[i] and oversized(need, capacity[i]) and not net.decoding:
                capacity[i] = 0
                net.stats["reclaims"] += 1
            can_reuse = self.own[i] is not None and need <= capacity[i]
            ok, pshape = pred.predict_preallocation_shape(node.id, shape, dt.itemsize * 8,
                                                          can_reuse, i)
            if can_reuse:
                self.outputs[i] = Tensor(self.own[i], 0, shape, dt)
                net.stats["reuses"] += 1
                continue
            elements = need
            if ok and pred.can_preallocate(size(pshape) * dt.itemsize):
                elements = max(elements, size(pshape))
            self._release_own(i)
            alloc = net.allocate_output(node, elements * dt.itemsize)
            self.own[i] = alloc
            self.capacity[i] = alloc.nbytes // dt.itemsize
            self.outputs[i] = Tensor(alloc, 0, tuple(shape), dt)

    def _realloc_single(self) -> None:
        """realloc_if_needed of a plain one-output primitive, reuse first: the same decisions
        (the predictor records the shape on reuse too), fewer steps."""
        shape = self.out_shapes[0]
        need = size(shape)
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
            # (also where its output is still last infer's view into the concat's buffer,
            # its shape unchanged: writing there would clobber what the concat reads)
            if self.own[0] is None or self.outputs[0].alloc is not self.own[0]:
                self.realloc_if_needed()
            return
        if not cinst.allocation_done_by_other:
            cinst.realloc_if_needed()
            cinst.allocation_done_by_other = True
        off = 0
        for s, _ in c.inputs:
            if s is node:
                break
            off += size(self.net.insts[s.index].out_shapes[0])
        self.outputs[0] = cinst.outputs[0].view(tuple(self.out_shapes[0]), off)

    def _park_own(self, i: int) -> None:
        """Set the owned buffer of output ``i`` aside (still this primitive's) while the
        output is a view; ``realloc_if_needed`` takes it back."""
        alloc = self.own[i]
        if alloc is not None:
            self.net.mem_epoch += 1
            if self.parked is None:
                self.parked = [None] * len(self.own)
            self.parked[i] = (alloc, self.capacity[i])
            self.own[i] = None
            self.capacity[i] = 0

    def _release_own(self, i: int) -> None:
        allocs = [self.own[i]]
        if self.parked is not None and self.parked[i] is not None:
            allocs.append(self.parked[i][0])
            self.parked[i] = None
        for alloc in allocs:
            if alloc is not None:
                self.net.mem_epoch += 1
                if alloc.pooled:
                    self.net.pool.release(alloc, id(self.node))
        self.own[i] = None
        self.capacity[i] = 0
