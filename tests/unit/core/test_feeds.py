"""One feed check for every way of running a model: the reference evaluator, the compiled
runtime (its own requests, as ``compile_program`` gives them) and ``compile_model`` refuse the
same wrong feeds with the same InputError."""
from __future__ import annotations

import numpy as np
import pytest

import netpass
from netpass import Model, opset
from netpass.core.feeds import FeedSpec, check_feeds
from netpass.core.shape import PartialShape
from netpass.errors import InputError
from netpass.runtime import compile_program
from netpass.testing import RUNTIME_DEVICE


def _model() -> Model:
    x = opset.parameter([-1, (2, 4)], np.float32, name="x")
    return Model([opset.relu(x, name="y")], [x], "m")


GOOD = np.random.default_rng(0).standard_normal((3, 3)).astype(np.float32)
BAD_FEEDS = [
    ({"x": GOOD, "z": GOOD}, "'z'.*not an input of the model; inputs are \\['x'\\]"),
    ({}, "'x'.*missing"),
    ({"x": GOOD.astype(np.float64)}, "'x'.*dtype float64, expected float32"),
    ({"x": GOOD[0]}, "'x'.*rank 1 \\(shape \\[3\\]\\)"),
    ({"x": np.ones((3, 5), np.float32)}, "'x'.*dim 1 is 5"),
]


@pytest.mark.parametrize("feeds, message", BAD_FEEDS)
def test_reference_and_runtime_refuse_the_same_feeds_alike(feeds, message):
    model = _model()
    with pytest.raises(InputError, match=message) as ref:
        netpass.reference.infer(model, feeds)
    for compiled in (compile_program(model, RUNTIME_DEVICE),
                     netpass.compile_model(model, RUNTIME_DEVICE)):
        with pytest.raises(InputError, match=message) as run:
            compiled.create_infer_request().infer(feeds)
        assert str(run.value).split(" expected")[0] == str(ref.value).split(" expected")[0]


def test_good_feeds_pass_and_contiguous_copies_only_when_needed():
    specs = [FeedSpec("x", np.dtype(np.float32), PartialShape([-1, 3]), "f32")]
    strided = np.asarray(np.random.default_rng(1).standard_normal((3, 6)), np.float32)[:, ::2]
    kept = check_feeds({"x": strided}, specs)["x"]
    assert kept is strided
    made = check_feeds({"x": strided}, specs, contiguous=True)["x"]
    assert made.flags.c_contiguous and np.array_equal(made, strided)
    assert check_feeds({"x": GOOD}, specs, contiguous=True)["x"] is GOOD
    with pytest.raises(InputError, match=r"expected float32 \(f32\)"):
        check_feeds({"x": GOOD.astype(np.float16)}, specs)
