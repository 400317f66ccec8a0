"""Transformers models as onnxruntime's transformer optimizer rewrites them into its contrib ops
(``onnxruntime.transformers.optimizer.optimize_model``, what ``optimum`` runs at O2+): BERT,
GPT-2 and LLaMA from the zoo's small random-weight configs (``tools/export_zoo.py``; eager
attention, the form whose pattern the optimizer fuses into ``Attention``), exported by the
TorchScript exporter, optimized at levels 1 and 2. Each test asserts the contrib ops the
optimizer wrote (so it cannot pass on an unfused graph), then runs the optimized model in
netpass's runtime over the zoo's input sequence (three shapes and a repeat, one request) against
onnxruntime on the same model: rel. L2 <= 1e-4.
"""
from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import pytest

import netpass
from netpass.testing import RUNTIME_DEVICE

pytest.importorskip("onnxruntime")
pytest.importorskip("torch")
pytest.importorskip("transformers")

import export_zoo  # (tools/, put on the path by conftest.py)

REL_L2 = 1e-4


def _eager(spec_name: str, config: str, cls: str, **sizes):
    """The zoo spec ``spec_name`` built with eager attention (the optimizer does not fuse the
    SDPA export's pattern)."""
    def build():
        import transformers as tf
        model = getattr(tf, cls)(getattr(tf, config)(**sizes, attn_implementation="eager"))
        if spec_name == "bert":
            return export_zoo._module(lambda m, ids, mask, types: m(
                input_ids=ids, attention_mask=mask, token_type_ids=types)[:2], model)
        return export_zoo._module(lambda m, ids, mask: (m(
            input_ids=ids, attention_mask=mask, use_cache=False).logits,), model)
    return dataclasses.replace(export_zoo.SPECS[spec_name], build=build)


SPECS = {
    "bert": _eager("bert", "BertConfig", "BertModel", **export_zoo.TEXT, type_vocab_size=2),
    "gpt2": _eager("gpt2", "GPT2Config", "GPT2LMHeadModel", **export_zoo.GPT2),
    "llama": _eager("llama", "LlamaConfig", "LlamaForCausalLM", **export_zoo.LLAMA),
}
MS = "com.microsoft"
BERT_OPS = {(MS, "SkipLayerNormalization"): 4, (MS, "BiasGelu"): 2}
# optimizer FusionOptions fields set per case
OPTIONS = {"": {}, "mha": {"use_multi_head_attention": True},
           "no_embed": {"enable_embed_layer_norm": False}}
# (model, optimizer model_type, opt_level, OPTIONS key) -> the (domain, op) counts written
CASES = {
    ("bert", "bert", 1, ""): {(MS, "Attention"): 2, (MS, "EmbedLayerNormalization"): 1,
                              **BERT_OPS},
    ("bert", "bert", 2, ""): {(MS, "Attention"): 2, (MS, "EmbedLayerNormalization"): 1,
                              **BERT_OPS},
    ("bert", "bert", 1, "mha"): {(MS, "MultiHeadAttention"): 2,
                                 (MS, "EmbedLayerNormalization"): 1, **BERT_OPS},
    ("bert", "bert", 1, "no_embed"): {(MS, "Attention"): 2, **BERT_OPS},
    ("gpt2", "gpt2", 2, ""): {(MS, "FastGelu"): 2, (MS, "SkipLayerNormalization"): 4},
    ("llama", "gpt2", 1, ""): {(MS, "SkipSimplifiedLayerNormalization"): 4,
                               ("", "SimplifiedLayerNormalization"): 1},
    ("llama", "gpt2", 2, ""): {(MS, "QuickGelu"): 2, ("", "SimplifiedLayerNormalization"): 5},
}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """model name -> its TorchScript export (made once per module)."""
    out = tmp_path_factory.mktemp("ort_optimized")
    return {name: export_zoo.export(spec, "torchscript", out) for name, spec in SPECS.items()}


def _contrib_ops(proto) -> Counter:
    import onnx
    return Counter((n.domain, n.op_type) for n in proto.graph.node
                   if n.domain not in ("", "ai.onnx") or not onnx.defs.has(n.op_type))


@pytest.mark.parametrize("name,model_type,level,option", sorted(CASES), ids=lambda v: str(v))
def test_optimized_model_runs_like_onnxruntime(exported, name, model_type, level, option):
    import onnxruntime as ort
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model
    spec = SPECS[name]
    options = FusionOptions(model_type)
    for field, value in OPTIONS[option].items():
        setattr(options, field, value)
    optimized = optimize_model(str(exported[name]), model_type=model_type, num_heads=4,
                               hidden_size=32, opt_level=level, use_gpu=False,
                               optimization_options=options).model
    assert _contrib_ops(optimized) == Counter(CASES[name, model_type, level, option])
    sess = ort.InferenceSession(optimized.SerializeToString(),
                                providers=["CPUExecutionProvider"])
    req = netpass.compile_model(netpass.read_model(optimized),
                                device=RUNTIME_DEVICE).create_infer_request()
    rng = np.random.default_rng(export_zoo.SEED)
    for sizes in export_zoo.default_sequence(spec):
        feeds = export_zoo.feeds(spec.domain, sizes, rng)
        want = sess.run(list(spec.outputs), feeds)
        got = req.infer(feeds)
        for out, w in zip(spec.outputs, want):
            err = export_zoo.rel_l2(got[out], w)
            assert err <= REL_L2, f"{out} at {sizes}: rel. L2 {err:.2e}"
