"""The implementation step of a primitive (the reference's ``update_impl``): the program-level
LRU implementations cache, keyed by a descriptor id (kind, attributes, fused ops, dtypes), the
shapes, the shape-infer values and the strides of strided inputs; a miss asks the op table
row's factory (:func:`~netpass.runtime.create_device_impl`), or makes a host impl. Each
request runs an implementation with its own kernel objects."""
from __future__ import annotations

from ..impls import Impl, Launch, Params, create_device_impl
from ..launcher import KernelHandle, built_source, kernel_handle

KERNEL_LISTS = 512  # per primitive: implementations whose kernel objects are kept


class UpdateImpl:
    """``update_impl`` and the request's kernel objects of an implementation."""

    def _params(self, values: dict) -> Params:
        """What the impl factory builds from (and the reordered-weights flag it reads)."""
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
        return Params(row=node.row, attrs=attrs, in_shapes=list(self.in_shapes), in_strides=strides,
                      in_dtypes=[s.out_dtypes[k] for s, k in node.inputs],
                      out_shapes=list(self.out_shapes), out_dtypes=node.out_dtypes, values=values,
                      fused=node.fused,
                      extra_shapes=[tuple(i.out_shapes[k]) for i, k in self.extra_insts],
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
            # fused constants' shapes set strides
            extras = tuple((tuple(s.value.shape) if s.value is not None else None,
                            s.out_dtypes[k].str) for s, k in node.fused_inputs)
            desc = (self.desc_key, tuple(s.out_dtypes[k].str for s, k in node.inputs), extras,
                    reorder)
            self.desc_id = net.compiled.desc_id(desc)
        key = (self.desc_id, self.in_shapes, tuple(self.out_shapes),
               tuple([(j, v.tobytes()) for j, v in vals.items()]) if vals else (),
               # computed side inputs of the epilogue broadcast by their own shapes
               tuple([i.out_shapes[k] for i, k in self.computed_extras])
               if self.computed_extras else (),
               # strided views are read through their strides
               self.strided_inputs_key() if self.strided_order else ())
        impl = net.compiled.cached_impl(key)
        if impl is not None:
            net.stats["impl_cache_hits"] += 1
        else:
            net.stats["impl_cache_misses"] += 1
            p = self._params(vals)
            if reorder:
                p.attrs = dict(p.attrs, _weights_reordered=True)
            impl = create_device_impl(p, key) if node.has_kernel else None
            if impl is None:
                impl = Impl(key, host=True)
            else:
                for ln in impl.launches:
                    net.engine.build(built_source(net.engine, ln.source).text, net.stats)
            net.compiled.cache_impl(key, impl)
        self._set_impl(impl)

    def _set_impl(self, impl: Impl) -> None:
        """Make ``impl`` current, with this request's kernel objects for it."""
        if impl is not self.impl:
            self.impl = impl
            self.impl_changed = True
            self.kernels = self.kernels_for(impl)

    def kernels_for(self, impl: Impl) -> list[KernelHandle]:
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

    def _kernel(self, slot: int, ln: Launch) -> KernelHandle:
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
                h = kernel_handle(net.engine, ln.source, net.stats)
            objs[key] = h
        return h
