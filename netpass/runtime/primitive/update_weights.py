"""The weights step of a primitive (the reference's ``update_weights``): a FullyConnected's
constant weights [N, K] reordered on the device to [K, N] once (coalesced GEMM reads), kept in
a per-primitive LRU cache keyed by the target layout."""
from __future__ import annotations

from ..impls import size, strided_copy
from ..launcher import KernelHandle
from ..memory import Tensor


class UpdateWeights:
    """``update_weights``."""

    def update_weights(self) -> None:
        """FullyConnected: weights [N, K] reordered once to [K, N] (coalesced GEMM reads),
        kept in a per-inst LRU cache keyed by the target layout."""
        if self.weights is None or self.impl is None or self.impl.is_host:
            return
        if self.impl.weights_as_given:  # (kernels.decode.gemv: the constant as it is)
            self.weights_tensor = None
            return
        net = self.net
        s, k = self.node.inputs[1]
        w = s.value
        layout = ("KN", tuple(w.shape), w.dtype.str)
        t = self.weights.get(layout)
        if t is None:
            n_, k_ = w.shape[0], size(w.shape[1:])
            src = net.device_tensor(net.insts[s.index], k)
            alloc = net.engine.allocate(w.nbytes)
            net.count_alloc(alloc)
            t = Tensor(alloc, 0, (k_, n_), w.dtype)
            ln = strided_copy(w.dtype, (k_, n_), [1, k_], 0, [n_, 1], 0, 0, 0)
            h = KernelHandle(net.engine.cl.Kernel(net.engine.build(ln.source.text, net.stats),
                                                  ln.source.name))
            net.launcher.set_args(h, *ln.args([src], [t], []))
            net.launcher.launch(h, ln)
            self.weights.add(layout, t)
            net.stats["weight_reorders"] += 1
        self.weights_tensor = t
