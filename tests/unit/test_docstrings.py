"""Every public graph builder of ``netpass.opset`` and every pattern predicate says what it does."""
from __future__ import annotations

import inspect

import pytest

import netpass.opset as opset
from netpass import pattern

BUILDERS = sorted(n for n in dir(opset)
                  if not n.startswith("_") and inspect.isfunction(getattr(opset, n)))
PREDICATES = ["consumers_count", "consumers_more_than", "has_static_shape", "has_static_rank",
              "has_static_dim", "has_static_dims", "rank_equals", "rank_more_than",
              "type_matches", "type_matches_any", "attrs_match", "all_of", "shape_matches",
              "as_predicate", "wrap_type", "any_input", "optional"]


def test_the_lists_are_complete():
    assert len(BUILDERS) > 100
    assert set(PREDICATES) <= set(pattern.__all__)


@pytest.mark.parametrize("name", BUILDERS)
def test_builder_has_a_docstring(name):
    doc = inspect.getdoc(getattr(opset, name)) or ""
    # More than the bare signature: what the op computes or what the arguments mean.
    assert len(doc) >= 50, f"opset.{name}: {doc!r}"


@pytest.mark.parametrize("name", PREDICATES)
def test_predicate_has_a_docstring(name):
    doc = inspect.getdoc(getattr(pattern, name)) or ""
    assert len(doc) >= 30, f"pattern.{name}: {doc!r}"
