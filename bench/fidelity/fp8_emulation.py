#!/usr/bin/env python3
"""FP8 (E4M3) scaling recipes emulated in torch on the trained-weights checkpoint, against the instrument's saved
transformers float32 reference (fidelity.py reference): each LLM projection's weight and input are rounded to
E4M3 under the recipe's scales (max|v| / 448 per group) and multiplied back in float32, everything else float32.
One prompt per forward, so a per-tensor activation scale spans one prompt (in the engine it spans a whole step).
Tells which recipe, and which linears, the engine's FP8 error comes from; the engine's own figures come from
`fidelity.py fovea --mode fp8-*-cpu` (the CPU's scalar reference of the CUDA path).

    python3 bench/fidelity/fp8_emulation.py --model M --work W [--recipes tensor,channel,block,channel-act128]
        [--skip down_proj]   (needs torch + transformers; W holds tasks.json and ref-float32.logits.npy)
"""
import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import smollm2_prompts as P  # noqa: E402
from fidelity import load_tasks, metrics  # noqa: E402

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


RECIPES = {  # (weight group, activation group): (rows, cols), -1 = the whole dimension
    "tensor": ((-1, -1), (-1, -1)),
    "channel": ((1, -1), (1, -1)),
    "block": ((128, 128), (1, 128)),
    "channel-act128": ((1, -1), (1, 128)),
}


def main():
    import torch
    from transformers import AutoTokenizer, InternVLForConditionalGeneration
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--recipes", default="tensor,channel,block,channel-act128")
    ap.add_argument("--skip", default="", help="comma-separated linear names left in float32 (e.g. down_proj)")
    ap.add_argument("--limit", type=int, default=0)
    args = ap.parse_args()
    tok = AutoTokenizer.from_pretrained(args.model)
    model = InternVLForConditionalGeneration.from_pretrained(args.model, dtype=torch.float32).eval()
    tasks = load_tasks(args.work)
    if args.limit:
        tasks = tasks[:args.limit]
    ref = np.load(os.path.join(args.work, "ref-float32.logits.npy"))[:len(tasks)]
    ref_tokens = json.load(open(os.path.join(args.work, "ref-float32.tokens.json")))["tokens"][:len(tasks)]
    skip = set(filter(None, args.skip.split(",")))
    linears = [(n, m) for n, m in model.model.language_model.named_modules()
               if isinstance(m, torch.nn.Linear) and n.split(".")[-1] not in skip]
    dense = {n: m.weight.data.clone() for n, m in linears}
    rows = {}
    for recipe in args.recipes.split(","):
        w_group, x_group = RECIPES[recipe]
        hooks = []
        for n, m in linears:
            m.weight.data = quantize(dense[n], w_group)

            def pre(module, inputs, x_group=x_group):
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
        for n, m in linears:
            m.weight.data = dense[n]
        logits = np.stack(logits)
        m = metrics(ref, ref_tokens, logits, [[int(row.argmax())] for row in logits])
        rows[recipe] = m
        print(f"{recipe:16s} mean KL {m['kl_mean']:.4f}  p99 {m['kl_p99']:.3f}  top-1 {m['top1_agree']:.2%}"
              f"{'  (skipping ' + args.skip + ')' if skip else ''}", flush=True)
    if "tensor" in rows:
        for recipe, m in rows.items():
            print(f"{recipe:16s} {m['kl_mean'] / rows['tensor']['kl_mean']:.2f} x per-tensor")


if __name__ == "__main__":
    main()
