"""The weights step of a primitive (the reference's ``update_weights``): a FullyConnected's
constant weights [N, K] reordered on the device to [K, N] once per compiled model (coalesced
GEMM reads; ``RuntimeCompiledModel.reordered_weights``), with a folded LayerNorm in them
(``norm_gemm.fold_weights``), or in mma.sync fragment order (``kernels.mma_bfrag.swizzle``),
kept per primitive in an LRU cache keyed by the target layout."""
from __future__ import annotations


class UpdateWeights:
    """``update_weights``."""

    weights_layout: tuple | None

    def update_weights(self) -> None:
        """FullyConnected: weights [N, K] reordered once to [K, N] (coalesced GEMM reads).
        The reordered copy is the compiled model's, shared by its requests as the constants
        are (a request made it read-only, and a new request would otherwise reorder and hold
        every weight again: 48 copies and 340 MB for GPT-2 small); this request keeps it in
        its primitive's LRU cache by layout."""
        if self.weights is None or self.impl is None or self.impl.is_host:
            return
        if self.impl.weights_as_given:  # (kernels.decode_gemv.gemv: the constant as it is)
            self.weights_tensor = None
            return
        layout = self.weights_layout
        if layout is None:  # (made once: a decoding loop's prompts come back here every time)
            v = self.node.inputs[1][0].value
            layout = self.weights_layout = ("KN", tuple(v.shape), v.dtype.str)
        folded = self.impl.weights_folded  # (with its LayerNorm: norm_gemm.fold_weights)
        frag = self.impl.weights_frag  # (in fragment order: kernels.mma_bfrag.swizzle)
        if folded:
            layout = ("KN+norm",) + layout[1:]
        elif frag:
            layout = (f"frag{frag}",) + layout[1:]
        t = self.weights.get(layout)
        if t is None:
            net = self.net
            t, made = net.compiled.reordered_weights(self.node.inputs[1][0], layout,
                                                     self.node if folded else None, frag)
            if made:
                net.stats["weight_reorders"] += 1
            self.weights.add(layout, t)
        self.weights_tensor = t
