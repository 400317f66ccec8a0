"""String ops: StringConcat (broadcasting, unicode, empty), StringSplit (delimiters, runs of
whitespace, maxsplit, empty input), StringNormalizer ([C] and [1, C], stop words with and
without case, all dropped) and RegexFullMatch against onnx's reference evaluator (onnxruntime
lacks the opset-20 ops and needs system locales for StringNormalizer); refused RE2-only
patterns; export and the runtime. Exact."""
from __future__ import annotations

import numpy as np
import pytest
from opcheck import check_export, check_import, check_runtime, one_node

from netpass import Model, opset
from netpass.errors import NetpassError


def S(*values, shape=None):
    a = np.array(values, dtype=object)
    return a.reshape(shape) if shape else a


@pytest.mark.parametrize("x,y", [(S("a", "bc", "", shape=(3,)), S("x", shape=(1,))),
                                 (S("héllo", "ß", shape=(2, 1)), S("1", "22", "333")),
                                 (S("z", shape=()), S("", "q"))])
def test_concat(x, y):
    feeds = {"x": x, "y": y}
    check_import(one_node("StringConcat", feeds, opset=20), feeds, engine="reference")


@pytest.mark.parametrize("attrs", [{}, {"delimiter": ","}, {"delimiter": "--", "maxsplit": 1},
                                   {"maxsplit": 0}, {"delimiter": ""}])
def test_split(attrs):
    x = S("a,b,,c", "  x  y z ", "--a--b--", "", "one", shape=(5,))
    feeds = {"x": x}
    check_import(one_node("StringSplit", feeds, n_out=2, opset=20, **attrs), feeds,
                 engine="reference")


@pytest.mark.parametrize("shape", [(4,), (1, 4)])
@pytest.mark.parametrize("action", ["NONE", "LOWER", "UPPER"])
def test_normalizer_case_matches_reference(shape, action):
    # (onnxruntime's StringNormalizer needs the en_US locale installed to change case)
    feeds = {"x": S("The", "cat", "sAt", "A", shape=shape)}
    check_import(one_node("StringNormalizer", feeds, opset=10, case_change_action=action),
                 feeds, engine="reference")


@pytest.mark.parametrize("shape", [(4,), (1, 4)])
@pytest.mark.parametrize("stop,sensitive,action,want", [
    (["The", "a"], 0, "NONE", ["cat", "sat"]),
    (["The", "a"], 1, "UPPER", ["CAT", "SAT", "A"]),
    (["the", "cat", "sat", "a"], 0, "NONE", [""]),
    (["CAT"], 0, "LOWER", ["the", "sat", "a"])])
def test_normalizer_stopwords_as_specified(shape, stop, sensitive, action, want):
    # onnx's reference compares mixed-case stop words and drops empty strings; the
    # specification: stop words match case-insensitively unless is_case_sensitive
    import netpass
    feeds = {"x": S("The", "cat", "sat", "A", shape=shape)}
    proto = one_node("StringNormalizer", feeds, opset=10, stopwords=stop,
                     is_case_sensitive=sensitive, case_change_action=action)
    got = next(iter(netpass.reference.infer(netpass.read_model(proto), feeds).values()))
    assert got.dtype == object and got.shape == ((1, len(want)) if len(shape) == 2 else
                                                 (len(want),))
    assert got.reshape(-1).tolist() == want


@pytest.mark.parametrize("pattern", [r"\d+", r"[a-z]+@[a-z]+\.com", r"(ab|cd)*", ".*"])
def test_regex_full_match(pattern):
    feeds = {"x": S("123", "12a", "me@site.com", "abcd", "", "ABAB", shape=(2, 3))}
    check_import(one_node("RegexFullMatch", feeds, opset=20, pattern=pattern), feeds,
                 engine="reference")


def test_errors():
    x = opset.parameter([3], "string", "x")
    with pytest.raises(NetpassError, match="RE2"):
        opset.regex_full_match(x, r"\p{L}+")
    with pytest.raises(NetpassError, match="strings"):
        opset.string_concat(opset.parameter([3], "f32"), x)
    with pytest.raises(NetpassError, match=r"\[C\]"):
        opset.string_normalizer(opset.parameter([2, 3], "string"))


def test_export_and_runtime():
    x = opset.parameter([-1], "string", "x")
    parts = opset.string_split(x, " ")
    model = Model([opset.string_concat(x, np.array(["!"], dtype=object)).output(0),
                   parts.output(0), parts.output(1),
                   opset.string_normalizer(x, "UPPER").output(0)], [x])
    feeds = {"x": S("a b", "b", "c d e")}
    check_export(model, feeds, engine="reference")
    for n in (3, 1):
        check_runtime(model, {"x": S(*["x y"] * n)})
