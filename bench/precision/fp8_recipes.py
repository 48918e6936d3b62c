#!/usr/bin/env python3
"""FP8 recipes against float32 through Fovea itself: first-token fidelity of each --quantization on the CPU.

Runs `fovea run --backend cpu --dump-logits` over the same image+question tasks once unquantized (float32, the
reference) and once per FP8 recipe (fp8-tensor, fp8-channel, fp8-block, and fp8-all), then reports what llama.cpp's
--kl-divergence reports for the next-token distribution: mean and 99th-percentile KL(reference || quantized),
top-1 agreement, and the top-2 margins (reference logits) where the top token flips. The CPU backend's FP8 path
is the scalar reference of the CUDA one (same E4M3 rounding of weights and activations; float32 sums).

Usage: fp8_recipes.py --fovea build/fovea [--model DIR (default: a fresh `fovea make-demo-model`)]
                      [--tasks 64] [--out results.md]
The demo model's weights are random (near-tied logits): its figures rank the recipes, they do not predict a
trained model's; pass --model with a trained-weights checkpoint for those.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from PIL import Image

RECIPES = ["fp8-tensor", "fp8-channel", "fp8-block", "fp8-all"]
QUESTIONS = ["Is there a bed?", "What colour is the wall?", "How many chairs are in the room?",
             "Describe the photo in one sentence.", "图中有3张以上的床吗？请直接回答是或否。", "Is it daytime?",
             "Quelle est la couleur dominante ?", "Name one object you can see."]


def make_tasks(folder, count, seed):
    rng = np.random.default_rng(seed)
    (folder / "img").mkdir(exist_ok=True)
    lines = []
    for i in range(count):
        w, h = int(rng.integers(48, 160)), int(rng.integers(48, 160))
        pixels = rng.integers(0, 256, size=(h // 8 + 1, w // 8 + 1, 3), dtype=np.uint8)
        Image.fromarray(pixels).resize((w, h), Image.BILINEAR).save(folder / "img" / f"{i}.png")
        lines.append(json.dumps({"id": f"t{i}", "image": f"img/{i}.png", "prompt": QUESTIONS[i % len(QUESTIONS)],
                                 "max_tokens": 1}))
    (folder / "tasks.jsonl").write_text("\n".join(lines) + "\n")


def run(fovea, model, folder, quantization):
    logits = folder / f"{quantization}_logits"
    subprocess.run([fovea, "run", "--model", str(model), "--input", str(folder / "tasks.jsonl"), "--output",
                    str(folder / f"{quantization}.jsonl"), "--backend", "cpu", "--max-tiles", "1", "--quiet",
                    "--quantization", quantization, "--dump-logits", str(logits)], check=True, cwd=folder)
    index = json.loads((folder / f"{quantization}_logits.json").read_text())
    data = np.fromfile(folder / f"{quantization}_logits.f32", dtype="<f4").reshape(-1, index["vocab"])
    return {task: data[r].astype(np.float64) for task, r in index["rows"].items()}


def log_softmax(x):
    x = x - x.max()
    return x - np.log(np.exp(x).sum())


def compare(reference, quantized):
    kl, agree, flips = [], 0, []
    for task, ref in reference.items():
        lp, lq = log_softmax(ref), log_softmax(quantized[task])
        kl.append(float((np.exp(lp) * (lp - lq)).sum()))
        top = int(ref.argmax())
        if top == int(quantized[task].argmax()):
            agree += 1
        else:
            second = np.partition(ref, -2)[-2]
            flips.append(float(ref[top] - second))
    kl = np.array(kl)
    return {"mean_kl": kl.mean(), "p99_kl": np.percentile(kl, 99), "top1": agree, "n": len(kl),
            "flip_margins": sorted(flips)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fovea", required=True)
    ap.add_argument("--model")
    ap.add_argument("--tasks", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out")
    args = ap.parse_args()
    fovea = os.path.abspath(args.fovea)
    with tempfile.TemporaryDirectory() as tmp:
        folder = __import__("pathlib").Path(tmp)
        model = args.model
        if not model:
            model = str(folder / "demo")
            subprocess.run([fovea, "make-demo-model", "--out", model], check=True, capture_output=True)
        make_tasks(folder, args.tasks, args.seed)
        reference = run(fovea, os.path.abspath(model), folder, "none")
        rows = [(q, compare(reference, run(fovea, os.path.abspath(model), folder, q))) for q in RECIPES]
    lines = ["| recipe | mean KL | p99 KL | top-1 | top-2 margins of flips |", "|---|---|---|---|---|"]
    for q, r in rows:
        margins = ", ".join(f"{m:.3f}" for m in r["flip_margins"][:8]) or "-"
        lines.append(f"| {q} | {r['mean_kl']:.3e} | {r['p99_kl']:.3e} | {r['top1']}/{r['n']} | {margins} |")
    table = "\n".join(lines)
    print(table)
    if args.out:
        with open(args.out, "a") as f:
            f.write(f"\nmodel: {args.model or 'fovea make-demo-model (random weights)'}, {args.tasks} tasks, "
                    f"seed {args.seed}\n\n{table}\n")


if __name__ == "__main__":
    sys.exit(main())
