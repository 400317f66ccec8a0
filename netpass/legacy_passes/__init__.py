"""Legacy stage: the layer graph (``LegacyNetwork``), its pass manager and passes."""
from __future__ import annotations

from .convert import convert_to_legacy
from .layer_graph import Layer, LegacyNetwork
from .legacy_pass import LegacyPass
from .manager import PassManager, dump_network, run_legacy_passes
from .passes import DEFAULT_PASSES

__all__ = ["convert_to_legacy", "LegacyNetwork", "Layer", "LegacyPass", "PassManager",
           "run_legacy_passes", "dump_network", "DEFAULT_PASSES"]
