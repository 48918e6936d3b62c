#!/usr/bin/env python3
"""FP8 (E4M3) scaling recipes emulated in torch on the trained-weights checkpoint, against the instrument's saved
transformers float32 reference (fidelity.py reference): each LLM projection's weight and input are rounded to
E4M3 under the recipe's scales (max|v| / 448 per group) and multiplied back in float32, everything else float32.
One prompt per forward, so a per-tensor activation scale spans one prompt (in the engine it spans a whole step).
Tells which recipe, and which linears, the engine's FP8 error comes from; the engine's own figures come from
`fidelity.py fovea --mode fp8-*-cpu` (the CPU's scalar reference of the CUDA path). RECIPES also holds the two
peers' FP8 recipes (vLLM 0.20 online FP8, LMDeploy 0.18 PyTorch-engine FP8) as their sources define them, including
the linears they quantize outside the LLM.

    python3 bench/fidelity/fp8_emulation.py --model M --work W [--recipes tensor,channel,block,channel-act128]
        [--skip down_proj] [--json OUT]   (needs torch + transformers; W holds tasks.json and ref-float32.logits.npy)

--kv emulates an FP8 (E4M3) KV cache instead: every layer's keys (after rope) and values are rounded to E4M3
before attention reads them, as a cache written in FP8 and read back would give, under one of the scalings in
KV_RECIPES; --recipes none keeps the linears float32 so that the cache's own error shows alone.
--fp8-attention emulates FP8 attention (FlashAttention-3 style): Q, K and V rounded to E4M3 (one scale per token
and head, the best case), the softmax probabilities P (each row's maximum is 1, as the online softmax keeps it)
rounded to E4M3 with scale 1 before P.V; products and sums in float32.
"""
import argparse
import fnmatch
import json
import os
import sys
from typing import NamedTuple

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "smollm2"))
import smollm2_prompts as P  # noqa: E402
from fidelity import kl_per_prompt, load_tasks, metrics  # noqa: E402

E4M3_MAX = 448.0


def quantize(v, group_shape):
    """E4M3 round trip of a 2-D float32 tensor with one scale per block of group_shape (rows, cols); -1 = all."""
    import torch
    rows, cols = v.shape
    gr = rows if group_shape[0] == -1 else group_shape[0]
    gc = cols if group_shape[1] == -1 else group_shape[1]
    pr, pc = (-rows) % gr, (-cols) % gc
    padded = torch.nn.functional.pad(v, (0, pc, 0, pr))
    blocks = padded.reshape((rows + pr) // gr, gr, (cols + pc) // gc, gc)
    amax = blocks.abs().amax(dim=(1, 3), keepdim=True)
    scale = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax))
    q = (blocks / scale).to(torch.float8_e4m3fn).to(torch.float32) * scale
    return q.reshape(rows + pr, cols + pc)[:rows, :cols]


class Recipe(NamedTuple):
    weight: tuple           # weight scale group (rows, cols), -1 = the whole dimension
    act: tuple              # activation scale group (rows = tokens, cols)
    merge: bool = False     # q,k,v of a layer share their weight scales as one stacked tensor, and gate,up too
    extra: tuple = ()       # module-name patterns (fnmatch, under model.model) quantized besides the LLM's linears


# Peer sources: vLLM 0.20.0 and LMDeploy 0.18.0 wheels (paths inside them; see
# bench/results/2026-12-06-peer-fp8-recipes-cpu.md for what each line says).
VIT_MLP = ("vision_tower.encoder.layer.*.mlp.fc1", "vision_tower.encoder.layer.*.mlp.fc2")
PROJECTOR = ("multi_modal_projector.linear_1", "multi_modal_projector.linear_2")
RECIPES = {
    "tensor": Recipe((-1, -1), (-1, -1)),
    "channel": Recipe((1, -1), (1, -1)),
    # Also LMDeploy 0.18's PyTorch-engine `model_format="fp8"` on the LLM: 128x128 weight blocks quantized per loaded
    # q/k/v/gate/up shard (pytorch/config.py:368-375, nn/linear/blocked_fp8.py:366-377), activations in 1x128
    # groups per token (backends/cuda/blockedf8_modules.py: quant_fp8(x, self.block_size) before every GEMM).
    "block": Recipe((128, 128), (1, 128)),
    "channel-act128": Recipe((1, -1), (1, 128)),
    # vLLM 0.20's recipe per transformers module: one weight scale per tensor, a dynamic scale per token.
    "tensor-token": Recipe((-1, -1), (1, -1)),
    # vLLM 0.20 `LLM(quantization="fp8")` on a bf16 checkpoint, on Hopper, LLM only: Fp8OnlineLinearMethod
    # quantizes the loaded weight with ops.scaled_fp8_quant(layer.weight, scale=None), one dynamic per-tensor scale
    # (model_executor/layers/quantization/fp8.py:538, _custom_ops.py:2056-2064), over the merged qkv_proj and
    # gate_up_proj tensors (models/llama.py:94,164); activations per token when cutlass_fp8_supported()
    # (fp8.py:303-308), true on sm90.
    "tensor-token-merged": Recipe((-1, -1), (1, -1), merge=True),
    # vLLM whole: its -hf InternVL (models/interns1.py) also hands the quantization to the ViT's MLP fc1/fc2
    # (models/interns1_vit.py:255-267); the ViT's attention and the projector are plain nn.Linear there.
    "tensor-token-merged-vitmlp": Recipe((-1, -1), (1, -1), merge=True, extra=VIT_MLP),
    # LMDeploy whole: its -hf InternVL also builds the projector's two linears with the text config's FP8
    # quantization (pytorch/models/internvl3_hf.py:411-430); the ViT's config is not patched, so it stays bf16.
    "block-projector": Recipe((128, 128), (1, 128), extra=PROJECTOR),
}

# What one merged weight tensor holds in vLLM (QKVParallelLinear, MergedColumnParallelLinear): leaf -> tensor.
MERGED = {"q_proj": "qkv", "k_proj": "qkv", "v_proj": "qkv", "gate_proj": "gate_up", "up_proj": "gate_up"}


def quantized_weights(names, dense, recipe):
    """name -> E4M3 round trip of its weight under recipe; with recipe.merge the stacked q,k,v (and gate,up) of a
    layer are quantized as the one tensor they are in vLLM, so they share its per-tensor scale."""
    import torch
    groups = {}
    for n in names:
        parent, leaf = n.rsplit(".", 1)
        groups.setdefault(parent + "." + MERGED[leaf] if recipe.merge and leaf in MERGED else n, []).append(n)
    out = {}
    for members in groups.values():
        stacked = quantize(torch.cat([dense[n] for n in members]), recipe.weight)
        out.update(zip(members, stacked.split([dense[n].shape[0] for n in members])))
    return out


KV_RECIPES = {  # group over [kv_heads, tokens, head_dim] of one layer's K or V; "unit": scale 1, no amax at all
    "unit": None,            # vLLM's kv_cache_dtype=fp8 without calibrated scales (k_scale = v_scale = 1)
    "layer": (-1, -1, -1),   # one scale per layer and K/V, from this prompt's amax (a calibrated static scale's best case)
    "head": (1, -1, -1),     # one per KV head
    "token-head": (1, 1, -1),  # one per cached row (token) and head: the scale travels with the row
}


def quantize_kv(t, recipe):
    """E4M3 round trip of keys or values [batch, kv_heads, tokens, head_dim] under a KV_RECIPES scaling."""
    import torch
    group = KV_RECIPES[recipe]
    if group is None:
        return t.to(torch.float8_e4m3fn).to(t.dtype)
    dims = tuple(d + 1 for d, g in enumerate(group) if g == -1)
    amax = t.abs().amax(dim=dims, keepdim=True)
    scale = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax))
    return (t / scale).to(torch.float8_e4m3fn).to(t.dtype) * scale


def fp8_attention(module, query, key, value, attention_mask, scaling=None, **kwargs):
    """Causal GQA attention with E4M3 Q, K, V (per token and head) and E4M3 probabilities (see --fp8-attention)."""
    import torch
    q, k, v = (quantize_kv(t, "token-head") for t in (query, key, value))
    groups = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    scores = torch.matmul(q, k.transpose(2, 3)) * scaling
    t_q, t_k = scores.shape[-2:]
    causal = torch.ones(t_q, t_k, dtype=torch.bool).tril(t_k - t_q)
    scores = scores.masked_fill(~causal, float("-inf"))
    p = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    denominator = p.sum(dim=-1, keepdim=True)  # from the unrounded P, as FA3's running sum is kept in float32
    p = p.to(torch.float8_e4m3fn).to(torch.float32)
    out = torch.matmul(p, v) / denominator
    return out.transpose(1, 2).contiguous(), None


def use_fp8_attention(model):
    from transformers import AttentionInterface
    AttentionInterface.register("fp8_attention", fp8_attention)
    model.model.language_model.config._attn_implementation = "fp8_attention"


def use_fp8_kv(model, recipe):
    """Routes the LLM's attention through an FP8 round trip of K and V (the ViT's attention is left alone)."""
    from transformers import AttentionInterface
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    base = ALL_ATTENTION_FUNCTIONS["sdpa"]

    def attention(module, query, key, value, *args, **kwargs):
        return base(module, query, quantize_kv(key, recipe), quantize_kv(value, recipe), *args, **kwargs)
    AttentionInterface.register("fp8_kv_" + recipe, attention)
    model.model.language_model.config._attn_implementation = "fp8_kv_" + recipe


def paired_ratio_interval(kl, base, draws=2000, seed=0):
    """95% interval of mean(kl) / mean(base) when the prompts are resampled (the same draw for both)."""
    kl, base = np.asarray(kl), np.asarray(base)
    picks = np.random.default_rng(seed).integers(0, len(kl), size=(draws, len(kl)))
    ratios = kl[picks].mean(axis=1) / base[picks].mean(axis=1)
    return float(np.percentile(ratios, 2.5)), float(np.percentile(ratios, 97.5))


def main():
    import torch
    from transformers import AutoTokenizer, InternVLForConditionalGeneration
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--recipes", default="tensor,channel,block,channel-act128")
    ap.add_argument("--skip", default="", help="comma-separated linear names left in float32 (e.g. down_proj)")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--kv", default="", help="FP8 KV cache scaling (" + ", ".join(KV_RECIPES) + ")")
    ap.add_argument("--fp8-attention", action="store_true")
    ap.add_argument("--json", default="", help="also write each recipe's metrics to this JSON file")
    args = ap.parse_args()
    unknown = [r for r in args.recipes.split(",") if r != "none" and r not in RECIPES]
    if unknown:
        ap.error(f"unknown recipe {unknown[0]!r}; choose from none, " + ", ".join(RECIPES))
    tok = AutoTokenizer.from_pretrained(args.model)
    model = InternVLForConditionalGeneration.from_pretrained(args.model, dtype=torch.float32,
                                                             attn_implementation="sdpa").eval()
    if args.kv:
        use_fp8_kv(model, args.kv)
    if args.fp8_attention:
        use_fp8_attention(model)
    tasks = load_tasks(args.work)
    if args.limit:
        tasks = tasks[:args.limit]
    ref = np.load(os.path.join(args.work, "ref-float32.logits.npy"))[:len(tasks)]
    ref_tokens = json.load(open(os.path.join(args.work, "ref-float32.tokens.json")))["tokens"][:len(tasks)]
    skip = set(filter(None, args.skip.split(",")))
    modules = {n: m for n, m in model.model.named_modules() if isinstance(m, torch.nn.Linear)}
    llm = [n for n in modules if n.startswith("language_model.") and n.split(".")[-1] not in skip]
    dense = {n: m.weight.data.clone() for n, m in modules.items()}
    rows = {}
    for recipe in args.recipes.split(","):
        spec = RECIPES.get(recipe)
        names = [] if spec is None else llm + [n for n in modules if any(fnmatch.fnmatch(n, p) for p in spec.extra)]
        weights = quantized_weights(names, dense, spec) if names else {}
        hooks = []
        for n in names:
            m = modules[n]
            m.weight.data = weights[n]

            def pre(module, inputs, x_group=spec.act):
                x = inputs[0]
                flat = x.reshape(-1, x.shape[-1])
                return (quantize(flat, x_group).reshape(x.shape),)
            hooks.append(m.register_forward_pre_hook(pre))
        logits = []
        with torch.no_grad():
            for _, system, prompt, image in tasks:
                ids = tok(P.prompt_text(tok, system, prompt, image is not None), return_tensors="pt").input_ids
                inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
                if image is not None:
                    inputs["pixel_values"] = torch.from_numpy(P.pixel_values(image))
                logits.append(model(**inputs).logits[0, -1].float().numpy())
        for h in hooks:
            h.remove()
        for n in names:
            modules[n].weight.data = dense[n]
        logits = np.stack(logits)
        m = metrics(ref, ref_tokens, logits, [[int(row.argmax())] for row in logits])
        image = np.array([t[3] is not None for t in tasks])
        if image.any():  # the ViT's and projector's linears reach only these prompts
            m["with_image"] = metrics(ref[image], [t for t, i in zip(ref_tokens, image) if i], logits[image],
                                      [[int(row.argmax())] for row in logits[image]])
        m["kl"] = [round(float(k), 6) for k in kl_per_prompt(ref, logits)]
        rows[recipe] = m
        print(f"{recipe:16s} mean KL {m['kl_mean']:.4f}  p99 {m['kl_p99']:.3f}  top-1 {m['top1_agree']:.2%}"
              f"{'  image tasks: mean KL %.4f' % m['with_image']['kl_mean'] if 'with_image' in m else ''}"
              f"{'  (skipping ' + args.skip + ')' if skip else ''}{'  FP8 KV ' + args.kv if args.kv else ''}"
              f"{'  FP8 attention' if args.fp8_attention else ''}",
              flush=True)
    if "tensor" in rows:
        for recipe, m in rows.items():
            low, high = paired_ratio_interval(m["kl"], rows["tensor"]["kl"])
            m["ratio_to_tensor"] = [m["kl_mean"] / rows["tensor"]["kl_mean"], low, high]
            print(f"{recipe:16s} {m['ratio_to_tensor'][0]:.2f} x per-tensor (95% over prompts: {low:.2f}-{high:.2f})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"prompts": len(tasks), "skip": sorted(skip), "kv": args.kv,
                       "fp8_attention": args.fp8_attention, "recipes": rows}, f, indent=1)


if __name__ == "__main__":
    main()
