"""An attention mask shorter than a stateful request's past plus new tokens is refused (issue 17).

The exports index their mask with positions computed from the cache's length and the new
tokens' (``mask[b, arange(past + new)]``); a shorter mask was read out of bounds (onnxruntime
refuses it; netpass's Gather-8 semantics read zeros: silent garbage). ``stateful_decoder``
now records the rule it reads off the graph (``find_state_lengths``) and every request checks
it before running, from shapes: an ``InputError`` naming the input, its length and the past
and new token counts, on the runtime and the reference evaluator, for a prompt and a decode
step, and the state is left as it was. A longer mask is cut by the export itself, as
onnxruntime cuts it: accepted, with onnxruntime's logits. GPT-2 and LLaMA, by the TorchScript
and the dynamo exporters.
"""
from __future__ import annotations

import numpy as np
import pytest
from decoder_twin import Twin

import netpass
from netpass.core.state_lengths import RT_INFO_KEY, StateLength
from netpass.errors import InputError, ModelFormatError
from netpass.generation import find_state_lengths, stateful_decoder
from netpass.ops.state import model_variables
from netpass.testing import RUNTIME_DEVICE

CASES = [(a, e) for a in ("gpt2", "llama") for e in ("torchscript", "dynamo")]


@pytest.fixture(scope="module")
def exported(hf_arch_decoder):
    """(decoder, plain model, stateful model) per (arch, exporter), made once."""
    cache: dict = {}

    def get(arch: str, exporter: str):
        if (arch, exporter) not in cache:
            dec = hf_arch_decoder(arch, exporter)
            plain = netpass.read_model(dec.onnx)
            cache[arch, exporter] = dec, plain, stateful_decoder(plain)
        return cache[arch, exporter]
    return get


def _refused(req, feeds: dict, fed: int, past: int, new: int) -> None:
    with pytest.raises(InputError, match=rf"input 'attention_mask': length {fed} \(dim 1 of "
                                         rf"shape \[\d, {fed}\]\) is shorter than the past "
                                         rf"plus the new tokens, {past} \+ {new} = "
                                         rf"{past + new} \({past} held in variable "
                                         rf"'past_key_values\.\d\.\w+present\.\d\.\w+', {new} "
                                         rf"fed in 'input_ids'\)"):
        req.infer(feeds)


@pytest.mark.parametrize(("arch", "exporter"), CASES)
def test_the_rule_is_read_off_the_graph(exported, arch, exporter):
    """The mask's dim 1 covers a variable's dim 2 (empty at first) plus the tokens' dim 1;
    the plain export (no variables) has no rule, and the model passed in is not changed."""
    _, plain, stateful = exported(arch, exporter)
    (rule,) = find_state_lengths(stateful)
    assert rule._replace(variable="") == StateLength("attention_mask", 1, "input_ids", 1, "",
                                                     2, 0)
    assert rule.variable in model_variables(stateful)
    assert find_state_lengths(plain) == []
    assert RT_INFO_KEY not in plain.rt_info


@pytest.mark.parametrize("device", ["REFERENCE", RUNTIME_DEVICE])
@pytest.mark.parametrize(("arch", "exporter"), CASES)
def test_a_short_mask_is_refused_and_a_long_one_cut(exported, arch, exporter, device):
    """A prompt's and a decode step's short mask are refused, leaving the state as it was;
    a mask 2 positions too long (zeros after past + new) gives onnxruntime's logits; the
    right one keeps decoding as onnxruntime does."""
    import onnxruntime as ort
    dec, _, stateful = exported(arch, exporter)
    session = ort.InferenceSession(dec.onnx, providers=["CPUExecutionProvider"])
    cm = netpass.compile_model(stateful, device, {"TRANSFORMATIONS": "NONE"})
    twin = Twin(cm.create_infer_request(), session, dec, 1)
    rng = np.random.default_rng(5)
    prompt = rng.integers(1, dec.vocab, (1, 5))
    short = twin.feeds(prompt)
    short["attention_mask"] = short["attention_mask"][:, :4]
    _refused(twin.req, short, 4, 0, 5)
    nxt = twin.decode(twin.step(prompt), 2)
    assert twin.mask.shape[1] == 7
    for fed in (7, 1):  # (one short, and the first step's length)
        feeds = twin.feeds(nxt)
        feeds["attention_mask"] = feeds["attention_mask"][:, :fed]
        _refused(twin.req, feeds, fed, 7, 1)
    nxt = twin.step(nxt, extra=2)
    three = np.concatenate([nxt, rng.integers(1, dec.vocab, (1, 2))], 1)
    feeds = twin.feeds(three)
    feeds["attention_mask"] = feeds["attention_mask"][:, :-1]
    _refused(twin.req, feeds, 10, 8, 3)
    twin.decode(twin.step(three), 2)


def test_the_rule_survives_an_ir_round_trip(exported, tmp_path):
    """Written to IR v11 and read back (every value a string then), the rule is the same and
    still checked."""
    from netpass.passes import Serialize
    _, _, stateful = exported("gpt2", "torchscript")
    Serialize(tmp_path / "m.xml").run_on_model(stateful)
    back = netpass.read_model(tmp_path / "m.xml")
    assert find_state_lengths(stateful) == \
        list(netpass.reference.state_length_rules(back))
    req = netpass.compile_model(back, "REFERENCE", {"TRANSFORMATIONS": "NONE"}) \
        .create_infer_request()
    feeds = {"input_ids": np.ones((1, 3), np.int64), "attention_mask": np.ones((1, 2), np.int64),
             "position_ids": np.arange(3)[None]}
    _refused(req, feeds, 2, 0, 3)


def test_a_malformed_rule_is_refused_on_compiling(exported):
    """A rule naming an input the model lacks (an edited model, a hostile IR) is refused when
    the model is compiled, naming it, not on the first inference."""
    _, _, stateful = exported("gpt2", "torchscript")
    bad = stateful.clone()
    bad.rt_info[RT_INFO_KEY] = {"attention_maks": dict(bad.rt_info[RT_INFO_KEY]
                                                       ["attention_mask"])}
    with pytest.raises(ModelFormatError, match="input 'attention_maks'"):
        netpass.compile_model(bad, "REFERENCE", {"TRANSFORMATIONS": "NONE"})


def test_compile_program_checks_the_rule_too(exported):
    """The runtime compiled straight from the stateful model (``compile_program``) reads the
    rule from its rt_info."""
    from netpass.runtime import compile_program
    _, _, stateful = exported("gpt2", "torchscript")
    req = compile_program(stateful, RUNTIME_DEVICE).create_infer_request()
    feeds = {"input_ids": np.ones((1, 3), np.int64), "attention_mask": np.ones((1, 3), np.int64),
             "position_ids": np.arange(3)[None]}
    req.infer(feeds)
    _refused(req, {**feeds, "input_ids": feeds["input_ids"][:, :1],
                   "position_ids": np.array([[3]])}, 3, 3, 1)
