"""op_types: op classes by name for the transformations' patterns; a name no class has fails
when the pass is built instead of quietly matching nothing."""
from __future__ import annotations

import pytest

from netpass.ngraph_passes.utils import op_types
from netpass.ops import Relu, Transpose
from netpass.ops.base import UnaryElementwiseArithmetic


def test_op_types_resolves_names_families_and_classes():
    assert op_types("Transpose", "UnaryElementwiseArithmetic", Relu) == \
        (Transpose, UnaryElementwiseArithmetic, Relu)


@pytest.mark.parametrize("name", ["Transpse", "FakeQuantize"])
def test_op_types_refuses_a_name_without_a_class(name):
    with pytest.raises(KeyError, match=name):
        op_types("Transpose", name)
