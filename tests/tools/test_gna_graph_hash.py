"""tools/gna_graph_hash.py: the hash of the GNA flow's result ignores the names netpass makes
up (``<Type>_<id>``) and sees everything else."""
from __future__ import annotations

import gna_graph_hash
import numpy as np

import netpass
from netpass import opset


def test_flow_hash_ignores_the_node_counter():
    first = gna_graph_hash.flow(300, "static", 0)
    assert gna_graph_hash.flow(300, "static", 0, offset=1234) == first
    assert gna_graph_hash.flow(300, "static", 1) != first


def _model(name: str, scale: float):
    x = opset.parameter([1, 4], "f32", name="x")
    y = opset.multiply(x, opset.constant(np.full([1, 4], scale, np.float32)))
    y.friendly_name = name
    return netpass.Model([y], [x])


def test_made_up_names_are_blind_original_names_and_values_are_not():
    h = gna_graph_hash.graph_hash
    first = gna_graph_hash.FIRST_ID
    made_up = h(_model(f"Multiply_{first + 7}", 2.0))
    assert h(_model(f"Multiply_{first + 99}", 2.0)) == made_up
    assert h(_model("Multiply_7", 2.0)) != made_up  # below FIRST_ID: a name of the model
    assert h(_model(f"Multiply_{first + 7}", 3.0)) != made_up


def test_a_gather_absorbed_without_being_built_leaves_the_flow_as_it_was(monkeypatch):
    """GatherSinkingTransposeAxisBackward takes a Gather into the Concat above the Transpose
    itself where the traversal would have built it and absorbed it next: the flow's result is
    the same, but for made-up names (the Concat's own is one either way)."""
    from netpass.ngraph_passes.gna.gather_movement import GatherSinkingTransposeAxisBackward

    fused = GatherSinkingTransposeAxisBackward._absorbed
    taken: list[bool] = []

    def counted(self, *args):
        taken.append(fused(self, *args))
        return taken[-1]
    for shape in ("static", "dynamic"):
        for seed in (0, 1, 2):
            monkeypatch.setattr(GatherSinkingTransposeAxisBackward, "_absorbed", counted)
            got = gna_graph_hash.flow(900, shape, seed)
            monkeypatch.setattr(GatherSinkingTransposeAxisBackward, "_absorbed",
                                lambda self, *args: False)
            assert got == gna_graph_hash.flow(900, shape, seed)
    assert sum(taken) > 50 and not all(taken)
