"""Derived symbols: sums, differences and products of symbolic dims (netpass.core.dimension)."""
from __future__ import annotations

import numpy as np
import pytest

from netpass import opset
from netpass.core.dimension import Dimension, Symbol, symbolic_quotient
from netpass.core.shape import PartialShape


def _dims(*names):
    return [Dimension.dynamic(Symbol(n)) for n in names]


def test_sum_of_symbolic_dims_is_interned_and_commutes():
    past, seq = _dims("past", "seq")
    total = past + seq
    assert total.symbol.is_derived and total.symbol.name == "past+seq"
    assert (seq + past).symbol is total.symbol
    assert (past + seq).symbol is total.symbol  # computed again: the same symbol


def test_differences_cancel_back_to_the_named_symbol():
    past, seq = _dims("past", "seq")
    assert ((past + seq) - seq).symbol is past.symbol
    assert ((past + 3) - 3).symbol is past.symbol
    assert (past + Dimension(3)).symbol.name == "past+3"


def test_products_are_polynomials_over_the_named_symbols():
    b, s = _dims("b", "s")
    assert (b * s).symbol is (s * b).symbol
    twelve = Dimension(12) * b
    assert twelve.symbol.name == "12*b" and (b * 12).symbol is twelve.symbol
    square = ((b + s) * (b - s)).symbol
    assert square.evaluate({b.symbol: 7, s.symbol: 3}) == 40
    assert sorted(x.name for x in square.named()) == ["b", "s"]


def test_an_unknown_operand_gives_no_symbol():
    (past,) = _dims("past")
    assert (past + Dimension()).symbol is None
    assert (past * Dimension(2, 5)).symbol is None
    assert (Dimension(2) + Dimension(3)).symbol is None  # static


@pytest.mark.parametrize("values", [{"b": 1, "s": 1}, {"b": 3, "s": 17}])
def test_evaluate_agrees_with_integer_arithmetic(values):
    b, s = _dims("b", "s")
    binding = {b.symbol: values["b"], s.symbol: values["s"]}
    expr = (b * s * 64 + b * 4 - s + 5).symbol
    want = values["b"] * values["s"] * 64 + values["b"] * 4 - values["s"] + 5
    assert expr.evaluate(binding) == want


def test_symbolic_quotient_divides_exact_monomials_only():
    b, s = _dims("b", "s")
    assert symbolic_quotient(b * s * 64, Dimension(64)) is (b * s).symbol
    assert symbolic_quotient(b * s * 12, b) is (s * 12).symbol
    assert symbolic_quotient(b * s + b, b) is (s + 1).symbol
    assert symbolic_quotient(b * s, Dimension(64)) is None   # 64 does not divide 1
    assert symbolic_quotient(b + s, b) is None               # s has no b
    assert symbolic_quotient(b + 1, b) is None


def test_floor_division_keeps_an_exact_quotient():
    """``(4 * batch) // 4`` is ``batch`` (a bmm export splits its heads back out of the scores'
    ``size(0)``); a division that is not exact has no symbol."""
    (b,) = _dims("b")
    assert ((b * 4) // 4).symbol is b.symbol
    assert ((b * 6 + 2) // 2).symbol is (b * 3 + 1).symbol
    assert ((b * 4) // 3).symbol is None
    assert (b // 2).symbol is None


def test_a_shape_divided_by_the_heads_keeps_the_batch():
    (b,) = _dims("b")
    x = opset.parameter(PartialShape([b * 4, 7, 16]), np.float32)
    n = opset.divide(opset.gather(opset.shape_of(x), np.int64(0), np.int64(0)), np.int64(4))
    target = opset.concat([opset.unsqueeze(n, np.int64(0)), np.int64([4, 7, 16])], 0)
    out = opset.reshape(x, target, False).output(0).partial_shape
    assert out[0].symbol is b.symbol


def test_concat_of_a_cache_and_new_keys_carries_past_plus_seq():
    past, seq = _dims("past", "seq")
    cache = opset.parameter(PartialShape([1, 4, past, 32]), np.float32)
    new = opset.parameter(PartialShape([1, 4, seq, 32]), np.float32)
    grown = opset.concat([cache, new], 2).output(0).partial_shape
    assert grown[2].symbol.name == "past+seq"
    again = opset.concat([cache, new], 2).output(0).partial_shape
    assert again[2].symbol is grown[2].symbol
