"""InitNodeInfo: every op records its own friendly name in ``fused_names_0``, so later fusions
can tell which original ops a node stands for."""
from __future__ import annotations

from ...core.rt_info import FusedNames
from ...passes.base import ModelPass


class InitNodeInfo(ModelPass):
    """Records each op's friendly name in its fused_names rt_info."""

    def run_on_model(self, model) -> bool:
        key = FusedNames.key
        new = FusedNames.of
        for node in model.cached_order():
            rt = node._rt  # (read directly: this looks at every node, twice in the GNA pipeline)
            if rt is None:
                node._rt = {key: new(node.friendly_name)}
            elif key not in rt:
                rt[key] = new(node.friendly_name)
        return False
