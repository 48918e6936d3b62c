"""Weight-name mapping between the two InternVL checkpoint formats, for the golden-data generator.

`hf_to_original` writes an original `internvl_chat` state dict from a transformers
`InternVLForConditionalGeneration` state dict. `orig_arch` says how the original checkpoint spells its LLM:
"internlm2" (a Llama text model written with InternLM2 names and the per-KV-group `wqkv`), or "llama", "qwen2",
"qwen3" (the text model's own names under `language_model.`). InternViT-6B's q_norm / k_norm and its bias-free
RMSNorm layers map like the other vision tensors. `original_to_hf` is the forward direction, written after transformers'
convert_internvl_weights_to_hf.py; make_golden.py runs both and checks the round trip reproduces the outputs.
"""
import re

import torch


def _strip_hf_prefix(name):
    """transformers 5 keeps `model.vision_tower...`; older -hf checkpoints use `vision_tower...`."""
    for old, new in (("model.language_model.", "language_model.model."),
                     ("model.vision_tower.", "vision_tower."),
                     ("model.multi_modal_projector.", "multi_modal_projector.")):
        if name.startswith(old):
            return new + name[len(old):]
    return name


def group_wqkv(q, k, v, kv_heads, head_dim):
    """[all q | all k | all v] -> InternLM2 rows: for each KV group g, [q heads of g, k_g, v_g]."""
    q_per_kv = q.shape[0] // (kv_heads * head_dim)
    cols = q.shape[1]
    q = q.reshape(kv_heads, q_per_kv, head_dim, cols)
    k = k.reshape(kv_heads, 1, head_dim, cols)
    v = v.reshape(kv_heads, 1, head_dim, cols)
    return torch.cat([q, k, v], dim=1).reshape(-1, cols).contiguous()


def split_wqkv(wqkv, kv_heads, head_dim):
    """Inverse of group_wqkv, the way transformers' converter does it."""
    cols = wqkv.shape[1]
    grouped = wqkv.reshape(kv_heads, -1, head_dim, cols)
    q_per_kv = grouped.shape[1] - 2
    q = grouped[:, :q_per_kv].reshape(-1, cols)
    return q.contiguous(), grouped[:, -2].reshape(-1, cols).contiguous(), grouped[:, -1].reshape(-1, cols).contiguous()


_VISION_RENAMES = [  # hf -> original, applied in order on the part after `vision_tower.`
    (r"^embeddings\.cls_token$", "embeddings.class_embedding"),
    (r"^embeddings\.position_embeddings$", "embeddings.position_embedding"),
    (r"^embeddings\.patch_embeddings\.projection\.", "embeddings.patch_embedding."),
    (r"^encoder\.layer\.(\d+)\.attention\.projection_layer\.", r"encoder.layers.\1.attn.proj."),
    (r"^encoder\.layer\.(\d+)\.attention\.([qk])_norm\.", r"encoder.layers.\1.attn.\2_norm."),
    (r"^encoder\.layer\.(\d+)\.lambda_(\d)$", r"encoder.layers.\1.ls\2"),
    (r"^encoder\.layer\.(\d+)\.layernorm_before\.", r"encoder.layers.\1.norm1."),
    (r"^encoder\.layer\.(\d+)\.layernorm_after\.", r"encoder.layers.\1.norm2."),
    (r"^encoder\.layer\.(\d+)\.mlp\.", r"encoder.layers.\1.mlp."),
]
_PROJECTOR_RENAMES = {"layer_norm": "mlp1.0", "linear_1": "mlp1.1", "linear_2": "mlp1.3"}
_INTERNLM2_RENAMES = [  # hf Llama -> InternLM2, on the part after `language_model.model.`
    (r"^embed_tokens\.", "tok_embeddings."),
    (r"^layers\.(\d+)\.self_attn\.o_proj\.", r"layers.\1.attention.wo."),
    (r"^layers\.(\d+)\.mlp\.gate_proj\.", r"layers.\1.feed_forward.w1."),
    (r"^layers\.(\d+)\.mlp\.down_proj\.", r"layers.\1.feed_forward.w2."),
    (r"^layers\.(\d+)\.mlp\.up_proj\.", r"layers.\1.feed_forward.w3."),
    (r"^layers\.(\d+)\.input_layernorm\.", r"layers.\1.attention_norm."),
    (r"^layers\.(\d+)\.post_attention_layernorm\.", r"layers.\1.ffn_norm."),
]


def _rename(name, rules):
    for pattern, repl in rules:
        new, count = re.subn(pattern, repl, name)
        if count:
            return new
    return name


def _fuse_vision_qkv(sd, out):
    """q/k/v_proj of every ViT layer -> original attn.qkv ([q | k | v] rows)."""
    layer = 0
    while f"vision_tower.encoder.layer.{layer}.attention.q_proj.weight" in sd:
        base = f"vision_tower.encoder.layer.{layer}.attention."
        for kind in ("weight", "bias"):
            if base + f"q_proj.{kind}" not in sd:
                continue  # InternViT-6B: no qkv bias
            out[f"vision_model.encoder.layers.{layer}.attn.qkv.{kind}"] = torch.cat(
                [sd[base + f"{p}_proj.{kind}"] for p in "qkv"]).contiguous()
        layer += 1


def _llama_qkv_to_wqkv(sd, out, kv_heads, head_dim):
    layer = 0
    while f"language_model.model.layers.{layer}.self_attn.q_proj.weight" in sd:
        base = f"language_model.model.layers.{layer}.self_attn."
        q, k, v = (sd[base + f"{p}_proj.weight"] for p in "qkv")
        out[f"language_model.model.layers.{layer}.attention.wqkv.weight"] = group_wqkv(q, k, v, kv_heads, head_dim)
        layer += 1


def hf_to_original(hf_state, orig_arch, kv_heads, head_dim, tied):
    """orig_arch: 'internlm2' (a Llama text model written as InternLM2), 'llama', 'qwen2' or 'qwen3'."""
    sd = {_strip_hf_prefix(k): v.detach().clone() for k, v in hf_state.items()}
    out = {}
    _fuse_vision_qkv(sd, out)
    internlm2 = orig_arch == "internlm2"
    if internlm2:
        _llama_qkv_to_wqkv(sd, out, kv_heads, head_dim)
    for name, t in sd.items():
        if name.startswith("vision_tower."):
            rest = name[len("vision_tower."):]
            if ".attention." in rest and re.search(r"\.[qkv]_proj\.", rest):
                continue  # fused above
            out["vision_model." + _rename(rest, _VISION_RENAMES)] = t
        elif name.startswith("multi_modal_projector."):
            part, kind = name[len("multi_modal_projector."):].split(".")
            out[f"{_PROJECTOR_RENAMES[part]}.{kind}"] = t
        elif name.startswith("language_model.model."):
            rest = name[len("language_model.model."):]
            if internlm2:
                if re.search(r"self_attn\.[qkv]_proj\.", rest):
                    continue  # fused into wqkv above
                rest = _rename(rest, _INTERNLM2_RENAMES)
            out["language_model.model." + rest] = t
        elif name == "lm_head.weight":
            if not tied:
                out["language_model.output.weight" if internlm2 else "language_model.lm_head.weight"] = t
        else:
            raise KeyError(f"unmapped -hf tensor {name}")
    return out


_VISION_FORWARD = [  # original -> hf, on the part after `vision_model.`
    (r"^embeddings\.class_embedding$", "embeddings.cls_token"),
    (r"^embeddings\.position_embedding$", "embeddings.position_embeddings"),
    (r"^embeddings\.patch_embedding\.", "embeddings.patch_embeddings.projection."),
    (r"^encoder\.layers\.(\d+)\.attn\.proj\.", r"encoder.layer.\1.attention.projection_layer."),
    (r"^encoder\.layers\.(\d+)\.attn\.([qk])_norm\.", r"encoder.layer.\1.attention.\2_norm."),
    (r"^encoder\.layers\.(\d+)\.ls(\d)$", r"encoder.layer.\1.lambda_\2"),
    (r"^encoder\.layers\.(\d+)\.norm1\.", r"encoder.layer.\1.layernorm_before."),
    (r"^encoder\.layers\.(\d+)\.norm2\.", r"encoder.layer.\1.layernorm_after."),
    (r"^encoder\.layers\.(\d+)\.mlp\.", r"encoder.layer.\1.mlp."),
]


def original_to_hf(orig, orig_arch, kv_heads, head_dim, vision_hidden):
    """Original state dict -> names of transformers' InternVLForConditionalGeneration (model.* prefixes)."""
    lm_forward = [
        (r"^tok_embeddings\.", "embed_tokens."),
        (r"^layers\.(\d+)\.attention\.wo\.", r"layers.\1.self_attn.o_proj."),
        (r"^layers\.(\d+)\.feed_forward\.w1\.", r"layers.\1.mlp.gate_proj."),
        (r"^layers\.(\d+)\.feed_forward\.w2\.", r"layers.\1.mlp.down_proj."),
        (r"^layers\.(\d+)\.feed_forward\.w3\.", r"layers.\1.mlp.up_proj."),
        (r"^layers\.(\d+)\.attention_norm\.", r"layers.\1.input_layernorm."),
        (r"^layers\.(\d+)\.ffn_norm\.", r"layers.\1.post_attention_layernorm."),
    ]
    out = {}
    for name, t in orig.items():
        if name.startswith("vision_model."):
            rest = name[len("vision_model."):]
            m = re.match(r"^encoder\.layers\.(\d+)\.attn\.qkv\.(weight|bias)$", rest)
            if m:
                base = f"model.vision_tower.encoder.layer.{m.group(1)}.attention."
                c = vision_hidden
                out[base + f"q_proj.{m.group(2)}"] = t[:c]
                out[base + f"k_proj.{m.group(2)}"] = t[c:2 * c]
                out[base + f"v_proj.{m.group(2)}"] = t[2 * c:]
                continue
            out["model.vision_tower." + _rename(rest, _VISION_FORWARD)] = t
        elif name.startswith("mlp1."):
            idx, kind = name[len("mlp1."):].split(".")
            part = {v.split(".")[1]: k for k, v in _PROJECTOR_RENAMES.items()}[idx]
            out[f"model.multi_modal_projector.{part}.{kind}"] = t
        elif name in ("language_model.output.weight", "language_model.lm_head.weight"):
            out["lm_head.weight"] = t
        elif name.startswith("language_model.model."):
            rest = name[len("language_model.model."):]
            m = re.match(r"^layers\.(\d+)\.attention\.wqkv\.weight$", rest)
            if m:
                q, k, v = split_wqkv(t, kv_heads, head_dim)
                base = f"model.language_model.layers.{m.group(1)}.self_attn."
                out[base + "q_proj.weight"], out[base + "k_proj.weight"], out[base + "v_proj.weight"] = q, k, v
                continue
            if orig_arch == "internlm2":
                rest = _rename(rest, lm_forward)
            out["model.language_model." + rest] = t
        else:
            raise KeyError(f"unmapped original tensor {name}")
    return out
