"""compile_model's progress hook: a callable hears each stage as it starts, then "done"; a
logger gets one INFO line per stage."""
from __future__ import annotations

import logging

import numpy as np

import netpass
from netpass import Model, opset
from netpass.compiler import COMPILE_STAGES
from netpass.testing import RUNTIME_DEVICE


def _model() -> Model:
    x = opset.parameter([1, 8], np.float32, name="x")
    return Model([opset.result(opset.relu(x), name="y")], [x])


def test_a_callable_hears_every_stage_in_order():
    heard = []
    cm = netpass.compile_model(_model(), RUNTIME_DEVICE, progress=lambda *a: heard.append(a))
    total = len(COMPILE_STAGES)
    assert heard == [(s, i + 1, total) for i, s in enumerate(COMPILE_STAGES)] + [("done", total, total)]
    out = cm.create_infer_request().infer({"x": np.full((1, 8), -1.0, np.float32)})["y"]
    np.testing.assert_array_equal(out, np.zeros((1, 8), np.float32))


def test_a_logger_gets_info_lines(caplog):
    logger = logging.getLogger("netpass.test.progress")
    with caplog.at_level(logging.INFO, logger=logger.name):
        netpass.compile_model(_model(), "REFERENCE", progress=logger)
    lines = [r.getMessage() for r in caplog.records if r.name == logger.name]
    assert lines[0] == f"compile_model: reading (1/{len(COMPILE_STAGES)})"
    assert lines[-1] == f"compile_model: done ({len(COMPILE_STAGES)}/{len(COMPILE_STAGES)})"
    assert len(lines) == len(COMPILE_STAGES) + 1
