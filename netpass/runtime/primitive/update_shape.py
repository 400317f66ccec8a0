"""The shape step of a primitive (the reference's ``update_shape``): input shapes compared with
the stored ones; shape-infer dependencies read (constants, unchanged shape_of values, values
read back from the device in one host wait, or, in symbolic mode, substituted from the
binding); output shapes from the op table row's rule or the op's own inference
(:class:`~netpass.runtime.shape_infer.ShapeInfer`); then the runtime skip checks."""
from __future__ import annotations

import numpy as np

from ..impls import Impl, size
from ..outputs import check_output_sizes
from ..shape_infer import infer_host
from ..symbolic import SymbolicShapes, substitute

SYMBOLIC_RECORDS = 256  # per node: bindings whose shapes and implementation are kept


class UpdateShape:
    """``update_shape`` and what decides with it: the runtime in-place concat, the symbolic
    path (substitution and per-binding records), and the runtime skip checks."""

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
        ok = size(shape[:axis]) == 1 \
            and all(size(net.insts[s.index].out_shapes[0]) > 0 for s, _ in c.inputs)
        cinst.inplace_now = ok

    def update_shape(self) -> None:
        if self.done_by_other:
            self.done_by_other = False
            return
        node, net = self.node, self.net
        if node.is_constant or node.is_parameter:
            return  # (a Parameter's is set by the network from the user's array)
        if net.binding is not None:
            self._update_shape_symbolic(net.binding)
            return
        insts = net.insts
        in_shapes = tuple([i.out_shapes[k] for i, k in self.src_insts])
        changed = in_shapes != self.in_shapes
        self.in_shapes = in_shapes
        self.shape_changed = changed
        first = self.out_shapes is None
        if self.shape_of and not changed and not first:
            return
        if node.in_shape_of_subgraph and not first and \
                not any(so.shape_changed for so in self.shape_of_insts):
            self.shape_changed = False
            return
        need = []
        for j in self.deps:
            s, k = node.inputs[j]
            if s.is_constant:
                self.values[j] = s.value
                continue
            if s.in_shape_of_subgraph and j in self.values and \
                    not any(insts[so.index].shape_changed for so in s.dependant_shape_ofs):
                continue
            changed = True
            need.append(j)
        # a data-dependent op's outputs are the host evaluation its execute consumes: made on
        # every infer, even from unchanged (constant) inputs
        if not changed and not first and not self.data_dependent:
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
            check_output_sizes(self.result_names, out, self.node.out_dtypes,
                               self.net.max_output_bytes)
        return out

    def _output_shapes(self, in_shapes: tuple, binding: dict | None) -> list[tuple]:
        """Data-dependent ops run on the host, substitution where the binding allows it, else
        the shape rules."""
        node = self.node
        self.net.stats["shape_updates"] += 1
        if self.data_dependent:
            arrays = self.net.host_values([self.src(j) for j in range(len(node.inputs))])
            self.pending_host = infer_host(node, arrays)
            return [tuple(a.shape) for a in self.pending_host]
        if binding is not None and node.sym_out is not None:
            return [substitute(e, binding) for e in node.sym_out]
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
            key = self.record_key(in_shapes)
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
        if not changed and not need and self.out_shapes is not None \
                and not node.in_shape_of_subgraph and not self.data_dependent:
            self.shape_changed = False
            return
        for j in self.deps:
            if node.inputs[j][0].is_constant:
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

    def record_key(self, in_shapes: tuple) -> tuple:
        """The key of this binding's record: the input dims' binding, the input shapes and
        the strides of the inputs that may be strided views, the readers of the variables'
        buffers among them (their strides are what the variables' layouts change; a cache a
        prompt allocates on its way has them known only here, and the attention that fills
        it writes through them: two requests with caches of 265 and 147 rows took one record,
        and the second wrote past its buffers)."""
        if not self.strided_order:
            return (self.net.binding_values, in_shapes)
        return (self.net.binding_values, in_shapes, self.strided_inputs_key())

    def strided_inputs_key(self) -> tuple:
        """The strides of the inputs that may be strided views (None for one whose producer
        has no tensor: an empty output is never allocated, so a new request that meets a
        zero-size input first has none; reading its strides failed with an AttributeError)."""
        srcs = self.src_insts
        key = []
        for j in self.strided_order:
            t = srcs[j][0].outputs[srcs[j][1]]
            key.append(None if t is None else t.strides)
        return tuple(key)

    def _record(self, impl: Impl | None) -> None:
        """Keep this binding's shapes, values and implementation (see above)."""
        self.net.compiled.store(self.node.sym_records, self.rec_key,
                                (self.out_shapes, self.values, impl), SYMBOLIC_RECORDS)
        self.rec_key = None

    def _check_symbolic(self, b: dict) -> None:
        """Full-path shapes and values against what substitution would give; a difference
        turns the symbolic path off for the compiled model."""
        node = self.node
        bad = node.sym_out is not None \
            and [substitute(e, b) for e in node.sym_out] != self.out_shapes
        for j, dep in node.sym_deps.items():
            v = self.values.get(j)
            if v is not None and not np.array_equal(SymbolicShapes.value(dep, b), v):
                bad = True
        if bad:
            self.net.compiled.symbolic_ok = False
            self.net.stats["symbolic_mismatches"] = self.net.stats.get("symbolic_mismatches", 0) + 1

    def runtime_skip_checks(self) -> None:
        """Whether the primitive runs no kernel this time and its output is a view of its
        input (``can_be_optimized``; ``view_offset``: where in the input): reshape-likes and
        permuted views always, an in-place concat where the decision said so, a strided view
        where its row's condition holds, else the row's runtime skip check. A change of the
        decision counts as a shape change."""
        node = self.node
        was = self.can_be_optimized
        ok = False
        if node.row.always_view or node.permute_view is not None:
            ok, self.view_offset = True, 0
        elif node.inplace_concat:
            if not self.concat_decided:
                self.inplace_now = False
            ok = self.inplace_now
        elif node.runtime_skippable:
            if node.strided_view:
                applies = node.row.strided.applies
                ok = applies is None or applies(self)
            else:
                self.view_offset = node.row.skip.check(self)
                ok = self.view_offset is not None
        self.can_be_optimized = ok
        if was != ok:
            self.shape_changed = True
