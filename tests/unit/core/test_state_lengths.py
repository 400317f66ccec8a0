"""The length rules of stateful models' inputs (``netpass.core.state_lengths``): kept in rt_info
as plain values (strings after an IR round trip), checked from shapes alone."""
from __future__ import annotations

import numpy as np
import pytest

from netpass.core.shape import PartialShape
from netpass.core.state_lengths import (
    RT_INFO_KEY,
    StateLength,
    check_rules,
    check_state_lengths,
    read_state_lengths,
    to_rt_info,
)
from netpass.errors import InputError, ModelFormatError

RULE = StateLength("mask", 1, "ids", 1, "cache", 2, 0)


def _feeds(mask: int, new: int) -> dict:
    return {"mask": np.ones((2, mask), np.int64), "ids": np.ones((2, new), np.int64)}


def test_rules_round_trip_as_rt_info_and_as_strings():
    info = {RT_INFO_KEY: to_rt_info([RULE])}
    assert read_state_lengths(info) == (RULE,)
    as_ir = {RT_INFO_KEY: {"mask": {k: str(v) for k, v in info[RT_INFO_KEY]["mask"].items()}}}
    assert read_state_lengths(as_ir) == (RULE,)
    assert read_state_lengths({}) == ()


@pytest.mark.parametrize("entry", ["x", {"mask": {"axis": "1"}}, {"mask": {
    **to_rt_info([RULE])["mask"], "axis": "one"}}])
def test_a_malformed_entry_is_a_model_format_error(entry):
    with pytest.raises(ModelFormatError, match=f"rt_info '{RT_INFO_KEY}': malformed"):
        read_state_lengths({RT_INFO_KEY: entry})


def test_rules_naming_what_the_model_lacks_are_refused():
    inputs = {"mask": PartialShape.parse("?,?"), "ids": PartialShape.parse("?,?")}
    variables = {"cache": PartialShape.parse("?,4,?,8")}
    check_rules([RULE], inputs, variables)
    for rule, what in ((RULE._replace(tokens="tokens"), "input 'tokens'"),
                       (RULE._replace(axis=2), "axis 2 of input 'mask'"),
                       (RULE._replace(variable_axis=4), "axis 4 of variable 'cache'")):
        with pytest.raises(ModelFormatError, match=what):
            check_rules([rule], inputs, variables)


def test_a_short_input_is_refused_a_long_one_accepted():
    lengths = {"cache": 5}

    def length(vid: str, axis: int) -> int | None:
        assert axis == 2
        return lengths.get(vid)

    check_state_lengths([RULE], _feeds(6, 1), length)
    check_state_lengths([RULE], _feeds(9, 1), length)  # (the export reads the first 6)
    with pytest.raises(InputError, match=r"'mask': length 5 \(dim 1 of shape \[2, 5\]\) is "
                                         r"shorter than the past plus the new tokens, "
                                         r"5 \+ 1 = 6 \(5 held in variable 'cache', 1 fed in "
                                         r"'ids'\)"):
        check_state_lengths([RULE], _feeds(5, 1), length)
    lengths.clear()  # never set: the initial length
    check_state_lengths([RULE._replace(initial=2)], _feeds(5, 3), length)
    with pytest.raises(InputError, match=r"2 \+ 3 = 5"):
        check_state_lengths([RULE._replace(initial=2)], _feeds(4, 3), length)
