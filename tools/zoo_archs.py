"""More transformers architectures for the zoo: the specs of ``export_zoo.py`` (same format,
exports, inputs and manifest), for what the first sixteen leave out.

Encoders with other attention and embedding schemes (DeBERTa's disentangled relative
attention, MPNet's relative bias, RoFormer's and ESM's rotary, BigBird's full attention,
Longformer's sliding windows, Funnel's pooling, SqueezeBERT's grouped 1x1 convolutions, FNet's
Fourier transform, MobileBERT's bottlenecks, LayoutLM's box embeddings), vision backbones
(DeiT, BEiT, DINOv2, LeViT, SegFormer, EfficientNet, RegNet, PoolFormer, MobileViT, YOLOS,
CLIP and SigLIP towers, PVTv2, Swinv2, FocalNet, CvT, Hiera, ...), speech encoders (HuBERT,
WavLM, Data2Vec, SEW, UniSpeech, Wav2Vec2-Conformer) and encoder-decoders (Whisper in full,
Speech2Text, Marian, mBART, Pegasus, Blenderbot, M2M100, mT5, LongT5, LED, ...): every one
from a tiny random config, both exporters. ``tests/zoo/test_zoo_archs.py`` runs them;
``docs/transformers-zoo.md`` says what each brings and where an exporter specializes a size.

    python tools/zoo_archs.py --list
    python tools/zoo_archs.py --out zoo/ --models deberta_v2 whisper
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import export_zoo
from export_zoo import (
    BATCH,
    PIXELS,
    SEQ,
    TEXT,
    VOCAB,
    Axis,
    InputSpec,
    ZooSpec,
    _ids,
    _mask,
    _module,
    _seq2seq,
    _text_encoder,
)


def _hf(cls_name: str, config_name: str, forward: Callable[..., tuple], **config):
    def make():
        import transformers as tf
        return _module(forward, getattr(tf, cls_name)(getattr(tf, config_name)(**config)))
    return make


def _pixels(m, x):
    return m(pixel_values=x)[:1]


def _pixels_resized(m, x):
    return m(pixel_values=x, interpolate_pos_encoding=True)[:1]


def _audio(m, x):
    return m(input_values=x)[:1]


def _boxes(m, ids, mask, box):
    """LayoutLM and LiLT with ``box`` as ``[x0, y0, w, h]``: coordinates ordered, in range."""
    import torch
    bbox = torch.cat([box[..., :2], box[..., :2] + box[..., 2:]], -1)
    return m(input_ids=ids, attention_mask=mask, bbox=bbox)[:1]


def _pooled(m, ids, mask):
    out = m(input_ids=ids, attention_mask=mask)
    return out.last_hidden_state, out.pooler_output


def _logits(m, ids):
    return (m(input_ids=ids).logits,)


def _masked_logits(m, ids, mask):
    return (m(input_ids=ids, attention_mask=mask).logits,)


def _features(m, x):
    return m(input_features=x)[:1]


def _masked_features(m, x, mask):
    return m(input_features=x, attention_mask=mask)[:1]


def _reconstruction(m, x):
    return (m(pixel_values=x).reconstruction,)


def _last_feature_map(m, x):
    return m(pixel_values=x).feature_maps[-1:]


def _past_values(m, x):
    return m(past_values=x)[:1]


def _decoded_audio(m, x):
    return (m(input_values=x).audio_values,)


def _moonshine(m, x, dec):
    return (m(input_values=x, decoder_input_ids=dec, use_cache=False).logits,)


def _depth_anything():
    import transformers as tf
    backbone = tf.Dinov2Config(image_size=28, patch_size=14, hidden_size=32,
                               num_hidden_layers=4, num_attention_heads=4, mlp_ratio=2,
                               out_indices=[1, 2, 3, 4], reshape_hidden_states=False,
                               initializer_range=0.2)
    config = tf.DepthAnythingConfig(backbone_config=backbone, reassemble_hidden_size=32,
                                    neck_hidden_sizes=[8, 16, 32, 32], fusion_hidden_size=16,
                                    head_hidden_size=8, patch_size=14)
    return _module(lambda m, x: (m(pixel_values=x).predicted_depth,),
                   tf.DepthAnythingForDepthEstimation(config))


def _whisper(m, features, dec):
    return (m(input_features=features, decoder_input_ids=dec, use_cache=False).logits,)


def _speech2text(m, features, mask, dec):
    return (m(input_features=features, attention_mask=mask, decoder_input_ids=dec,
              use_cache=False).logits,)


HIDDEN = {"last_hidden_state": {0: "batch", 1: "seq"}}
VISION_OUT = {"last_hidden_state": {0: "batch"}}
IMAGE = (Axis("height", 16, 48, 32, step=8), Axis("width", 16, 48, 24, step=8))
IMAGE_32 = (Axis("height", 32, 64, 32, step=16), Axis("width", 32, 64, 48, step=16))
SAMPLES = Axis("samples", 30, 400, 160)
TARGET = Axis("target", 1, 12, 4)
ROBERTA = TEXT | {"max_position_embeddings": 72}   # positions offset by the padding id
AUDIO = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
             conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
             num_conv_pos_embeddings=8, num_conv_pos_embedding_groups=4, initializer_range=0.2)
VIT = dict(image_size=16, patch_size=4, hidden_size=32, num_hidden_layers=2,
           num_attention_heads=4, intermediate_size=64, initializer_range=0.2)
BART = dict(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2,
            encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
            decoder_ffn_dim=64, max_position_embeddings=64, init_std=0.2, pad_token_id=1,
            bos_token_id=0, eos_token_id=2, decoder_start_token_id=2)
T5 = dict(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
          num_heads=4, relative_attention_num_buckets=8, relative_attention_max_distance=16,
          decoder_start_token_id=0, initializer_factor=2.0)


def text(name: str, cls: str, note: str = "", axes: tuple[Axis, ...] = (BATCH, SEQ),
         **config: Any) -> ZooSpec:
    """An encoder fed ids and a padding mask, its last hidden state out."""
    return ZooSpec(name, "encoder", _text_encoder(f"{cls}Model", f"{cls}Config", **config),
                   (_ids(), _mask()), ("last_hidden_state",), axes, HIDDEN, note=note)


def vision(name: str, cls: str, note: str = "", axes: tuple[Axis, ...] = (BATCH, *IMAGE),
           resized: bool = False, model: str = "Model", **config: Any) -> ZooSpec:
    """A vision model fed pixels (``resized``: its position table interpolated to the grid;
    ``model``: the class's suffix, a backbone's last feature map for ``Backbone``)."""
    forward = _last_feature_map if model == "Backbone" else \
        _pixels_resized if resized else _pixels
    return ZooSpec(name, "vision", _hf(f"{cls}{model}", f"{cls}Config", forward, **config),
                   (PIXELS,), ("last_hidden_state",), axes, VISION_OUT, note=note)


def recurrent(name: str, cls: str, note: str, masked: bool = False, **config: Any) -> ZooSpec:
    """A causal LM whose recurrence both exporters unroll over the export length (5 tokens,
    static); the batch stays dynamic."""
    ids = InputSpec("input_ids", ("batch", 5), "ids", VOCAB)
    inputs = (ids, InputSpec("attention_mask", ("batch", 5), "mask")) if masked else (ids,)
    forward = _masked_logits if masked else _logits
    return ZooSpec(name, "decoder", _hf(f"{cls}ForCausalLM", f"{cls}Config", forward, **config),
                   inputs, ("logits",), (BATCH,), {"logits": {0: "batch"}}, note=note)


def audio(name: str, cls: str, note: str = "", axes: tuple[Axis, ...] = (BATCH, SAMPLES),
          **config: Any) -> ZooSpec:
    """A speech encoder fed raw audio (wav2vec2's strided conv feature encoder)."""
    return ZooSpec(name, "speech", _hf(f"{cls}Model", f"{cls}Config", _audio, **AUDIO | config),
                   (InputSpec("input_values", ("batch", "samples")),), ("last_hidden_state",),
                   axes, {"last_hidden_state": {0: "batch", 1: "frames"}}, note=note)


def seq2seq(name: str, cls: str, config: str, note: str = "",
            axes: tuple[Axis, ...] = (BATCH, SEQ, TARGET), **kw: Any) -> ZooSpec:
    """An encoder-decoder fed ids, mask and decoder ids, its logits out."""
    return ZooSpec(name, "encoder-decoder", _seq2seq(config, cls, **kw),
                   (_ids(), _mask(), _ids("decoder_input_ids", "target")), ("logits",), axes,
                   {"logits": {0: "batch", 1: "target"}}, note=note)


WHISPER_MELS, WHISPER_FRAMES = 16, 32
VIDEO = (InputSpec("pixel_values", ("batch", 4, 3, 16, 16)),)   # 4 frames fixed by the model
VIDEO_VIT = dict(image_size=16, num_frames=4, hidden_size=32, num_hidden_layers=2,
                 num_attention_heads=4, intermediate_size=64)


def video(name: str, cls: str, note: str, **config: Any) -> ZooSpec:
    return ZooSpec(name, "vision", _hf(f"{cls}Model", f"{cls}Config", _pixels,
                                       **VIDEO_VIT | config),
                   VIDEO, ("last_hidden_state",), (BATCH,), VISION_OUT, note=note)


SPECS: dict[str, ZooSpec] = {s.name: s for s in [
    # -- encoders ----------------------------------------------------------------------------
    text("albert", "Albert", "factorized embeddings, one layer's weights shared",
         **TEXT, embedding_size=16),
    text("electra", "Electra", "embeddings projected to the hidden size", **TEXT,
         embedding_size=16),
    text("deberta", "Deberta", "disentangled attention: content-to-position and back, "
         "relative positions gathered", **TEXT, relative_attention=True,
         pos_att_type=["c2p", "p2c"], max_relative_positions=16),
    text("deberta_v2", "DebertaV2", "log-bucketed relative positions, shared keys", **TEXT,
         relative_attention=True, pos_att_type=["c2p", "p2c"], position_buckets=8,
         norm_rel_ebd="layer_norm", share_att_key=True, max_relative_positions=16),
    text("mpnet", "MPNet", "relative position bias from buckets", **ROBERTA),
    text("xlm_roberta", "XLMRoberta", **ROBERTA),
    text("camembert", "Camembert", **ROBERTA),
    text("data2vec_text", "Data2VecText", **ROBERTA),
    text("roberta_prelayernorm", "RobertaPreLayerNorm", "LayerNorm before each block",
         **ROBERTA),
    text("ibert", "IBert", "integer-only BERT in float mode", **ROBERTA),
    text("xmod", "Xmod", "per-language adapters", **ROBERTA, languages=["en_XX"],
         default_language="en_XX"),
    text("megatron_bert", "MegatronBert", **TEXT),
    text("ernie", "Ernie", **TEXT),
    text("splinter", "Splinter", **TEXT),
    text("mobilebert", "MobileBert", "bottlenecks, NoNorm, trigram input embedding",
         vocab_size=VOCAB, hidden_size=32, embedding_size=16, intra_bottleneck_size=16,
         true_hidden_size=16, num_attention_heads=4, intermediate_size=32, num_hidden_layers=2,
         num_feedforward_networks=2, max_position_embeddings=64, initializer_range=0.2),
    text("squeezebert", "SqueezeBert", "grouped 1x1 convolutions for the projections", **TEXT,
         embedding_size=32, q_groups=2, k_groups=2, v_groups=2, post_attention_groups=2,
         intermediate_groups=2, output_groups=2),
    text("roformer", "RoFormer", "sinusoidal rotary positions", **TEXT, embedding_size=32),
    text("esm", "Esm", "rotary positions, token dropout rescaling", **TEXT,
         position_embedding_type="rotary", pad_token_id=1, mask_token_id=95),
    text("convbert", "ConvBert", "span-based dynamic convolution heads", **TEXT,
         embedding_size=32, head_ratio=2, conv_kernel_size=3),
    text("rembert", "RemBert", **TEXT, input_embedding_size=16, output_embedding_size=16),
    text("big_bird", "BigBird", "full attention (block-sparse needs longer inputs)", **TEXT,
         attention_type="original_full"),
    text("modernbert", "ModernBert", "local sliding-window and global layers, rotary", **TEXT,
         global_attn_every_n_layers=2, local_attention=8, pad_token_id=0, bos_token_id=1,
         eos_token_id=2, cls_token_id=1, sep_token_id=2),
    text("xlnet", "XLNet", "two-stream relative attention", vocab_size=VOCAB, d_model=32,
         n_layer=2, n_head=4, d_inner=64, initializer_range=0.2),
    text("fnet", "FNet", "Fourier transform instead of attention (DFT)", **TEXT),
    text("funnel", "Funnel", "the sequence pooled between blocks; TorchScript holds for "
         "3..9 tokens", axes=(BATCH, Axis("seq", 3, 9, 5)), vocab_size=VOCAB, d_model=32,
         n_head=4, d_head=8, d_inner=64, block_sizes=[1, 1], num_decoder_layers=1,
         initializer_range=0.2),
    text("longformer", "Longformer", "sliding-window chunks; TorchScript holds from batch 2 "
         "and 5 tokens", axes=(Axis("batch", 2, 3, 2), Axis("seq", 5, 16, 5)), **ROBERTA,
         attention_window=4),
    ZooSpec("layoutlm", "encoder", _hf("LayoutLMModel", "LayoutLMConfig", _boxes, **TEXT),
            (_ids(), _mask(), InputSpec("bbox", ("batch", "seq", 4), "ids", 500)),
            ("last_hidden_state",), (BATCH, SEQ), HIDDEN, note="2-D box embeddings"),
    ZooSpec("clip_text", "encoder",
            _hf("CLIPTextModel", "CLIPTextConfig", _pooled, **TEXT, projection_dim=16,
                eos_token_id=2), (_ids(), _mask()), ("last_hidden_state", "pooler_output"),
            (BATCH, SEQ), HIDDEN | {"pooler_output": {0: "batch"}},
            note="causal mask, pooled at the first end-of-text token (ArgMax + Gather)"),
    text("siglip_text", "SiglipText", **TEXT),
    text("xlm", "XLM", "sinusoidal positions, language embeddings", vocab_size=VOCAB,
         emb_dim=32, n_layers=2, n_heads=4, max_position_embeddings=64,
         sinusoidal_embeddings=True),
    text("reformer", "Reformer", "chunked local attention, reversible residuals",
         vocab_size=VOCAB, hidden_size=32, attention_head_size=8, num_attention_heads=4,
         attn_layers=["local", "local"], local_attn_chunk_length=4, feed_forward_size=64,
         axial_pos_embds=False, max_position_embeddings=64, is_decoder=False),
    ZooSpec("lilt", "encoder",
            _hf("LiltModel", "LiltConfig", _boxes, **ROBERTA | {"hidden_size": 48}),
            (_ids(), _mask(), InputSpec("bbox", ("batch", "seq", 4), "ids", 500)),
            ("last_hidden_state",), (BATCH, SEQ), HIDDEN,
            note="a layout stream beside the text stream, attention scores shared"),
    # -- vision ------------------------------------------------------------------------------
    vision("deit", "DeiT", "distillation token, position table resized", resized=True, **VIT),
    vision("beit", "Beit", "relative position bias resized to the grid", resized=True,
           **VIT, use_relative_position_bias=True),
    vision("data2vec_vision", "Data2VecVision", resized=True, **VIT,
           use_relative_position_bias=True),
    vision("dinov2", "Dinov2", "position table resized (bicubic)", **VIT | {"mlp_ratio": 2}),
    vision("vit_msn", "ViTMSN", resized=True, **VIT),
    vision("ijepa", "IJepa", resized=True, **VIT),
    vision("clip_vision", "CLIPVision", resized=True, **VIT, projection_dim=16),
    vision("siglip_vision", "SiglipVision", resized=True, **VIT),
    vision("yolos", "Yolos", "detection tokens, mid-position tables resized",
           **VIT | {"image_size": [16, 16]}, num_detection_tokens=4),
    vision("levit", "Levit", "attention biases indexed by a fixed grid: 64x64 only",
           axes=(BATCH, Axis("height", 64, 64, 64), Axis("width", 64, 64, 64)), image_size=64,
           patch_size=16, hidden_sizes=[16, 32, 48], num_attention_heads=[2, 2, 2],
           depths=[1, 1, 1], key_dim=[8, 8, 8], initializer_range=0.2),
    vision("segformer", "Segformer", "overlapping patch merging, spatial-reduction attention",
           num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[8, 16],
           num_attention_heads=[1, 2], patch_sizes=[7, 3], strides=[4, 2], mlp_ratios=[2, 2],
           initializer_range=0.2),
    vision("glpn", "GLPN", num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1],
           hidden_sizes=[8, 16], num_attention_heads=[1, 2], patch_sizes=[7, 3],
           strides=[4, 2], mlp_ratios=[2, 2]),
    vision("pvt_v2", "PvtV2", "spatial-reduction attention, depthwise conv MLP",
           axes=(BATCH, Axis("height", 32, 64, 32, step=8), Axis("width", 32, 64, 40, step=8)),
           hidden_sizes=[8, 16, 16, 32], num_attention_heads=[1, 2, 2, 4],
           depths=[1, 1, 1, 1], sr_ratios=[4, 2, 2, 1]),
    vision("efficientnet", "EfficientNet", "depthwise convs, squeeze-excitation, 'SAME' pads",
           axes=(BATCH, *IMAGE_32),
           image_size=32, width_coefficient=0.25, depth_coefficient=0.25, hidden_dim=320),
    vision("regnet", "RegNet", "grouped convs, squeeze-excitation", embedding_size=8,
           hidden_sizes=[8, 16], depths=[1, 1], groups_width=8),
    vision("poolformer", "PoolFormer", "average pooling without padding counted",
           hidden_sizes=[8, 16], depths=[1, 1], num_encoder_blocks=2, patch_sizes=[7, 3],
           strides=[4, 2], padding=[2, 1], mlp_ratio=2.0),
    vision("mobilevit", "MobileViT", "unfold to patches and fold back; both exporters hold "
           "for 24..32", axes=(BATCH, Axis("height", 24, 32, 32, step=8),
                               Axis("width", 24, 32, 24, step=8)),
           image_size=32, hidden_sizes=[16, 24, 32],
           neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64], num_attention_heads=2),
    vision("mobilenet_v1", "MobileNetV1", depth_multiplier=0.25, image_size=32,
           tf_padding=False),
    vision("convnextv2", "ConvNextV2", "global response normalization", hidden_sizes=[8, 16],
           depths=[1, 1], num_stages=2, patch_size=4),
    vision("bit", "Bit", "weight-standardized convs, GroupNorm, dynamic 'SAME' pads; from "
           "48x48 (at 32x32 the last stage is 1x1, its GroupNorms see 2 values a group and "
           "onnxruntime's own error against float64 nears 1e-4)",
           axes=(BATCH, Axis("height", 48, 64, 48, step=16), Axis("width", 48, 64, 64, step=16)),
           embedding_size=32,
           hidden_sizes=[32, 32, 64, 64], num_groups=8, depths=[1, 1, 1, 1],
           global_padding="SAME", layer_type="bottleneck"),
    vision("cvt", "Cvt", "convolutional token embedding and projections",
           embed_dim=[8, 16, 32], num_heads=[1, 2, 4], depth=[1, 2, 3]),
    vision("swinv2", "Swinv2", "cosine attention, log-spaced continuous position bias",
           axes=(BATCH, Axis("height", 16, 40, 24, step=8), Axis("width", 16, 40, 24, step=8)),
           image_size=16, patch_size=2, embed_dim=16, depths=[1, 1], num_heads=[2, 2],
           window_size=4),
    vision("focalnet", "FocalNet", "focal modulation (depthwise convs, gates)",
           image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], focal_levels=[2, 2],
           focal_windows=[3, 3]),
    vision("dinov3", "DINOv3ViT", "2-D rotary positions, register tokens", patch_size=4,
           hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
           image_size=16, num_register_tokens=2),
    vision("mlcd", "MLCDVision", "2-D rotary positions", hidden_size=32, intermediate_size=64,
           num_hidden_layers=2, num_attention_heads=4, image_size=16, patch_size=4),
    vision("aimv2", "Aimv2Vision", "RMSNorm, SwiGLU; a fixed position table: 16x16 only",
           axes=(BATCH, Axis("height", 16, 16, 16), Axis("width", 16, 16, 16)),
           hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
           image_size=16, patch_size=4),
    vision("swiftformer", "SwiftFormer", "efficient additive attention",
           depths=[1, 1, 1, 1], embed_dims=[8, 16, 24, 32]),
    vision("hgnet_v2", "HGNetV2", "learnable affine blocks, light blocks, ceil-mode pooling",
           model="Backbone", embedding_size=8, stem_channels=[3, 8, 8],
           stage_in_channels=[8, 16], stage_mid_channels=[8, 8], stage_out_channels=[16, 32],
           stage_num_blocks=[1, 1], stage_downsample=[False, True],
           stage_light_block=[False, True], stage_kernel_size=[3, 5],
           stage_numb_of_layers=[2, 2], depths=[1, 1], hidden_sizes=[16, 32],
           out_features=["stage2"]),
    ZooSpec("swin2sr", "vision",
            _hf("Swin2SRForImageSuperResolution", "Swin2SRConfig", _reconstruction,
                image_size=16, patch_size=1, embed_dim=16, depths=[1, 1], num_heads=[2, 2],
                window_size=4, upscale=2, upsampler="pixelshuffle"),
            (PIXELS,), ("reconstruction",), (BATCH, *IMAGE), {"reconstruction": {0: "batch"}},
            note="windows padded to the window size, pixel shuffle (DepthToSpace) upsampling"),
    ZooSpec("depth_anything", "vision", _depth_anything, (PIXELS,), ("predicted_depth",),
            (BATCH, Axis("height", 28, 56, 42, step=14), Axis("width", 28, 56, 28, step=14)),
            {"predicted_depth": {0: "batch", 1: "h", 2: "w"}},
            note="DINOv2 backbone, DPT neck: resized features, transposed convs, fusion"),
    video("videomae", "VideoMAE", "tubelets by a 3-D convolution, sinusoidal table",
          patch_size=8, tubelet_size=2),
    video("timesformer", "Timesformer", "divided space-time attention", patch_size=8),
    video("vivit", "Vivit", "tubelet embedding", tubelet_size=[2, 8, 8]),
    vision("hiera", "Hiera", "mask-unit windows unrolled: 64x64 only",
           axes=(BATCH, Axis("height", 64, 64, 64), Axis("width", 64, 64, 64)),
           image_size=[64, 64], patch_size=[7, 7], patch_stride=[4, 4], patch_padding=[3, 3],
           embed_dim=16, depths=[1, 1], num_heads=[1, 2], query_stride=[2, 2],
           masked_unit_size=[8, 8], num_query_pool=1),
    # -- speech ------------------------------------------------------------------------------
    audio("hubert", "Hubert"),
    audio("wavlm", "WavLM", "gated relative position bias from buckets", num_buckets=16,
          max_bucket_distance=32),
    audio("data2vec_audio", "Data2VecAudio", "stacked positional convs with LayerNorm",
          num_conv_pos_embeddings=5),
    audio("unispeech", "UniSpeech"),
    audio("unispeech_sat", "UniSpeechSat"),
    audio("sew", "SEW", "frames pooled by 2 and upsampled back", squeeze_factor=2),
    audio("sew_d", "SEWD", "SEW with DeBERTa-v2 attention", squeeze_factor=2,
          position_buckets=16, max_relative_positions=32),
    audio("wav2vec2_conformer", "Wav2Vec2Conformer", "rotary positions, conformer conv module",
          position_embeddings_type="rotary", conv_depthwise_kernel_size=3),
    audio("wav2vec2_conformer_rel", "Wav2Vec2Conformer", "Transformer-XL relative positions",
          position_embeddings_type="relative", conv_depthwise_kernel_size=3),
    ZooSpec("wav2vec2_bert", "speech",
            _hf("Wav2Vec2BertModel", "Wav2Vec2BertConfig", _masked_features, hidden_size=32,
                num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                feature_projection_input_dim=20, conv_depthwise_kernel_size=3,
                position_embeddings_type="relative_key", left_max_position_embeddings=8,
                right_max_position_embeddings=4),
            (InputSpec("input_features", ("batch", "frames", 20)),
             InputSpec("attention_mask", ("batch", "frames"), "mask")),
            ("last_hidden_state",), (BATCH, Axis("frames", 1, 24, 10)), HIDDEN,
            note="conformer on features, clipped relative-key positions"),
    ZooSpec("parakeet", "speech",
            _hf("ParakeetEncoder", "ParakeetEncoderConfig", _features, hidden_size=32,
                num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                conv_kernel_size=3, subsampling_factor=4, subsampling_conv_channels=8,
                num_mel_bins=16, max_position_embeddings=128),
            (InputSpec("input_features", ("batch", "frames", 16)),), ("last_hidden_state",),
            (BATCH, Axis("frames", 8, 64, 24)), {"last_hidden_state": {0: "batch", 1: "t"}},
            note="FastConformer: conv subsampling, relative positional attention"),
    ZooSpec("ast", "speech",
            _hf("ASTModel", "ASTConfig", _audio, hidden_size=32, num_hidden_layers=2,
                num_attention_heads=4, intermediate_size=64, patch_size=8, frequency_stride=4,
                time_stride=4, max_length=32, num_mel_bins=16),
            (InputSpec("input_values", ("batch", 32, 16)),), ("last_hidden_state",), (BATCH,),
            VISION_OUT, note="overlapping spectrogram patches; the length fixed by the model"),
    ZooSpec("encodec", "speech",
            _hf("EncodecModel", "EncodecConfig", _decoded_audio, hidden_size=16, num_filters=4,
                upsampling_ratios=[4, 2], codebook_size=32, codebook_dim=16,
                num_residual_layers=1, target_bandwidths=[1.5], sampling_rate=800,
                num_lstm_layers=1),
            (InputSpec("input_values", ("batch", 1, "samples")),), ("audio_values",),
            (BATCH, Axis("samples", 64, 512, 160, step=8)),
            {"audio_values": {0: "batch", 2: "samples"}},
            note="conv codec with an LSTM, residual vector quantizer (ArgMin + Gather), "
                 "transposed convs"),
    ZooSpec("moonshine", "speech",
            _hf("MoonshineForConditionalGeneration", "MoonshineConfig", _moonshine,
                vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                encoder_num_hidden_layers=2, decoder_num_hidden_layers=2,
                encoder_num_attention_heads=4, decoder_num_attention_heads=4,
                max_position_embeddings=64, decoder_start_token_id=1, pad_token_id=0,
                bos_token_id=1, eos_token_id=2),
            (InputSpec("input_values", ("batch", "samples")), _ids("decoder_input_ids", "target")),
            ("logits",), (BATCH, Axis("samples", 1600, 4000, 2400, step=16), TARGET),
            {"logits": {0: "batch", 1: "target"}},
            note="raw audio through strided convs, rotary encoder and decoder"),
    ZooSpec("patchtst", "timeseries",
            _hf("PatchTSTModel", "PatchTSTConfig", _past_values, num_input_channels=3,
                context_length=32, patch_length=8, patch_stride=8, num_hidden_layers=2,
                d_model=16, num_attention_heads=2, ffn_dim=32),
            (InputSpec("past_values", ("batch", 32, 3)),), ("last_hidden_state",), (BATCH,),
            VISION_OUT, note="mean scaling, patches by unfold, channel-independent attention"),
    recurrent("mamba", "Mamba", "selective scan", hidden_size=32, state_size=8,
              num_hidden_layers=2, vocab_size=VOCAB, use_cache=False, initializer_range=0.2),
    recurrent("rwkv", "Rwkv", "WKV recurrence with exponent tracking", vocab_size=VOCAB,
              hidden_size=32, num_hidden_layers=2, attention_hidden_size=32,
              intermediate_size=64, context_length=64, use_cache=False),
    recurrent("recurrent_gemma", "RecurrentGemma", "RG-LRU recurrence, local attention",
              masked=True, vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
              num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=1,
              lru_width=32, attention_window_size=8, conv1d_width=4, use_cache=False),
    ZooSpec("whisper", "speech",
            _hf("WhisperForConditionalGeneration", "WhisperConfig", _whisper, d_model=32,
                encoder_layers=2, encoder_attention_heads=4, decoder_layers=2,
                decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                num_mel_bins=WHISPER_MELS, max_source_positions=WHISPER_FRAMES // 2,
                vocab_size=VOCAB, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                decoder_start_token_id=1, max_target_positions=64, init_std=0.2),
            (InputSpec("input_features", ("batch", WHISPER_MELS, WHISPER_FRAMES)),
             _ids("decoder_input_ids", "target")), ("logits",), (BATCH, TARGET),
            {"logits": {0: "batch", 1: "target"}},
            note="encoder and decoder with cross-attention; frames fixed"),
    ZooSpec("speech_to_text", "speech",
            _hf("Speech2TextForConditionalGeneration", "Speech2TextConfig", _speech2text,
                vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2,
                encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                decoder_ffn_dim=64, conv_channels=32, input_feat_per_channel=16,
                max_source_positions=64, max_target_positions=64, init_std=0.2),
            (InputSpec("input_features", ("batch", "frames", 16)),
             InputSpec("attention_mask", ("batch", "frames"), "mask"),
             _ids("decoder_input_ids", "target")), ("logits",),
            (BATCH, Axis("frames", 4, 40, 20), TARGET), {"logits": {0: "batch", 1: "target"}},
            note="conv subsampler (GLU), mask subsampled by the conv lengths, sinusoidal "
                 "positions"),
    # -- encoder-decoders --------------------------------------------------------------------
    seq2seq("marian", "MarianMTModel", "MarianConfig", "sinusoidal positions",
            **BART | {"decoder_start_token_id": 1}),
    seq2seq("mbart", "MBartForConditionalGeneration", "MBartConfig", **BART),
    seq2seq("pegasus", "PegasusForConditionalGeneration", "PegasusConfig",
            **BART | {"pad_token_id": 0, "decoder_start_token_id": 0}),
    seq2seq("pegasus_x", "PegasusXForConditionalGeneration", "PegasusXConfig",
            "blocked local attention with global tokens",
            **BART | {"pad_token_id": 0, "decoder_start_token_id": 0}, block_size=4,
            num_global_tokens=4),
    seq2seq("blenderbot", "BlenderbotForConditionalGeneration", "BlenderbotConfig", **BART),
    seq2seq("blenderbot_small", "BlenderbotSmallForConditionalGeneration",
            "BlenderbotSmallConfig", **BART),
    seq2seq("m2m_100", "M2M100ForConditionalGeneration", "M2M100Config",
            "sinusoidal positions from a cumulative sum over non-padding tokens", **BART),
    seq2seq("plbart", "PLBartForConditionalGeneration", "PLBartConfig", **BART),
    seq2seq("mvp", "MvpForConditionalGeneration", "MvpConfig", **BART),
    seq2seq("bigbird_pegasus", "BigBirdPegasusForConditionalGeneration",
            "BigBirdPegasusConfig", **BART, attention_type="original_full"),
    seq2seq("fsmt", "FSMTForConditionalGeneration", "FSMTConfig", langs=["en", "de"],
            src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, d_model=32, encoder_layers=2,
            decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
            encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64, init_std=0.2),
    seq2seq("prophetnet", "ProphetNetForConditionalGeneration", "ProphetNetConfig",
            "n-gram main and predict streams with relative buckets", vocab_size=VOCAB,
            hidden_size=32, encoder_ffn_dim=64, decoder_ffn_dim=64, num_encoder_layers=2,
            num_decoder_layers=2, num_encoder_attention_heads=4, num_decoder_attention_heads=4,
            max_position_embeddings=64, ngram=2, num_buckets=8, relative_max_distance=16),
    seq2seq("mt5", "MT5ForConditionalGeneration", "MT5Config", **T5),
    seq2seq("umt5", "UMT5ForConditionalGeneration", "UMT5Config",
            "relative position bias in every layer", **T5),
    seq2seq("longt5", "LongT5ForConditionalGeneration", "LongT5Config",
            "local block attention: both exporters hold for multiples of the block (5)",
            axes=(BATCH, Axis("seq", 5, 15, 5, step=5), TARGET), **T5, local_radius=4,
            encoder_attention_type="local"),
    seq2seq("led", "LEDForConditionalGeneration", "LEDConfig",
            "Longformer encoder; TorchScript holds from batch 2 and 5 tokens, not at multiples "
            "of the window (4): odd lengths", axes=(Axis("batch", 2, 3, 2),
                                                   Axis("seq", 5, 15, 5, step=2), TARGET),
            **{k: v for k, v in BART.items() if k != "max_position_embeddings"},
            max_encoder_position_embeddings=64, max_decoder_position_embeddings=64,
            attention_window=4),
]}

_SPECIALIZED = "torch.export specializes {} to the export size: onnxruntime fails at others"
_TORCH_EXPORT = "torch.export fails: {}"
# (model, exporter) -> why it is left out, with torch 2.13, transformers 5.24, onnxscript 0.7.
# Not here at all (neither exporter): canine and nystromformer (canine's TorchScript graph fails
# in onnxruntime at the export shape itself, torch.export specializes its length; Nystromformer
# with landmarks fails in transformers' own forward), switch_transformers (the TorchScript
# export routes to every expert as traced: onnxruntime fails when an expert gets no token),
# mobilevitv2 (TorchScript: aten::col2im needs opset 18; torch.export: sympy cannot solve a
# size inequality) and upernet (the TorchScript exporter fails; the dynamo graph holds for the
# export size only).
EXPORT_FAILURES: dict[tuple[str, str], str] = {
    ("fnet", "torchscript"): "aten::fft_fftn has no TorchScript ONNX export",
    ("whisper", "torchscript"): "aten::diff has no TorchScript ONNX export",
    ("xlnet", "dynamo"): _TORCH_EXPORT.format("no aten.sub overload for a float and a tensor"),
    ("prophetnet", "dynamo"): _TORCH_EXPORT.format("no aten.sub overload for a float and a "
                                                   "tensor"),
    ("funnel", "dynamo"): _TORCH_EXPORT.format("the sequence length is specialized"),
    ("longformer", "dynamo"): _TORCH_EXPORT.format("a guard on a data-dependent size"),
    ("led", "dynamo"): _TORCH_EXPORT.format("a guard on a data-dependent size"),
    ("fsmt", "dynamo"): _TORCH_EXPORT.format("a guard on a data-dependent size"),
    ("pvt_v2", "dynamo"): _TORCH_EXPORT.format("sympy cannot solve a size inequality"),
    ("reformer", "torchscript"): "the TorchScript exporter fails: unordered_map::at",
    ("moonshine", "torchscript"): "the TorchScript exporter fails: 'All tensors must have the "
                                  "same rank'",
    ("patchtst", "torchscript"): "the TorchScript graph fails shape inference (onnxruntime's "
                                 "and netpass's): its position table is added across axes",
    ("encodec", "dynamo"): _TORCH_EXPORT.format("a guard on a data-dependent size"),
    ("beit", "dynamo"): _SPECIALIZED.format("the relative position bias"),
    ("data2vec_vision", "dynamo"): _SPECIALIZED.format("the relative position bias"),
}


if __name__ == "__main__":
    sys.exit(export_zoo.main(specs=SPECS, failures=EXPORT_FAILURES))
