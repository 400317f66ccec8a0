"""The execution step of a primitive: host evaluation (shape_of sub-graphs, data-dependent
ops, host fallbacks from the op's numpy reference) or the launch, where kernel arguments are
set only where they differ from the ones last set on that kernel; and ``step_recorded``, the
whole sequence of a plain kernel primitive whose binding was met before."""
from __future__ import annotations

from typing import TYPE_CHECKING, cast

import numpy as np

from ...errors import HostFallbackError
from ..impls import evaluate_fused, size
from ..invariants import check_read, check_write
from ..shape_infer import infer_host

if TYPE_CHECKING:
    from .inst import PrimitiveInst


class Execute:
    """``execute``, ``step_recorded`` and the launch."""

    def execute(self) -> None:
        node = self.node
        if self.state_role is not None:
            self.net.state.execute(self)
            return
        if self.skip or self.passive:
            self.executed_once = self.executed_once or not self.skip
            if self.skip and all(size(s) == 0 for s in self.out_shapes) and not node.shape_only:
                self._empty_outputs()
            return
        self.executed_once = True
        if node.in_shape_of_subgraph:
            self._host_eval()
            return
        if self.data_dependent:  # computed on the host with its shapes
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
        rec = self.node.sym_records.get(self.record_key(in_shapes))
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
            check_write(cast("PrimitiveInst", self))
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
        """A shape_of sub-graph node on the host: ShapeOf from its input shape, else the row's
        fast numpy rule where it has one, else the op's reference."""
        node = self.node
        if self.shape_of:
            dt = node.out_dtypes[0]
            self._set_host([np.asarray(self.in_shapes[0], dtype=dt).reshape(-1)])
            return
        # only the data inputs: the target of a reshape-like is a shape-infer value whose
        # producer does not run in symbolic mode
        arrays = self.net.host_values([self.src(j) for j in node.data_inputs()])
        host = node.row.host
        outs = host(node.attrs, arrays, self.out_shapes) if host is not None else None
        self._set_host(outs if outs is not None else infer_host(node, arrays))

    def _host_run(self) -> None:
        """Host fallback: the op's numpy reference on inputs read back from the device."""
        net = self.net
        node = self.node
        self._count_host_fallback()
        if getattr(node.subgraph, "appends", 0):  # (a fused attention's kernel writes the rows)
            self._rotate_on_host()
            net.state.write_rows_left_to(self)
        arrays = net.host_values([self.src(j) for j in range(len(node.inputs))])
        outs = self._reference(arrays)
        if node.fused:
            net.stats["fused"] += len(node.fused)
        self._set_host(outs)
        if self.concat_user is not None and net.insts[self.concat_user.index].inplace_now:
            self._refresh_inplace_view()
            net.upload(self, 0, into=self.outputs[0])

    def _reference(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        """The node's numpy reference on ``arrays``, then its fused ops (the kernel would
        have applied them)."""
        net, node = self.net, self.node
        outs = infer_host(node, arrays)
        if node.fused:
            def side(s, k):
                return s.value if s.value is not None else \
                    net.host_values([net.resolve(net.insts[s.index], k)])[0]
            outs = [evaluate_fused(node.fused, outs[0], side, infer_host)] + outs[1:]
        return outs

    def _rotate_on_host(self) -> None:
        """The Rotary folded into this attention (rotary_fold) and the norms before it, which
        launched nothing where the attention's kernel would normalize and rotate, run on the
        host, in turn: the rows the appends left and the attention's reference read their
        outputs, also through views of their device buffers (written too)."""
        fold = getattr(self.node.subgraph, "rotary", None)
        if fold is None or self.in_shapes is None or not fold.applies(self.in_shapes[0]):
            return
        net = self.net
        for node in fold.host_nodes():
            inst = net.insts[node.index]
            inst._set_host(inst._reference(
                net.host_values([inst.src(j) for j in range(len(node.inputs))])))
            for k, t in enumerate(inst.outputs):
                if t is not None and t.strides is None and tuple(t.shape) == inst.host[k].shape:
                    net.upload(inst, k, into=t)

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
