"""Export a zoo of Hugging Face ``transformers`` architectures to ONNX, the way users do.

Every model is built from a tiny config written here (random weights, seeded; nothing is
downloaded, no tokenizer) and exported with dynamic batch and sequence (or spatial) axes by
both of torch's exporters: the TorchScript one (``torch.onnx.export(..., dynamo=False)``,
opset 17) and the dynamo one (``dynamo=True``), which write different graphs for the same
module (different shape logic, different op choices). Pairs that do not export are listed in
``EXPORT_FAILURES`` with the reason; the tool skips them and records that in its manifest.

As a tool::

    python tools/export_zoo.py --out zoo/                 # every model, both exporters
    python tools/export_zoo.py --out zoo/ --models bert gpt2 --exporters torchscript
    python tools/export_zoo.py --list

writes ``<model>.<exporter>.onnx`` files and ``zoo.json`` (per file: model, exporter, input
and output names, dynamic axes with the ranges the tests draw shapes from; per failed pair:
the reason). The tests (``tests/zoo/``) and ``benchmarks/bench_zoo.py`` import this module
for the same specs, exports and inputs.
"""
from __future__ import annotations

import argparse
import inspect
import json
import sys
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

EXPORTERS = ("torchscript", "dynamo")
TORCHSCRIPT_OPSET = 17
DYNAMO_OPSET = 18
SEED = 0


@dataclass(frozen=True)
class Axis:
    """A dynamic axis: its name, the sizes the tests draw from (``lo..hi`` by ``step``) and
    the size of the example input the model is exported with."""

    name: str
    lo: int
    hi: int
    export: int
    step: int = 1

    def sizes(self) -> range:
        return range(self.lo, self.hi + 1, self.step)


@dataclass(frozen=True)
class InputSpec:
    """One model input. ``dims``: ints (static), axis names, or ``"a+b"`` (the sum of two
    axes: an attention mask over past and new tokens). ``kind``: ``float`` (standard normal),
    ``ids`` (integers in ``[0, high)``) or ``mask`` (int64 ones then zeros per row, the first
    row unpadded, every row at least one 1: right padding)."""

    name: str
    dims: tuple[int | str, ...]
    kind: str = "float"
    high: int = 0

    def shape(self, sizes: Mapping[str, int]) -> tuple[int, ...]:
        return tuple(d if isinstance(d, int) else sum(sizes[a] for a in d.split("+"))
                     for d in self.dims)


@dataclass(frozen=True)
class Domain:
    """A model's inputs and the dynamic axes their shapes are drawn from."""

    inputs: tuple[InputSpec, ...]
    axes: tuple[Axis, ...]


@dataclass(frozen=True)
class ZooSpec:
    """How to build, export and feed one zoo model.

    ``build`` returns a ``torch.nn.Module`` whose ``forward`` takes the inputs in order and
    returns a tuple of tensors, one per ``outputs`` name; ``output_axes`` names the dynamic
    dims of each output (for the TorchScript exporter's ``dynamic_axes``); ``attention`` counts
    the attention blocks the model computes (layers times attentions per layer: a decoder layer
    of an encoder-decoder has a self and a cross attention), each of which the runtime should
    fuse into one primitive."""

    name: str
    family: str                      # encoder, decoder, encoder-decoder, speech, vision
    build: Callable[[], Any]
    inputs: tuple[InputSpec, ...]
    outputs: tuple[str, ...]
    axes: tuple[Axis, ...]
    output_axes: Mapping[str, Mapping[int, str]] = field(default_factory=dict)
    note: str = ""
    attention: int = 0

    @property
    def domain(self) -> Domain:
        return Domain(self.inputs, self.axes)

    def export_sizes(self) -> dict[str, int]:
        return {a.name: a.export for a in self.axes}

    def dynamic_axes(self) -> dict[str, dict[int, str]]:
        dyn: dict[str, dict[int, str]] = {}
        for inp in self.inputs:
            named = {i: d.replace("+", "_plus_") for i, d in enumerate(inp.dims)
                     if isinstance(d, str)}
            if named:
                dyn[inp.name] = named
        dyn.update({k: dict(v) for k, v in self.output_axes.items()})
        return dyn


# (model, exporter) -> why it does not export; the tool skips these pairs. None with torch
# 2.13, transformers 5.24 and onnxscript 0.7: every model exports with both. What an exporter
# fixed that should have stayed dynamic (so the spec's axes avoid it) is in the spec's note.
EXPORT_FAILURES: dict[tuple[str, str], str] = {}


# -- inputs ---------------------------------------------------------------------------------
def feeds(domain: Domain, sizes: Mapping[str, int], rng: np.random.Generator) -> dict[str,
                                                                                      np.ndarray]:
    """Seeded inputs of ``domain`` at axis ``sizes`` (random non-zero data)."""
    out: dict[str, np.ndarray] = {}
    for inp in domain.inputs:
        shape = inp.shape(sizes)
        if inp.kind == "float":
            out[inp.name] = rng.standard_normal(shape).astype(np.float32)
        elif inp.kind == "ids":
            out[inp.name] = rng.integers(0, inp.high, shape).astype(np.int64)
        elif inp.kind == "mask":
            rows, length = shape
            keep = rng.integers(1, length + 1, rows)
            keep[0] = length
            out[inp.name] = (np.arange(length)[None, :] < keep[:, None]).astype(np.int64)
        else:
            raise ValueError(f"input '{inp.name}' has unknown kind '{inp.kind}'")
    return out


def default_sequence(spec: ZooSpec) -> list[dict[str, int]]:
    """Three different axis sizes and a repeat: the smallest, the export sizes, a mix of the
    largest and the ones past the middle (the largest of an axis of two sizes or one)."""
    low = {a.name: a.lo for a in spec.axes}
    mixed = {a.name: a.sizes()[-1 if i % 2 else min(len(a.sizes()) // 2 + 1, len(a.sizes()) - 1)]
             for i, a in enumerate(spec.axes)}
    return [low, spec.export_sizes(), mixed, low]


def rel_l2(got: np.ndarray, want: np.ndarray) -> float:
    """``|got - want| / |want|`` (L2 norms, float64): how the tests and the benchmark compare
    outputs."""
    want64 = np.asarray(want, dtype=np.float64)
    diff = np.linalg.norm(np.asarray(got, dtype=np.float64) - want64)
    return float(diff / max(np.linalg.norm(want64), 1e-30))


# -- building -------------------------------------------------------------------------------
def _module(forward: Callable[..., tuple], model: Any):
    """A module whose ``forward(*tensors)`` is ``forward(model, *tensors)`` (a tuple)."""
    import torch

    class Wrapped(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *args):
            return tuple(forward(self.model, *args))

    return Wrapped().eval()


def _perturb_norms(module: Any) -> None:
    """Non-trivial norm statistics and affine parameters (fresh ones are identities), so
    that the tests see what folding and decomposing them does."""
    import torch
    g = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                n = m.num_features
                m.running_mean.copy_(torch.randn(n, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(n, generator=g) * 0.5 + 0.75)
            weight, bias = getattr(m, "weight", None), getattr(m, "bias", None)
            if "Norm" in type(m).__name__ and isinstance(weight, torch.Tensor):
                weight.copy_(torch.rand(weight.shape, generator=g) + 0.5)
                if isinstance(bias, torch.Tensor):
                    bias.copy_(torch.randn(bias.shape, generator=g) * 0.1)


def build(spec: ZooSpec):
    """``spec``'s module with its seeded random weights (the same on every call)."""
    import torch
    torch.manual_seed(SEED)
    module = spec.build()
    _perturb_norms(module)
    return module.eval()


TEXT = dict(vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=64, max_position_embeddings=64, initializer_range=0.2)
VOCAB = TEXT["vocab_size"]
BATCH = Axis("batch", 1, 3, 2)
SEQ = Axis("seq", 1, 16, 5)


def _ids(name: str = "input_ids", seq: str = "seq", high: int = VOCAB) -> InputSpec:
    return InputSpec(name, ("batch", seq), "ids", high)


def _mask(seq: str = "seq") -> InputSpec:
    return InputSpec("attention_mask", ("batch", seq), "mask")


def _text_encoder(cls_name: str, config_name: str, **config) -> Callable[[], Any]:
    def make():
        import transformers as tf
        model = getattr(tf, cls_name)(getattr(tf, config_name)(**config))
        return _module(lambda m, ids, mask: m(input_ids=ids, attention_mask=mask)[:1], model)
    return make


def _bert():
    import transformers as tf
    model = tf.BertModel(tf.BertConfig(**TEXT, type_vocab_size=2))
    return _module(lambda m, ids, mask, types: m(input_ids=ids, attention_mask=mask,
                                                 token_type_ids=types)[:2], model)


def _causal_lm(config_name: str, cls_name: str, **config):
    def make():
        import transformers as tf
        model = getattr(tf, cls_name)(getattr(tf, config_name)(**config))
        return _module(lambda m, ids, mask: (m(input_ids=ids, attention_mask=mask,
                                               use_cache=False).logits,), model)
    return make


GPT2 = dict(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64,
            bos_token_id=0, eos_token_id=0, initializer_range=0.2)
LLAMA = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
             initializer_range=0.2)
PAST_LAYERS = 2


def _with_past(config_name: str, cls_name: str, **config):
    """A causal LM fed its past keys/values as tensors (a ``DynamicCache`` built inside), that
    returns the logits and the present keys/values."""
    def make():
        import transformers as tf
        model = getattr(tf, cls_name)(getattr(tf, config_name)(**config))
        # transformers 5.24 renamed ``past_key_values`` (argument and output) to ``cache``
        cache_kw = "cache" if "cache" in inspect.signature(model.forward).parameters \
            else "past_key_values"

        def forward(m, ids, mask, *past):
            cache = tf.DynamicCache([(past[2 * i], past[2 * i + 1]) for i in range(PAST_LAYERS)])
            out = m(input_ids=ids, attention_mask=mask, use_cache=True, **{cache_kw: cache})
            layers = getattr(out, cache_kw).layers
            return (out.logits, *[t for layer in layers for t in (layer.keys, layer.values)])
        return _module(forward, model)
    return make


def _past_io(heads: int, head_dim: int) -> tuple[tuple[InputSpec, ...], tuple[str, ...], dict]:
    inputs = [_ids(), _mask("past+seq")]
    outputs = ["logits"]
    axes: dict[str, dict[int, str]] = {"logits": {0: "batch", 1: "seq"}}
    for i in range(PAST_LAYERS):
        for kind in ("key", "value"):
            inputs.append(InputSpec(f"past_{kind}_{i}", ("batch", heads, "past", head_dim)))
            outputs.append(f"present_{kind}_{i}")
            axes[outputs[-1]] = {0: "batch", 2: "past_plus_seq"}
    return tuple(inputs), tuple(outputs), axes


def _seq2seq(config_name: str, cls_name: str, **config):
    def make():
        import transformers as tf
        model = getattr(tf, cls_name)(getattr(tf, config_name)(**config))
        return _module(lambda m, ids, mask, dec: (m(input_ids=ids, attention_mask=mask,
                                                    decoder_input_ids=dec,
                                                    use_cache=False).logits,), model)
    return make


def _vision(cls_name: str, config_name: str, out: int = 1, **config):
    def make():
        import transformers as tf
        model = getattr(tf, cls_name)(getattr(tf, config_name)(**config))
        return _module(lambda m, x: m(pixel_values=x)[:out], model)
    return make


def _vit():
    import transformers as tf
    model = tf.ViTModel(tf.ViTConfig(image_size=16, patch_size=4, hidden_size=32,
                                     num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=64, initializer_range=0.2))
    return _module(lambda m, x: m(pixel_values=x, interpolate_pos_encoding=True)[:2], model)


def _wav2vec2():
    import transformers as tf
    model = tf.Wav2Vec2Model(tf.Wav2Vec2Config(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=8,
        num_conv_pos_embedding_groups=4, initializer_range=0.2))
    return _module(lambda m, x: m(input_values=x)[:1], model)


WHISPER_MELS, WHISPER_FRAMES = 16, 32


def _whisper_encoder():
    import transformers as tf
    config = tf.WhisperConfig(d_model=32, encoder_layers=2, encoder_attention_heads=4,
                              decoder_layers=1, decoder_attention_heads=4, encoder_ffn_dim=64,
                              decoder_ffn_dim=64, num_mel_bins=WHISPER_MELS,
                              max_source_positions=WHISPER_FRAMES // 2, vocab_size=VOCAB,
                              pad_token_id=0, bos_token_id=1, eos_token_id=2,
                              decoder_start_token_id=1, init_std=0.2)
    return _module(lambda m, x: m(input_features=x)[:1], tf.WhisperModel(config).get_encoder())


IMAGE = (Axis("height", 8, 40, 24), Axis("width", 8, 40, 20))
SWIN_IMAGE = (Axis("height", 16, 40, 24, step=4), Axis("width", 16, 40, 20, step=4))
PIXELS = InputSpec("pixel_values", ("batch", 3, "height", "width"))
GPT2_PAST, LLAMA_PAST = _past_io(heads=4, head_dim=8), _past_io(heads=2, head_dim=8)
PAST_AXES = (BATCH, Axis("seq", 1, 8, 3), Axis("past", 0, 16, 4))   # 0: an empty cache

SPECS: dict[str, ZooSpec] = {s.name: s for s in [
    ZooSpec("bert", "encoder", _bert,
            (_ids(), _mask(), _ids("token_type_ids", high=2)),
            ("last_hidden_state", "pooler_output"), (BATCH, SEQ),
            {"last_hidden_state": {0: "batch", 1: "seq"}, "pooler_output": {0: "batch"}},
            attention=2),
    ZooSpec("roberta", "encoder",
            _text_encoder("RobertaModel", "RobertaConfig",
                          **TEXT | {"max_position_embeddings": 72}),
            (_ids(), _mask()), ("last_hidden_state",), (BATCH, SEQ),
            {"last_hidden_state": {0: "batch", 1: "seq"}},
            note="position ids from a cumulative sum over non-padding tokens", attention=2),
    ZooSpec("distilbert", "encoder",
            _text_encoder("DistilBertModel", "DistilBertConfig", vocab_size=VOCAB, dim=32,
                          n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=64,
                          initializer_range=0.2),
            (_ids(), _mask()), ("last_hidden_state",), (BATCH, SEQ),
            {"last_hidden_state": {0: "batch", 1: "seq"}}, attention=2),
    ZooSpec("gpt2", "decoder", _causal_lm("GPT2Config", "GPT2LMHeadModel", **GPT2),
            (_ids(), _mask()), ("logits",), (BATCH, SEQ), {"logits": {0: "batch", 1: "seq"}},
            attention=2),
    ZooSpec("gpt2_past", "decoder", _with_past("GPT2Config", "GPT2LMHeadModel", **GPT2),
            *GPT2_PAST[:2], PAST_AXES, GPT2_PAST[2],
            note="past keys/values in, present keys/values out", attention=2),
    ZooSpec("llama", "decoder", _causal_lm("LlamaConfig", "LlamaForCausalLM", **LLAMA),
            (_ids(), _mask()), ("logits",), (BATCH, SEQ), {"logits": {0: "batch", 1: "seq"}},
            note="rotary embeddings, RMSNorm, grouped-query attention, SiLU MLP", attention=2),
    ZooSpec("llama_past", "decoder", _with_past("LlamaConfig", "LlamaForCausalLM", **LLAMA),
            *LLAMA_PAST[:2], PAST_AXES, LLAMA_PAST[2],
            note="rotary positions offset by the past length", attention=2),
    ZooSpec("t5", "encoder-decoder",
            _seq2seq("T5Config", "T5ForConditionalGeneration", vocab_size=VOCAB, d_model=32,
                     d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
                     relative_attention_num_buckets=8, relative_attention_max_distance=16,
                     decoder_start_token_id=0, initializer_factor=2.0),
            (_ids(), _mask(), _ids("decoder_input_ids", "target")), ("logits",),
            (BATCH, SEQ, Axis("target", 1, 12, 4)), {"logits": {0: "batch", 1: "target"}},
            note="relative position buckets (Log, Min, Where on positions)", attention=6),
    ZooSpec("bart", "encoder-decoder",
            _seq2seq("BartConfig", "BartForConditionalGeneration", vocab_size=VOCAB, d_model=32,
                     encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                     decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                     max_position_embeddings=64, init_std=0.2),
            (_ids(), _mask(), _ids("decoder_input_ids", "target")), ("logits",),
            (BATCH, SEQ, Axis("target", 1, 12, 4)), {"logits": {0: "batch", 1: "target"}},
            attention=6),
    ZooSpec("wav2vec2", "speech", _wav2vec2,
            (InputSpec("input_values", ("batch", "samples")),), ("last_hidden_state",),
            (BATCH, Axis("samples", 20, 400, 160)),
            {"last_hidden_state": {0: "batch", 1: "frames"}},
            note="strided conv feature encoder with GroupNorm, grouped positional conv",
            attention=2),
    ZooSpec("whisper_encoder", "speech", _whisper_encoder,
            (InputSpec("input_features", ("batch", WHISPER_MELS, WHISPER_FRAMES)),),
            ("last_hidden_state",), (BATCH,), {"last_hidden_state": {0: "batch"}},
            note="frames fixed: Whisper's encoder adds a full-length position table", attention=2),
    ZooSpec("vit", "vision", _vit, (PIXELS,), ("last_hidden_state", "pooler_output"),
            (BATCH, Axis("height", 4, 32, 16), Axis("width", 4, 32, 12)),
            {"last_hidden_state": {0: "batch", 1: "patches"}, "pooler_output": {0: "batch"}},
            note="position table interpolated (bicubic Resize) to the patch grid", attention=2),
    ZooSpec("resnet", "vision",
            _vision("ResNetModel", "ResNetConfig", embedding_size=8, hidden_sizes=[8, 16],
                    depths=[1, 1], layer_type="basic"),
            (PIXELS,), ("last_hidden_state",), (BATCH, *IMAGE),
            {"last_hidden_state": {0: "batch", 2: "h", 3: "w"}}),
    ZooSpec("convnext", "vision",
            _vision("ConvNextModel", "ConvNextConfig", num_channels=3, hidden_sizes=[8, 16],
                    depths=[1, 1], num_stages=2, patch_size=4, initializer_range=0.2),
            (PIXELS,), ("last_hidden_state",), (BATCH, *IMAGE),
            {"last_hidden_state": {0: "batch", 2: "h", 3: "w"}},
            note="channels-first LayerNorm, 7x7 depthwise conv, layer scale"),
    ZooSpec("mobilenet_v2", "vision",
            _vision("MobileNetV2Model", "MobileNetV2Config", depth_multiplier=0.25,
                    image_size=32, output_stride=32, initializer_range=0.2),
            (PIXELS,), ("last_hidden_state",),
            (BATCH, Axis("height", 32, 48, 32), Axis("width", 32, 48, 32)),
            {"last_hidden_state": {0: "batch", 2: "h", 3: "w"}},
            note="TensorFlow 'SAME' padding: both exporters write the export size's pads as "
                 "constants, so the graph holds from that size up"),
    ZooSpec("swin", "vision",
            _vision("SwinModel", "SwinConfig", image_size=16, patch_size=2, embed_dim=16,
                    depths=[1, 1], num_heads=[2, 2], window_size=4, initializer_range=0.2),
            (PIXELS,), ("last_hidden_state",), (BATCH, *SWIN_IMAGE),
            {"last_hidden_state": {0: "batch", 1: "tokens"}},
            note="windows padded to the window size, shifted windows with masks; both "
                 "exporters trace patch merging's pad-if-odd branch as not taken, so sizes "
                 "are multiples of 4, and from 16 (torch itself fails below: a last stage "
                 "smaller than its window)", attention=2),
]}


# -- export ---------------------------------------------------------------------------------
def _torch_args(spec: ZooSpec, arrays: Mapping[str, np.ndarray]) -> tuple:
    import torch
    return tuple(torch.from_numpy(np.ascontiguousarray(arrays[i.name])) for i in spec.inputs)


def export_module(spec: ZooSpec, module: Any, exporter: str, path: Path) -> Path:
    """Export ``module`` (``build(spec)``) with ``exporter`` to ``path``, one self-contained
    ONNX file, with ``spec``'s dynamic axes."""
    import torch
    args = _torch_args(spec, feeds(spec.domain, spec.export_sizes(), np.random.default_rng(SEED)))
    names = dict(input_names=[i.name for i in spec.inputs], output_names=list(spec.outputs))
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        if exporter == "torchscript":
            torch.onnx.export(module, args, str(path), dynamo=False,
                              opset_version=TORCHSCRIPT_OPSET, dynamic_axes=spec.dynamic_axes(),
                              **names)
        elif exporter == "dynamo":
            # torch.export finds how the dims relate (a mask over past + new tokens)
            dims = tuple({i: torch.export.Dim.DYNAMIC for i, d in enumerate(inp.dims)
                          if isinstance(d, str)} for inp in spec.inputs)
            torch.onnx.export(module, args, str(path), dynamo=True, opset_version=DYNAMO_OPSET,
                              external_data=False, verbose=False, dynamic_shapes={"args": dims},
                              **names)
        else:
            raise ValueError(f"unknown exporter '{exporter}'; use one of {EXPORTERS}")
    return path


def export(spec: ZooSpec, exporter: str, out_dir: Path) -> Path:
    """``<out_dir>/<model>.<exporter>.onnx``, exported from ``build(spec)``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    return export_module(spec, build(spec), exporter, out_dir / f"{spec.name}.{exporter}.onnx")


def describe(spec: ZooSpec) -> dict:
    """What the manifest says of ``spec``: family, inputs and the axis ranges."""
    return {"family": spec.family, "note": spec.note, "outputs": list(spec.outputs),
            "attention": spec.attention,
            "inputs": {i.name: {"dims": list(i.dims), "kind": i.kind} for i in spec.inputs},
            "axes": {a.name: {"lo": a.lo, "hi": a.hi, "step": a.step, "export": a.export}
                     for a in spec.axes}}


def export_zoo(out_dir: Path, names: Sequence[str] | None = None,
               exporters: Sequence[str] = EXPORTERS,
               log: Callable[[str], None] | None = None,
               specs: Mapping[str, ZooSpec] | None = None,
               failures: Mapping[tuple[str, str], str] | None = None) -> dict:
    """Export ``names`` (default: all) of ``specs`` (default: ``SPECS``; ``failures``, the
    pairs to skip, with them) with ``exporters`` into ``out_dir``; write and return the
    manifest (``zoo.json``)."""
    out_dir = Path(out_dir)
    specs, failures = (SPECS, EXPORT_FAILURES) if specs is None else (specs, failures or {})
    manifest: dict = {"models": {}, "files": [], "failures": []}
    for name in names or list(specs):
        spec = specs[name]
        manifest["models"][name] = describe(spec)
        for exporter in exporters:
            reason = failures.get((name, exporter))
            if reason:
                manifest["failures"].append({"model": name, "exporter": exporter, "reason": reason})
                continue
            t0 = time.perf_counter()
            path = export(spec, exporter, out_dir)
            seconds = time.perf_counter() - t0
            manifest["files"].append({"model": name, "exporter": exporter, "path": path.name,
                                      "seconds": round(seconds, 2)})
            if log:
                log(f"{path.name}: {seconds:.1f} s")
    (out_dir / "zoo.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def main(argv: Sequence[str] | None = None, specs: Mapping[str, ZooSpec] | None = None,
         failures: Mapping[tuple[str, str], str] | None = None) -> int:
    """The command line, over ``specs`` and their ``failures`` (default: this module's)."""
    specs, failures = (SPECS, EXPORT_FAILURES) if specs is None else (specs, failures or {})
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, help="folder for the .onnx files and zoo.json")
    parser.add_argument("--models", nargs="+", choices=list(specs), help="default: all")
    parser.add_argument("--exporters", nargs="+", choices=EXPORTERS, default=list(EXPORTERS))
    parser.add_argument("--list", action="store_true", help="list the models and known failures")
    args = parser.parse_args(argv)
    if args.list:
        for spec in specs.values():
            print(f"{spec.name:16} {spec.family:16} {spec.note}")
        for (name, exporter), reason in failures.items():
            print(f"not exported: {name} with {exporter}: {reason}")
        return 0
    if args.out is None:
        parser.error("--out is required (or --list)")
    manifest = export_zoo(args.out, args.models, args.exporters, log=print, specs=specs,
                          failures=failures)
    print(f"{len(manifest['files'])} files in {args.out}, {len(manifest['failures'])} pairs not "
          "exported")
    return 0


if __name__ == "__main__":
    sys.exit(main())
