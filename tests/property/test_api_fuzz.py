"""Differential fuzz of the public API's boundary: feeds of every form against onnxruntime, and
malformed IR files against the reader.

Feeds: the transformer block example (x [batch, seq, 64]) gets a drawn feed (a name right or
wrong, a dtype, a rank, dims with zeros, a layout: reversed, strided, Fortran-ordered, a
transposed view; NaN and inf among the values; a list instead of an array). A feed onnxruntime
accepts must give its outputs (rel. 1e-4, NaN where it has NaN); any other must raise a
``netpass.errors`` exception naming the input. IR: kws_cnn as IR v11 gets 1-3 drawn mutations
(layers and edges dropped, retyped, duplicated or looped; Const offsets, sizes, types and
shapes; attributes; dims; port ids; the weights file truncated): reading, compiling and
inferring must succeed or raise a ``netpass.errors`` exception. ``-m slow`` draws more.
"""
from __future__ import annotations

import random
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import netpass
from netpass.errors import NetpassError
from netpass.runtime import compile_program
from netpass.testing import RUNTIME_DEVICE

ort = pytest.importorskip("onnxruntime")

ROOT = Path(__file__).resolve().parents[2]
TRANSFORMER = str(ROOT / "examples" / "transformer_block.onnx")
FAST = settings(max_examples=60, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow,
                                       HealthCheck.function_scoped_fixture])
SLOW = settings(FAST, max_examples=400)


# -- feeds -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def transformer():
    """onnxruntime's session and the three ways to run the model, compiled once."""
    model = netpass.read_model(TRANSFORMER)
    return (ort.InferenceSession(TRANSFORMER, providers=["CPUExecutionProvider"]),
            {"compile_model": netpass.compile_model(TRANSFORMER, RUNTIME_DEVICE),
             "runtime": compile_program(model, RUNTIME_DEVICE),
             "reference": netpass.compile_model(TRANSFORMER, "REFERENCE")})


@st.composite
def feeds(draw) -> object:
    """A feed of the transformer block (a dict, or not), half of them valid in name, dtype
    and rank."""
    valid = draw(st.booleans())
    batch, seq = draw(st.integers(0, 3)), draw(st.integers(0, 6))
    shape = [batch, seq, 64 if valid or draw(st.booleans()) else draw(st.integers(1, 70))]
    if not valid and draw(st.booleans()):
        shape = draw(st.sampled_from([shape[:2], [1] + shape, []]))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    base = rng.standard_normal([d * 2 for d in shape] or []).astype(np.float32)
    layout = draw(st.sampled_from(["plain", "strided", "reversed", "fortran", "transposed"]))
    if layout == "strided" and base.ndim:
        arr = base[tuple(slice(None, None, 2) for _ in shape)]
    else:
        arr = base[tuple(slice(0, d) for d in shape)]
        if layout == "reversed" and arr.ndim:
            arr = arr[..., ::-1]
        elif layout == "fortran":
            arr = np.asfortranarray(arr)
        elif layout == "transposed" and arr.ndim >= 2:
            arr = np.ascontiguousarray(np.swapaxes(arr, 0, 1)).swapaxes(0, 1)
    if arr.size and draw(st.booleans()):
        arr = arr.copy()
        arr.flat[draw(st.integers(0, arr.size - 1))] = draw(st.sampled_from(
            [np.nan, np.inf, -np.inf]))
    value: object = arr
    if not valid:
        kind = draw(st.sampled_from(["dtype", "list", "name", "extra", "missing", "none",
                                     "ragged", "sequence"]))
        if kind == "ragged":
            value = [[1.0] * 64, [1.0] * 63]
        elif kind == "sequence":  # the arrays alone, not by name
            return [arr]
        elif kind == "dtype":
            value = arr.astype(draw(st.sampled_from([np.float64, np.float16, np.int64, bool])))
        elif kind == "list":
            value = arr.tolist()
        elif kind == "name":
            return {"X": arr}
        elif kind == "extra":
            return {"x": arr, "y": arr}
        elif kind == "missing":
            return {}
    return {"x": value}


def _accepted(sess, feed: dict) -> list | None:
    """onnxruntime's outputs for ``feed``, None where it refuses it."""
    try:
        return sess.run(None, {k: np.ascontiguousarray(v) for k, v in feed.items()})
    except Exception:
        return None


def _check_feed(transformer, way: str, feed: dict) -> None:
    sess, compiled = transformer
    want = _accepted(sess, feed) if isinstance(feed, dict) \
        and all(isinstance(v, np.ndarray) for v in feed.values()) else None
    req = compiled[way].create_infer_request()
    if want is None:
        with pytest.raises(NetpassError, match=r"^input '(x|X|y)'"):
            req.infer(feed)
        return
    got = req.infer(feed)["y"]
    assert got.shape == want[0].shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want[0]))
    np.testing.assert_allclose(got, want[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("way", ["compile_model", "runtime", "reference"])
@FAST
@given(feed=feeds())
def test_feeds_compute_as_onnxruntime_or_are_refused_by_name(transformer, way, feed):
    _check_feed(transformer, way, feed)


@pytest.mark.slow
@pytest.mark.parametrize("way", ["compile_model", "runtime", "reference"])
@SLOW
@given(feed=feeds())
def test_more_feeds(transformer, way, feed):
    _check_feed(transformer, way, feed)


# -- malformed IR ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def kws_ir(tmp_path_factory) -> tuple[bytes, bytes]:
    folder = tmp_path_factory.mktemp("kws_ir")
    netpass.save_model(netpass.read_model(ROOT / "examples" / "kws_cnn.onnx"), folder / "m.xml")
    return (folder / "m.xml").read_bytes(), (folder / "m.bin").read_bytes()


VALUES = ["-1", "0", "1", "999999999999", "1e400", "nan", "abc", "", "1,2", "-5,3", "f64", "u1",
          "i4", "boolean", "dynamic", "?", "1..3", "-1..-3", "18446744073709551616"]


def _mutate(root: ET.Element, rnd: random.Random, bin_size: int) -> None:
    """One drawn change to an IR ``<net>``."""
    layers, edges = root.find("layers"), root.find("edges")
    ls, es = list(layers), list(edges)
    layer = rnd.choice(ls)
    kind = rnd.choice([*range(12), 5, 5, 5, 6])  # (more Const data: the most varied part)
    if kind == 0:
        layers.remove(layer)
    elif kind == 1:
        edges.remove(rnd.choice(es))
    elif kind == 2:
        e = rnd.choice(es)
        key = rnd.choice(["from-layer", "to-layer", "from-port", "to-port"])
        e.set(key, rnd.choice(["0", "1", "2", "99", "-1", "x"]))
    elif kind == 3:  # an edge back from a consumer to its producer: a cycle
        e = rnd.choice(es)
        ET.SubElement(edges, "edge", {"from-layer": e.get("to-layer"), "from-port": "9",
                                      "to-layer": e.get("from-layer"), "to-port": "0"})
    elif kind == 4:
        rnd.choice(ls).set("id", layer.get("id"))
    elif kind == 5:
        consts = [c for c in ls if c.get("type") == "Const"]
        data = rnd.choice(consts).find("data")
        data.set(rnd.choice(["offset", "size", "element_type", "shape"]),
                 rnd.choice(VALUES + [str(bin_size), str(bin_size + 4), str(2**62)]))
    elif kind == 6 and layer.find("data") is not None and layer.find("data").attrib:
        data = layer.find("data")
        data.set(rnd.choice(sorted(data.attrib)), rnd.choice(VALUES))
    elif kind == 7 and layer.findall(".//dim"):
        rnd.choice(layer.findall(".//dim")).text = rnd.choice(["-1", "0", "7", "abc", "1..3", ""])
    elif kind == 8:
        layer.set("type", rnd.choice(["Foo", "Parameter", "Result", "Const", "Add", "ReadValue"]))
    elif kind == 9:
        layer.set("version", rnd.choice(["opset999", "", "foo"]))
    elif kind == 10 and layer.findall(".//port"):
        rnd.choice(layer.findall(".//port")).set("id", rnd.choice(["0", "5", "-1", "x"]))
    elif kind == 11 and layer.find("input") is not None and len(layer.find("input")):
        ports = layer.find("input")
        ports.remove(ports[-1])


def _check_ir(kws_ir, tmp_path, rnd: random.Random) -> None:
    xml, weights = kws_ir
    root = ET.fromstring(xml)
    for _ in range(rnd.randrange(1, 4)):
        _mutate(root, rnd, len(weights))
    if rnd.random() < 0.15:
        weights = weights[:rnd.randrange(len(weights))]
    (tmp_path / "m.xml").write_bytes(ET.tostring(root))
    (tmp_path / "m.bin").write_bytes(weights)
    try:
        model = netpass.read_model(tmp_path / "m.xml")
        compiled = netpass.compile_model(model, "REFERENCE")
        feed = {p.name: np.ones([d.min for d in p.partial_shape]
                                if p.partial_shape.rank_is_static else [2], p.element_type.dtype)
                for p in compiled.inputs}
        compiled.create_infer_request().infer(feed)
    except NetpassError:
        pass


@FAST
@given(rnd=st.randoms(use_true_random=False))
def test_malformed_ir_reads_or_is_a_netpass_error(kws_ir, tmp_path, rnd):
    _check_ir(kws_ir, tmp_path, rnd)


@pytest.mark.slow
@SLOW
@given(rnd=st.randoms(use_true_random=False))
def test_more_malformed_ir(kws_ir, tmp_path, rnd):
    _check_ir(kws_ir, tmp_path, rnd)
