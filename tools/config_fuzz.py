"""Seeded fuzzing of transformers CONFIGS (not shapes): each zoo architecture re-built from a
perturbed small config, exported by both exporters, and checked against onnxruntime.

The zoo (``export_zoo.py``, ``zoo_archs.py``, ``export_decoder.py``) exports fixed tiny configs;
a user's model has other sizes, activations, norms, rotary parameters. ``perturb`` redraws the
fields a config has: the attention geometry (heads 1-5, head sizes small and odd, the hidden
size their product: ``hidden % heads == 0`` holds), odd feed-forward and vocabulary sizes,
1-3 layers, the activation (any of transformers' ``ACT2FN``), norm epsilons, tied embeddings.
``decoder_draw`` does the same for a causal LM of ``export_decoder.causal_lm`` and adds
grouped-query ratios (1, 2, 3, 4 and multi-query), explicit head sizes, rotary scaling (linear,
dynamic, yarn, llama3), ``rope_theta``, ``partial_rotary_factor``, small sliding windows and
bias flags. Draws torch itself rejects (a config transformers refuses, a forward that fails)
are skipped, not failures.

Checks (as the zoo tests): ``check_spec`` compiles an encoder, vision, speech or seq2seq export
with netpass for ``RUNTIME_DEVICE`` and runs 3-5 input shapes in ONE infer request, each within
rel. L2 1e-4 of onnxruntime; ``check_decoder`` makes a decoder export stateful and generates
greedily twice on one request, prompts of different lengths, against the plain export run step
by step in onnxruntime (same tokens, logits within rel. L2 1e-4, up to a tie).

    python tools/config_fuzz.py --seeds 0 1 2 --models bert llama t5      # a sweep
    python tools/config_fuzz.py --decoders qwen2 phi --seeds 3
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
import traceback
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import export_zoo
import numpy as np
import zoo_archs
from export_decoder import UNEXPORTABLE, ort_generate, tie_step
from export_zoo import ZooSpec

REL_L2 = 1e-4
ACTS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "quick_gelu", "relu", "silu",
        "mish", "tanh", "relu2", "gelu_accurate", "sigmoid", "leaky_relu", "hardswish")
ACT_KEYS = ("hidden_act", "activation_function", "hidden_activation")
EPS_KEYS = ("layer_norm_eps", "layer_norm_epsilon", "rms_norm_eps", "norm_eps")
EPS = (1e-12, 1e-6, 1e-5, 1e-3)
HIDDEN_KEYS = ("hidden_size", "d_model", "dim", "emb_dim", "n_embd")
HEAD_KEYS = ("num_attention_heads", "n_heads", "n_head", "num_heads", "encoder_attention_heads",
             "decoder_attention_heads", "encoder_num_attention_heads",
             "decoder_num_attention_heads")
FFN_KEYS = ("intermediate_size", "hidden_dim", "d_ff", "d_inner", "encoder_ffn_dim",
            "decoder_ffn_dim", "ffn_dim")
LAYER_KEYS = ("num_hidden_layers", "n_layers", "n_layer", "num_layers", "num_decoder_layers",
              "encoder_layers", "decoder_layers", "encoder_num_hidden_layers",
              "decoder_num_hidden_layers")
HEAD_DIMS = (4, 5, 6, 7, 8, 10, 12, 20)
# the zoo's specs, with those built without a config dict (BERT, ViT, wav2vec2) again from one
FAILURES = {**export_zoo.EXPORT_FAILURES, **zoo_archs.EXPORT_FAILURES}
SPECS: dict[str, ZooSpec] = {**export_zoo.SPECS, **zoo_archs.SPECS} | {s.name: s for s in [
    zoo_archs.text("bert", "Bert", **export_zoo.TEXT, type_vocab_size=2),
    zoo_archs.vision("vit", "ViT", resized=True, **zoo_archs.VIT),
    zoo_archs.audio("wav2vec2", "Wav2Vec2")]}
# transformers model types the zoo does not cover at all (tiny configs as the zoo's)
NEW_SPECS: dict[str, ZooSpec] = {s.name: s for s in [
    zoo_archs.text("eurobert", "EuroBert", "rotary, RMSNorm, bidirectional llama",
                   **export_zoo.TEXT, pad_token_id=0, bos_token_id=1, eos_token_id=2),
    zoo_archs.text("nomic_bert", "NomicBert", "rotary, SwiGLU", **export_zoo.TEXT),
    zoo_archs.text("gte", "Gte", "rotary, GLU", **export_zoo.TEXT),
    zoo_archs.text("flaubert", "Flaubert", vocab_size=export_zoo.VOCAB, emb_dim=32, n_layers=2,
                   n_heads=4),
    zoo_archs.text("roc_bert", "RoCBert", "pronunciation and shape embeddings (ids 0)",
                   **export_zoo.TEXT),
    zoo_archs.text("mra", "Mra", **export_zoo.TEXT | {"max_position_embeddings": 72}),
    zoo_archs.vision("vitdet", "VitDet", "windowed and global attention, relative positions",
                     model="Backbone", **zoo_archs.VIT, out_features=["stage1"])]}
# (not here: dinov2_with_registers (TorchScript: no ONNX export of antialiased bicubic
# upsampling; the dynamo graph fails in onnxruntime) and pvt (its tiny config fails in torch))


class ReferenceFailed(Exception):
    """onnxruntime itself fails on an export (a size the exporter fixed): not netpass's."""


def _choice(rng: np.random.Generator, options: Sequence[Any]) -> Any:
    return options[int(rng.integers(len(options)))]


def _odd(rng: np.random.Generator, lo: int, hi: int) -> int:
    return int(rng.integers(lo // 2, hi // 2)) * 2 + 1


def config_fields(config_name: str) -> set[str]:
    """The fields a transformers config class takes (its ``__init__``'s and its defaults')."""
    import inspect

    import transformers as tf
    cls = getattr(tf, config_name)
    fields = set(inspect.signature(cls.__init__).parameters)
    with contextlib.suppress(Exception):   # (a config that needs arguments: its signature)
        fields |= set(cls().to_dict())
    return fields


def perturb(base: Mapping[str, Any], fields: set[str], rng: np.random.Generator) -> dict:
    """``base`` (a small config's fields) with its sizes, activation, epsilons, layer counts
    and vocabulary redrawn; only fields ``base`` sets (sizes) or the class takes (the rest)."""
    cfg = dict(base)
    hidden = [k for k in HIDDEN_KEYS if isinstance(cfg.get(k), int)]
    heads = [k for k in HEAD_KEYS if isinstance(cfg.get(k), int)]
    if hidden and heads:
        n, head_dim = int(rng.integers(1, 6)), _choice(rng, HEAD_DIMS)
        if "d_kv" in cfg:    # (T5: the head size is its own field)
            cfg["d_kv"] = head_dim
            head_dim = _odd(rng, 9, 41) // n + 1
        old = cfg[hidden[0]]
        for k in hidden:
            cfg[k] = n * head_dim
        for k in heads:
            cfg[k] = n
        if isinstance(cfg.get("num_conv_pos_embedding_groups"), int):   # (divides the hidden)
            cfg["num_conv_pos_embedding_groups"] = n
        if isinstance(cfg.get("num_key_value_heads"), int):   # (a divisor: GQA or MQA)
            cfg["num_key_value_heads"] = _choice(rng, [g for g in range(1, n + 1) if n % g == 0])
        for k in ("embedding_size", "true_hidden_size", "intra_bottleneck_size"):
            if cfg.get(k) == old:    # (sizes tied to the hidden one stay tied)
                cfg[k] = cfg[hidden[0]]
    for k in FFN_KEYS:
        if isinstance(cfg.get(k), int):
            cfg[k] = _odd(rng, 9, 71)
    for k in LAYER_KEYS:
        if isinstance(cfg.get(k), int):
            cfg[k] = int(rng.integers(1, 4))
    for k in ACT_KEYS:
        if k in fields and not isinstance(cfg.get(k), (list, tuple)):
            cfg[k] = _choice(rng, ACTS)
            break
    for k in EPS_KEYS:
        if k in fields:
            cfg[k] = _choice(rng, EPS)
    if isinstance(cfg.get("vocab_size"), int):
        cfg["vocab_size"] = _odd(rng, 97, 161)   # (above the zoo's special token ids)
    if "tie_word_embeddings" in fields:
        cfg["tie_word_embeddings"] = bool(rng.integers(2))
    return cfg


def _with_config(build: Callable, config: dict) -> Callable:
    """``build`` (a zoo maker closing over ``config``) closing over another ``config``."""
    names = build.__code__.co_freevars
    cells = tuple(types.CellType(config) if name == "config" else cell
                  for name, cell in zip(names, build.__closure__ or ()))
    return types.FunctionType(build.__code__, build.__globals__, build.__name__,
                              build.__defaults__, cells)


def fuzz_spec(spec: ZooSpec, seed: int) -> tuple[ZooSpec, dict] | None:
    """``spec`` re-built from a config perturbed by ``seed`` (its ids drawn from the new
    vocabulary) and that config; None for a spec not built from a config dict."""
    code = spec.build.__code__
    if "config" not in code.co_freevars:
        return None
    cells = dict(zip(code.co_freevars, spec.build.__closure__ or ()))
    base, config_name = cells["config"].cell_contents, cells["config_name"].cell_contents
    rng = np.random.default_rng([seed, *map(ord, spec.name)])
    config = perturb(base, config_fields(config_name), rng)
    vocab = config.get("vocab_size", base.get("vocab_size"))
    inputs = tuple(dataclasses.replace(i, high=vocab)
                   if i.kind == "ids" and i.high == base.get("vocab_size") else i
                   for i in spec.inputs)
    return dataclasses.replace(spec, build=_with_config(spec.build, config), inputs=inputs), config


def shape_steps(spec: ZooSpec, rng: np.random.Generator) -> list[dict[str, int]]:
    """3-5 axis sizes for one request: the smallest (sequence 1), then draws (odd lengths
    where the axis has them), the last a repeat of an earlier one."""
    steps = [{a.name: a.lo for a in spec.axes}]
    for _ in range(int(rng.integers(2, 4))):
        steps.append({a.name: int(_choice(rng, a.sizes())) for a in spec.axes})
    steps.append(dict(_choice(rng, steps[:-1])))
    return steps


def check_spec(spec: ZooSpec, path: Any, seed: int, transformations: str = "COMMON"
               ) -> list[str]:
    """``path`` (an export of ``spec``, a ``fuzz_spec``) compiled with netpass, ``shape_steps``
    run in one request against onnxruntime; the failures, one line each."""
    import onnxruntime as ort

    import netpass
    from netpass.testing import RUNTIME_DEVICE
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    rng = np.random.default_rng(seed)
    takes = {i.name for i in sess.get_inputs()}   # (an exporter drops an input not read)
    steps = [(sizes, {k: v for k, v in export_zoo.feeds(spec.domain, sizes, rng).items()
                      if k in takes}) for sizes in shape_steps(spec, rng)]
    try:   # (first: an export onnxruntime refuses too is no case, whatever netpass says)
        wants = [dict(zip(names, sess.run(None, feeds))) for _, feeds in steps]
    except Exception as e:
        raise ReferenceFailed(f"onnxruntime: {e}") from e
    compiled = netpass.compile_model(netpass.read_model(path), RUNTIME_DEVICE,
                                     {"TRANSFORMATIONS": transformations})
    req = compiled.create_infer_request()
    errors = []
    for (sizes, feeds), want in zip(steps, wants):
        got = req.infer(feeds)
        for key, ref in want.items():
            if got[key].shape != ref.shape:
                errors.append(f"{sizes}: {key} shape {got[key].shape} != {ref.shape}")
            elif (err := export_zoo.rel_l2(got[key], ref)) > REL_L2:
                errors.append(f"{sizes}: {key} rel. L2 {err:.3g}")
    return errors


# -- decoders ------------------------------------------------------------------------------
ROPE_TYPES = ("default", "default", "linear", "dynamic", "yarn", "llama3")
# boolean and numeric fields of some model types that change the graph: flipped or drawn
# where the config takes them
FLAGS = ("qk_layernorm", "use_qkv_bias", "parallel_attn", "new_decoder_architecture", "alibi",
         "multi_query", "use_parallel_residual", "scale_attn_by_inverse_layer_idx",
         "reorder_and_upcast_attn", "apply_residual_connection_post_layernorm",
         "do_layer_norm_before", "scale_attn_weights", "use_qk_norm", "attention_bias",
         "mlp_bias", "use_bias", "bias", "qkv_bias", "tie_word_embeddings")
SCALES = ("attn_logit_softcapping", "final_logit_softcapping", "query_pre_attn_scalar",
          "embedding_multiplier", "residual_multiplier", "attention_multiplier",
          "logits_scaling")


def decoder_draw(arch: str, seed: int) -> dict:
    """``causal_lm`` arguments for ``arch``: sizes and a ``config`` of more fields, drawn
    from ``seed`` (only fields ``arch``'s config takes)."""
    import inspect

    from transformers import CONFIG_MAPPING
    fields = set(inspect.signature(CONFIG_MAPPING[arch].__init__).parameters)
    rng = np.random.default_rng([seed, *map(ord, arch)])
    kv = int(rng.integers(1, 4))
    heads = kv * _choice(rng, (1, 1, 2, 3, 4))      # (kv 1: multi-query)
    head_dim = _choice(rng, (4, 6, 8, 10, 12, 16, 20))
    sizes = {"layers": int(rng.integers(1, 4)), "heads": heads, "kv_heads": kv,
             "d": heads * head_dim, "ffn": _odd(rng, 9, 71), "vocab": _odd(rng, 97, 199),
             "positions": 256}
    config: dict[str, Any] = {}
    act = next((k for k in ACT_KEYS if k in fields), None)
    if act:
        config[act] = _choice(rng, ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "silu",
                                    "quick_gelu", "gelu_fast", "tanh"))
    for k in EPS_KEYS:
        if k in fields:
            config[k] = _choice(rng, EPS)
    if "head_dim" in fields and rng.integers(3) == 0:   # a head size of its own
        config["head_dim"] = _choice(rng, (6, 10, 12, 20))
    for k in ("rotary_dim", "rotary_emb_base"):
        if k in fields and rng.integers(2):   # (GPT-J, CodeGen: rotary on part of a head)
            config[k] = 2 if k == "rotary_dim" else 500.0
    if "rope_parameters" in fields:
        rope: dict[str, Any] = {"rope_type": _choice(rng, ROPE_TYPES),
                                "rope_theta": float(_choice(rng, (10.0, 500.0, 1e4, 1e6)))}
        if rope["rope_type"] != "default":
            rope["factor"] = float(_choice(rng, (1.5, 2.0, 4.0)))
        if rope["rope_type"] in ("yarn", "llama3"):
            rope["original_max_position_embeddings"] = 64
        if rope["rope_type"] == "llama3":
            rope |= {"low_freq_factor": 1.0, "high_freq_factor": 4.0}
        if rng.integers(3) == 0:
            rope["partial_rotary_factor"] = _choice(rng, (0.5, 0.25))
        config["rope_parameters"] = rope
    if "sliding_window" in fields and rng.integers(2):
        config["sliding_window"] = int(rng.integers(3, 9))
        if "use_sliding_window" in fields:
            config["use_sliding_window"] = True
    for k in FLAGS:
        if k in fields and rng.integers(2):
            config[k] = bool(rng.integers(2))
    for k in SCALES:
        if k in fields and rng.integers(2):
            config[k] = float(_choice(rng, (0.5, 2.0, 8.0, 30.0)))
    if "word_embed_proj_dim" in fields and rng.integers(2):   # (OPT: project in and out)
        config["word_embed_proj_dim"] = _odd(rng, 9, 31)
    return sizes | {"config": config}


def check_decoder(dec: Any, seed: int, new_tokens: int = 10,
                  transformations: str = "COMMON") -> list[str]:
    """``dec`` (an ``export_decoder.Decoder``) made stateful, compiled, and two greedy
    generations on one request (prompts of 1-9 tokens, batch 1-2) against ``ort_generate``;
    the failures, one line each."""
    import netpass
    from netpass.generation import GreedyDecoder, stateful_decoder
    from netpass.testing import RUNTIME_DEVICE
    rng = np.random.default_rng(seed)
    prompts = [rng.integers(1, dec.vocab, (int(rng.integers(1, 3)), int(rng.integers(1, 10))))
               for _ in range(2)]
    try:   # (first: an export onnxruntime refuses too is no case, whatever netpass says)
        wants = [ort_generate(dec, prompt, new_tokens) for prompt in prompts]
    except Exception as e:
        raise ReferenceFailed(f"onnxruntime: {e}") from e
    stateful = stateful_decoder(netpass.read_model(dec.onnx))
    compiled = netpass.compile_model(stateful, RUNTIME_DEVICE,
                                     {"TRANSFORMATIONS": transformations})
    req = compiled.create_infer_request()
    errors = []
    for run, (prompt, want) in enumerate(zip(prompts, wants)):
        got = GreedyDecoder(compiled).generate(prompt, new_tokens, request=req)
        tokens = np.stack([w.argmax(-1) for w in want], axis=1)
        tie = tie_step(want, REL_L2)
        what = f"generation {run}, prompt {prompt.shape}"
        if not np.array_equal(got.tokens[:, :tie], tokens[:, :tie]):
            errors.append(f"{what}: tokens {got.tokens.tolist()} != {tokens.tolist()}")
        worst = max(((export_zoo.rel_l2(g, w), k) for k, (g, w) in
                     enumerate(zip(got.logits, want)) if k <= tie), default=(0.0, 0))
        if worst[0] > REL_L2:
            errors.append(f"{what}: logits rel. L2 {worst[0]:.3g} at step {worst[1]}")
    return errors


def export_drawn_decoder(arch: str, exporter: str, seed: int) -> Any:
    """``arch`` built from ``decoder_draw(arch, seed)`` and exported by ``exporter``."""
    from export_decoder import causal_lm, export_decoder
    draw = decoder_draw(arch, seed)
    draw["init"] = 0.2
    return export_decoder(arch, *causal_lm(arch, **draw), exporter=exporter)


@dataclasses.dataclass
class Case:
    """One case's outcome: ``skipped`` (why torch, the exporter or onnxruntime refused the
    draw), else ``errors`` (netpass's differences, or what it raised); ``config``: the draw."""

    config: dict
    errors: list[str] = dataclasses.field(default_factory=list)
    skipped: str = ""


def _first_line(e: Exception) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"


def run_case(name: str, exporter: str, seed: int, out_dir: Any) -> Case:
    """Draw ``seed`` of zoo spec ``name`` (``"decoder:<model type>"``: a causal LM), export it
    with ``exporter`` (into ``out_dir``) and check it (``check_spec``, ``check_decoder``)."""
    is_decoder = name.startswith("decoder:")
    arch = name.split(":", 1)[-1]
    try:
        if is_decoder:
            case = Case(decoder_draw(arch, seed))
            dec = export_drawn_decoder(arch, exporter, seed)
        else:
            drawn = fuzz_spec({**SPECS, **NEW_SPECS}[name], seed)
            if drawn is None:
                return Case({}, skipped="not built from a config dict")
            spec, config = drawn
            case = Case(config)
            path = export_zoo.export(spec, exporter, out_dir)
    except Exception as e:   # (torch or transformers refuses the config, the exporter fails)
        return Case({}, skipped=f"torch: {_first_line(e)}")
    try:
        case.errors = check_decoder(dec, seed) if is_decoder else check_spec(spec, path, seed)
    except ReferenceFailed as e:
        case.skipped = _first_line(e)
    except Exception as e:
        case.errors = [f"raised {type(e).__name__}: {e}"[:600], traceback.format_exc()[-1500:]]
    return case


def case_errors(name: str, exporter: str, seed: int, out_dir: Any) -> list[str] | None:
    """:func:`run_case`'s failures, or None where torch, the exporter or onnxruntime refuses
    the draw (what the CI tests assert on)."""
    case = run_case(name, exporter, seed, out_dir)
    return None if case.skipped else case.errors


def main(argv: Sequence[str] | None = None) -> int:
    """The sweep: each model x seed x exporter, a line per case (ok, skip: torch, the exporter
    or onnxruntime refuses the draw, FAIL: netpass differs or raises); 1 if any failed."""
    import tempfile
    from pathlib import Path
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="*", default=[],
                    help="zoo specs (all: every one; new: the model types the zoo lacks)")
    ap.add_argument("--decoders", nargs="*", default=[], help="causal LM model types")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--exporters", nargs="+", default=list(export_zoo.EXPORTERS))
    args = ap.parse_args(argv)
    out = Path(tempfile.mkdtemp(prefix="cfgfuzz"))
    models = {"all": list(SPECS), "new": list(NEW_SPECS)}.get(" ".join(args.models), args.models)
    failed = 0
    for seed in args.seeds:
        for name in [*models, *(f"decoder:{a}" for a in args.decoders)]:
            for exporter in args.exporters:
                if (name, exporter) in FAILURES or (name[8:], exporter) in UNEXPORTABLE:
                    continue
                case = run_case(name, exporter, seed, out)
                tag = f"{name} seed {seed} {exporter}"
                if case.skipped:
                    print(f"skip {tag}: {case.skipped}", flush=True)
                    continue
                failed += bool(case.errors)
                print(f"{'FAIL' if case.errors else 'ok'} {tag} {case.config}", flush=True)
                for line in case.errors:
                    print("    " + line.replace("\n", "\n    "), flush=True)
    return int(failed > 0)


if __name__ == "__main__":
    sys.exit(main())
