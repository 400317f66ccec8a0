"""InitNodeInfo: every op records its own friendly name in ``fused_names_0``, so later fusions
can tell which original ops a node stands for."""
from __future__ import annotations

from ...core.rt_info import FusedNames
from ...passes.base import ModelPass


class InitNodeInfo(ModelPass):
    """Records each op's friendly name in its fused_names rt_info."""

    def run_on_model(self, model) -> bool:
        for node in model.get_ordered_ops():
            if FusedNames.key not in node.rt_info:
                node.rt_info[FusedNames.key] = FusedNames([node.friendly_name])
        return False
