"""A copied variable (double-buffered: :mod:`netpass.runtime.state`) beside a decoder's
appended caches, in a decoding loop's length tape.

Found building greedy decoding on the device (issue 17): the token fed back through
``ReadValue(input_ids, "next")`` / ``Assign("next", ArgMax(logits))``. A copied variable's
buffers swap at each inference's end, so its ReadValue reads the other buffer at the next
step; the tape relaunched the kernels reading it, grouped, with the buffer of the step before
(the swap did not advance ``Network.mem_epoch``), so every step from the tape's first on read
the token two steps back: the tokens went wrong at the 11th. The swap now advances it.
"""
from __future__ import annotations

import numpy as np
import pytest

import netpass
from netpass.generation import GreedyDecoder, stateful_decoder
from netpass.ops.elementwise import convert
from netpass.ops.movement import slice as slice_op
from netpass.ops.movement.reshape import squeeze
from netpass.ops.reduction import topk
from netpass.ops.state import Assign, ReadValue
from netpass.testing import RUNTIME_DEVICE


def _token_fed_back(model):
    """``model`` (stateful, changed in place) choosing its next input token itself, through a
    copied variable ``next`` whose init value is ``input_ids``."""
    ids = model.parameters[model.input_names.index("input_ids")].output(0)
    readers = list(ids.consumers())
    read = ReadValue([ids], variable_id="next", variable_type=ids.element_type,
                     variable_shape=ids.partial_shape)
    for r in readers:
        r.replace_source_output(read.output(0))
    logits = model.results[model.output_names.index("logits")].input_value(0)
    last = squeeze(slice_op(logits, np.array([-1]), np.array([np.iinfo(np.int64).max]),
                            np.array([1]), np.array([1])), np.array([1]))
    token = convert(topk(last, np.array(1), -1, "max", "none", "i64").output(1),
                    ids.element_type)
    model.add_sinks([Assign([token.output(0)], variable_id="next")])
    model.validate_nodes_and_infer_types()
    return model


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_a_copied_variable_read_by_a_tape(hf_decoder, name):
    dec = hf_decoder(name)
    prompt = np.random.default_rng(3).integers(1, dec.vocab, (1, 5))
    plain = stateful_decoder(netpass.read_model(dec.onnx), last_logits=True)
    want = GreedyDecoder(netpass.compile_model(plain, RUNTIME_DEVICE)).generate(prompt, 40)
    model = _token_fed_back(stateful_decoder(netpass.read_model(dec.onnx), last_logits=True))
    cm = netpass.compile_model(model, RUNTIME_DEVICE,
                               {"TRANSFORMATIONS": "NONE", "DEBUG_CHECKS": False})
    req = cm.create_infer_request()
    feeder = GreedyDecoder(cm)
    ids, past, got = prompt, 0, []
    for _ in range(40):
        logits = req.infer(feeder._feeds(ids, past, {}))["logits"][:, -1]
        got.append(logits.argmax(-1))
        past += ids.shape[1]
        ids = np.zeros((1, 1), np.int64)  # (not read: the variable holds the token)
    assert req.stats["length_replays"] > 20
    np.testing.assert_array_equal(np.stack(got, 1), want.tokens)
