#!/usr/bin/env python3
"""Builds the tiny random InternVL golden checkpoints and reference outputs under tests/data/golden/.

Run from the repository root:  python3 tools/golden/make_golden.py [--out tests/data/golden]
Needs torch (CPU) and transformers (5.24.0 made the committed files); the outputs are committed so CI needs
neither. See tests/data/golden/README.md for the layout. Everything is float32, eager attention, fixed seeds.
"""
import argparse
import json
import os
import shutil
import sys

import torch
from safetensors.torch import save_file

import transformers
from transformers import (InternVLConfig, InternVLForConditionalGeneration, InternVLVisionConfig, LlamaConfig,
                          Qwen2Config, Qwen3Config)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from internvl_mapping import hf_to_original, original_to_hf  # noqa: E402

IMAGE, PATCH, TOKENS_PER_TILE, GENERATE = 448, 14, 256, 8
# InternViT-300M-style (LayerNorm, qkv bias) and InternViT-6B-style (RMSNorm without bias, no qkv bias, q/k RMSNorm
# over all heads; hidden 60 = 5 heads of 12, so the q/k norm's width is not one head's).
VISION = dict(hidden_size=48, num_hidden_layers=2, num_attention_heads=3, intermediate_size=100,
              attention_bias=True, layer_norm_eps=1e-6, image_size=IMAGE, patch_size=PATCH)
VISION_6B = dict(hidden_size=60, num_hidden_layers=2, num_attention_heads=5, intermediate_size=96,
                 attention_bias=False, use_qk_norm=True, norm_type="rms_norm", layer_norm_eps=1e-6,
                 image_size=IMAGE, patch_size=PATCH)

# The models. arch: the -hf text model; orig: how the original format spells it ("internlm2": InternLM2 names and
# grouped wqkv). Special-token ids sit at the top of the tiny vocabularies, like the real tokenizers' added tokens.
MODELS = {
    "internlm2": dict(arch="llama", orig="internlm2", vision=VISION, vocab=310, hidden=72, heads=6, kv_heads=2,
                      head_dim=12, ffn=200, layers=2, tied=False, template="internlm2-chat", bos=1, embed_std=0.6,
                      residual_gain=1.0, rope_theta=1e6, rms_eps=1e-5,
                      special={"<s>": 1, "</s>": 2, "<|im_end|>": 300, "<|im_start|>": 301, "<img>": 302,
                               "</img>": 303, "<IMG_CONTEXT>": 304}),
    "qwen2": dict(arch="qwen2", orig="qwen2", vision=VISION, vocab=300, hidden=80, heads=5, kv_heads=1, head_dim=16,
                  ffn=152, layers=2, tied=True, template="Hermes-2", bos=None, embed_std=0.6, residual_gain=4.0,
                  rope_theta=1e6, rms_eps=1e-5,
                  special={"<|endoftext|>": 280, "<|im_start|>": 281, "<|im_end|>": 282, "<img>": 283,
                           "</img>": 284, "<IMG_CONTEXT>": 285}),
    # InternVL2-40B/76B-shaped: InternViT-6B with a Llama LLM, LlamaForCausalLM in the original format too; Llama-3's
    # rope (theta 500000, rope_scaling null) and BOS token.
    "vit6b": dict(arch="llama", orig="llama", vision=VISION_6B, vocab=320, hidden=64, heads=4, kv_heads=2,
                  head_dim=16, ffn=160, layers=2, tied=False, template="Hermes-2", bos=300, embed_std=0.6,
                  residual_gain=1.0, rope_theta=5e5, rms_eps=1e-5,
                  special={"<|begin_of_text|>": 300, "<|end_of_text|>": 301, "<|im_start|>": 302,
                           "<|im_end|>": 303, "<img>": 304, "</img>": 305, "<IMG_CONTEXT>": 306}),
    # InternVL3.5-1B/2B/4B-shaped: Qwen3 (per-head q/k RMSNorm before rope, head_dim 24 with 4 heads over a hidden
    # size of 64, tied embeddings).
    "qwen3": dict(arch="qwen3", orig="qwen3", vision=VISION, vocab=300, hidden=64, heads=4, kv_heads=2, head_dim=24,
                  ffn=136, layers=2, tied=True, template="internvl2_5", bos=None, embed_std=0.6, residual_gain=4.0,
                  rope_theta=1e6, rms_eps=1e-6,
                  special={"<|endoftext|>": 280, "<|im_start|>": 281, "<|im_end|>": 282, "<think>": 283,
                           "</think>": 284, "<img>": 285, "</img>": 286, "<IMG_CONTEXT>": 287}),
}
PIXEL_TILES = 4  # tiles 0..2: case t3, tile 3: case t1
CASES = {"text": [], "t1": [3], "t3": [0, 1, 2]}


def make_pixels(seed=1234):
    """4-bit codes, two per byte (even x in the low nibble); value = (code - 8) / 4, exact in float32."""
    gen = torch.Generator().manual_seed(seed)
    codes = torch.randint(0, 16, (PIXEL_TILES, 3, IMAGE, IMAGE), generator=gen, dtype=torch.uint8)
    packed = (codes[..., 0::2] | (codes[..., 1::2] << 4)).contiguous()
    return packed, (codes.float() - 8.0) / 4.0


def build_config(spec):
    text_common = dict(vocab_size=spec["vocab"], hidden_size=spec["hidden"], intermediate_size=spec["ffn"],
                       num_hidden_layers=spec["layers"], num_attention_heads=spec["heads"],
                       num_key_value_heads=spec["kv_heads"], head_dim=spec["head_dim"], rms_norm_eps=spec["rms_eps"],
                       rope_theta=spec["rope_theta"], max_position_embeddings=32768, tie_word_embeddings=spec["tied"])
    sp = spec["special"]
    if spec["arch"] == "llama":
        bos = spec["bos"]
        eos = 2 if bos == 1 else sp["<|im_end|>"]
        text = LlamaConfig(**text_common, bos_token_id=bos, eos_token_id=eos)
    elif spec["arch"] == "qwen2":
        text = Qwen2Config(**text_common, eos_token_id=sp["<|im_end|>"])
    else:
        text = Qwen3Config(**text_common, attention_bias=False, eos_token_id=sp["<|im_end|>"])
    return InternVLConfig(vision_config=InternVLVisionConfig(**spec["vision"]), text_config=text,
                          image_token_id=sp["<IMG_CONTEXT>"], tie_word_embeddings=spec["tied"])


def perturb(model, seed, embed_std, residual_gain):
    """Replace every parameter so no default init (ones, zeros, layer scale 0.1) can hide a mapping bug."""
    gen = torch.Generator().manual_seed(seed)

    def randn(shape, std, mean=0.0):
        return torch.randn(shape, generator=gen) * std + mean

    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lambda_" in name:
                p.copy_(randn(p.shape, 0.2, 0.5))  # layer scale
            elif "norm" in name and name.endswith("weight"):
                p.copy_(randn(p.shape, 0.2, 1.0))
            elif name.endswith("bias"):
                p.copy_(randn(p.shape, 0.1))
            elif "cls_token" in name or "position_embeddings" in name:
                p.copy_(randn(p.shape, 0.5))
            elif "embed_tokens" in name:
                p.copy_(randn(p.shape, embed_std))  # small: a big embedding makes the model echo its input
            elif p.dim() >= 2:
                fan_in = p[0].numel()
                scale = 3.0 if name == "lm_head.weight" else 1.0  # spread the logits: clear greedy winners
                if "o_proj" in name or "down_proj" in name:
                    scale = residual_gain  # with tied embeddings, a weak residual branch echoes the input
                p.copy_(randn(p.shape, scale / fan_in ** 0.5))
            else:
                raise KeyError(f"no perturbation rule for {name}")


def prompt_ids(spec, tiles, seed):
    """<s>? <|im_start|> text <img> <IMG_CONTEXT>*256T </img> text <|im_end|> <|im_start|> text."""
    sp = spec["special"]
    gen = torch.Generator().manual_seed(seed)
    lowest_special = min(v for k, v in sp.items() if k not in ("<s>", "</s>"))

    def text(n):
        return torch.randint(3, lowest_special, (n,), generator=gen).tolist()

    ids = ([spec["bos"]] if spec["bos"] is not None else []) + [sp["<|im_start|>"]] + text(5)
    if tiles:
        ids += [sp["<img>"]] + [sp["<IMG_CONTEXT>"]] * (TOKENS_PER_TILE * len(tiles)) + [sp["</img>"]]
    ids += text(7) + [sp["<|im_end|>"], sp["<|im_start|>"]] + text(3)
    return torch.tensor(ids, dtype=torch.long)


@torch.no_grad()
def greedy(model, ids, pixels):
    """Manual greedy loop, full recompute each step, no EOS stop. Returns tokens, per-step logits, min margin."""
    tokens, step_logits, margin = [], [], float("inf")
    seq = ids.clone()
    for _ in range(GENERATE):
        out = model(input_ids=seq[None], pixel_values=pixels, use_cache=False)
        logits = out.logits[0, -1].float()
        top2 = torch.topk(logits, 2).values
        margin = min(margin, float(top2[0] - top2[1]))
        nxt = int(torch.argmax(logits))
        tokens.append(nxt)
        step_logits.append(logits)
        seq = torch.cat([seq, torch.tensor([nxt])])
    return torch.tensor(tokens, dtype=torch.int32), torch.stack(step_logits), margin


@torch.no_grad()
def reference(model, spec, pixel_values, seed):
    tensors, margins = {}, {}
    for case, tiles in CASES.items():
        ids = prompt_ids(spec, tiles, seed + len(tiles))
        pixels = pixel_values[tiles] if tiles else None
        tensors[f"{case}.input_ids"] = ids.to(torch.int32)
        if tiles:
            tensors[f"{case}.tiles"] = torch.tensor(tiles, dtype=torch.int32)
            vit = model.model.vision_tower(pixel_values=pixels).last_hidden_state
            tensors[f"{case}.vision_features"] = vit.contiguous()
            proj = model.model.get_image_features(pixel_values=pixels).pooler_output
            tensors[f"{case}.projector"] = proj.reshape(-1, spec["hidden"]).contiguous()
        generated, step_logits, margin = greedy(model, ids, pixels)
        tensors[f"{case}.logits"] = step_logits[0].clone()
        tensors[f"{case}.step_logits"] = step_logits.contiguous()
        tensors[f"{case}.generated"] = generated
        margins[case] = margin
    return tensors, margins


def original_config(spec, cfg):
    """The keys InternVL's own configs carry (configuration_intern_vit.py, the LLM's config class), tiny sizes."""
    v = spec["vision"]
    six_b = v.get("use_qk_norm", False)
    vision = dict(architectures=["InternVisionModel"], model_type="intern_vit_6b", hidden_size=v["hidden_size"],
                  num_hidden_layers=v["num_hidden_layers"], num_attention_heads=v["num_attention_heads"],
                  intermediate_size=v["intermediate_size"], image_size=IMAGE, patch_size=PATCH, num_channels=3,
                  layer_norm_eps=v["layer_norm_eps"], norm_type="rms_norm" if six_b else "layer_norm",
                  qkv_bias=v["attention_bias"], qk_normalization=six_b, hidden_act="gelu", drop_path_rate=0.0,
                  dropout=0.0, attention_dropout=0.0, initializer_factor=0.1, initializer_range=1e-10,
                  use_flash_attn=False)
    llm = dict(vocab_size=spec["vocab"], hidden_size=spec["hidden"], intermediate_size=spec["ffn"],
               num_hidden_layers=spec["layers"], num_attention_heads=spec["heads"],
               num_key_value_heads=spec["kv_heads"], rms_norm_eps=spec["rms_eps"], rope_theta=spec["rope_theta"],
               hidden_act="silu", max_position_embeddings=32768, tie_word_embeddings=spec["tied"])
    sp = spec["special"]
    if spec["orig"] == "internlm2":
        llm.update(architectures=["InternLM2ForCausalLM"], model_type="internlm2", bias=False,
                   rope_scaling={"type": "dynamic", "factor": 2.0}, bos_token_id=1, eos_token_id=2, pad_token_id=2)
    elif spec["orig"] == "llama":  # as Hermes-2-Theta-Llama-3-70B's config
        llm.update(architectures=["LlamaForCausalLM"], model_type="llama", attention_bias=False, mlp_bias=False,
                   rope_scaling=None, pretraining_tp=1, bos_token_id=spec["bos"], eos_token_id=sp["<|im_end|>"])
    elif spec["orig"] == "qwen2":
        llm.update(architectures=["Qwen2ForCausalLM"], model_type="qwen2", eos_token_id=sp["<|im_end|>"])
    else:  # as Qwen3's config
        llm.update(architectures=["Qwen3ForCausalLM"], model_type="qwen3", head_dim=spec["head_dim"],
                   attention_bias=False, attention_dropout=0.0, rope_scaling=None, use_sliding_window=False,
                   sliding_window=None, max_window_layers=spec["layers"], bos_token_id=sp["<|endoftext|>"],
                   eos_token_id=sp["<|im_end|>"])
    return dict(architectures=["InternVLChatModel"], model_type="internvl_chat", template=spec["template"],
                downsample_ratio=0.5, dynamic_image_size=True, force_image_size=IMAGE, max_dynamic_patch=12,
                min_dynamic_patch=1, use_thumbnail=True, ps_version="v2", select_layer=-1, use_backbone_lora=0,
                use_llm_lora=0, pad2square=False, torch_dtype="float32", llm_config=llm, vision_config=vision)


def tokenizer_config(spec):
    """The ids of the special tokens, as real checkpoints list them (there is no vocabulary to go with them)."""
    decoder = {str(i): {"content": s, "special": True, "lstrip": False, "rstrip": False, "normalized": False,
                        "single_word": False} for s, i in sorted(spec["special"].items(), key=lambda kv: kv[1])}
    config = {"added_tokens_decoder": decoder}
    if spec["orig"] == "llama":  # Llama-3 names its BOS; InternVL2-Llama3 stops on <|im_end|>
        config.update(add_bos_token=True, bos_token="<|begin_of_text|>", eos_token="<|im_end|>")
    elif spec["orig"] == "qwen3":
        config.update(bos_token=None, eos_token="<|im_end|>")
    return config


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)
        f.write("\n")


@torch.no_grad()
def verify_original(model, cfg, spec, orig, pixel_values):
    """The original-format weights, mapped back to -hf names, must give transformers the same model."""
    hf_state = model.state_dict()
    mapped = original_to_hf(orig, spec["orig"], spec["kv_heads"], spec["head_dim"], spec["vision"]["hidden_size"])
    expected = {k for k in hf_state if not (spec["tied"] and k == "lm_head.weight")}
    assert set(mapped) == expected, f"key mismatch: {set(mapped) ^ expected}"
    for k, v in mapped.items():
        assert torch.equal(v.reshape(hf_state[k].shape), hf_state[k]), f"{k} differs after the round trip"
    twin = InternVLForConditionalGeneration(cfg).eval()
    twin.load_state_dict({k: v.reshape(hf_state[k].shape) for k, v in mapped.items()}, strict=False)
    if spec["tied"]:
        twin.tie_weights()
    ids = prompt_ids(spec, [0], 7)
    a = model(input_ids=ids[None], pixel_values=pixel_values[:1], use_cache=False).logits
    b = twin(input_ids=ids[None], pixel_values=pixel_values[:1], use_cache=False).logits
    assert torch.equal(a, b), f"original-format round trip changes logits by {float((a - b).abs().max())}"


def make_model(name, spec, out_root, pixel_values, seed):
    torch.manual_seed(seed)
    cfg = build_config(spec)
    cfg._attn_implementation = "eager"
    model = InternVLForConditionalGeneration(cfg).float().eval()
    perturb(model, seed, spec["embed_std"], spec["residual_gain"])
    if spec["tied"]:
        model.tie_weights()
        assert model.lm_head.weight.data_ptr() == model.model.language_model.embed_tokens.weight.data_ptr()

    root = os.path.join(out_root, name)
    shutil.rmtree(root, ignore_errors=True)
    hf_dir, orig_dir = os.path.join(root, "hf"), os.path.join(root, "original")
    model.save_pretrained(hf_dir)
    write_json(os.path.join(hf_dir, "tokenizer_config.json"), tokenizer_config(spec))

    orig = hf_to_original(model.state_dict(), spec["orig"], spec["kv_heads"], spec["head_dim"], spec["tied"])
    verify_original(model, cfg, spec, orig, pixel_values)
    os.makedirs(orig_dir)
    save_file({k: v.contiguous() for k, v in sorted(orig.items())}, os.path.join(orig_dir, "model.safetensors"),
              metadata={"format": "pt"})
    write_json(os.path.join(orig_dir, "config.json"), original_config(spec, cfg))
    write_json(os.path.join(orig_dir, "tokenizer_config.json"), tokenizer_config(spec))

    tensors, margins = reference(model, spec, pixel_values, seed)
    meta = {"transformers": transformers.__version__, "torch": torch.__version__,
            "min_greedy_margin": json.dumps(margins)}
    save_file(tensors, os.path.join(root, "reference.safetensors"), metadata=meta)
    print(f"{name}: greedy margins {margins}")
    for case in CASES:
        print(f"  {case}: generated {tensors[case + '.generated'].tolist()}")
    return margins


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="tests/data/golden")
    parser.add_argument("--models", nargs="*", default=list(MODELS), help="remake only these (default: all)")
    args = parser.parse_args()
    torch.set_default_dtype(torch.float32)
    torch.use_deterministic_algorithms(True)
    os.makedirs(args.out, exist_ok=True)
    packed, pixel_values = make_pixels()
    save_file({"pixel_codes": packed}, os.path.join(args.out, "pixels.safetensors"),
              metadata={"value": "(code - 8) / 4", "packing": "even x low nibble, odd x high nibble"})
    for i, (name, spec) in enumerate(MODELS.items()):
        if name not in args.models:
            continue
        margins = make_model(name, spec, args.out, pixel_values, seed=100 + i)
        assert min(margins.values()) > 1e-3, f"{name}: a greedy step is too close to a tie to be a stable golden"


if __name__ == "__main__":
    main()
