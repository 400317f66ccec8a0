"""Every attention block of every zoo export is one fused attention primitive: the zoo's
(model, exporter) pairs compiled with ``transformations`` NONE leave as many FusedAttention
nodes in the runtime program as the spec counts attention blocks (``ZooSpec.attention``), and
no Softmax that runs (an attention the fusion missed keeps its MatMul -> Softmax -> MatMul;
a Softmax kept only for a ShapeOf that reads it never runs). Compile only;
``test_transformers_zoo.py`` checks the outputs of the same compiled graphs."""
from __future__ import annotations

from collections import Counter

import export_zoo
import pytest
from zoo_cases import ZOO_PAIRS, case_id

import netpass
from netpass.testing import RUNTIME_DEVICE


@pytest.mark.parametrize("zoo_case", [pytest.param(c, id=case_id(*c)) for c in ZOO_PAIRS],
                         indirect=True)
def test_every_attention_block_is_fused(zoo, zoo_case):
    name, exporter = zoo_case
    compiled = netpass.compile_model(zoo.model(name, exporter), device=RUNTIME_DEVICE,
                                     config={"TRANSFORMATIONS": "NONE"})
    kinds = Counter(n.kind for n in compiled.runtime.program.nodes if not n.shape_only)
    assert (kinds["FusedAttention"], kinds["Softmax"]) == (export_zoo.SPECS[name].attention, 0)
