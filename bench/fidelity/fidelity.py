#!/usr/bin/env python3
"""Fidelity instrument for the trained-weights model (SmolLM2-135M-Instruct as an InternVL checkpoint): how far
each Fovea mode is from transformers float32 on >= 500 varied prompts (bench/fidelity/prompts.py), with the
metrics of llama.cpp's --kl-divergence: mean and 99th-percentile KL(reference || mode) of the first generated
token's distribution, top-1 agreement, plus greedy 16-token sequence agreement and the reference's top-2 margin
(logits) on the prompts whose first token flips.

    python3 bench/fidelity/fidelity.py tasks --out W [--count 520]          # tasks.jsonl + images in W
    python3 bench/fidelity/fidelity.py reference --model M --work W [--dtype float32|bfloat16] [--device cpu|cuda]
    python3 bench/fidelity/fidelity.py fovea --bin FOVEA --model M --work W --mode cpu|cuda|fp8|w4 [-- extra args]
    python3 bench/fidelity/fidelity.py invariance --bin FOVEA --model M --work W --mode fp8 --name NAME [-- extra]
    python3 bench/fidelity/fidelity.py compare --work W --modes cpu,cuda,... [--out RESULTS.md]

`reference` needs torch + transformers (`name` = ref-float32 / ref-bfloat16); `fovea` runs
`fovea run --dump-logits` (mode = the Fovea options: cpu = --backend cpu; cuda = --backend cuda (bf16);
fp8, fp8-tensor, fp8-channel, fp8-block = cuda + --quantization of that name, and -cpu for the CPU's scalar
reference of each; w4 / w4-cpu = cuda / cpu on a 4-bit checkpoint given as --model). Every run writes
W/<name>.logits.npy (float32 [tasks, vocab], task order) and W/<name>.tokens.json.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "smollm2"))
import prompts  # noqa: E402
import smollm2_prompts as P  # noqa: E402

NEW_TOKENS = 16
MODES = {"cpu": ["--backend", "cpu"], "cuda": ["--backend", "cuda"], "w4": ["--backend", "cuda"],
         "w4-cpu": ["--backend", "cpu"]}
for recipe in ("fp8", "fp8-tensor", "fp8-channel", "fp8-block", "fp8-channel-act128"):  # fp8: the default
    MODES[recipe] = ["--backend", "cuda", "--quantization", recipe]
    MODES[recipe + "-cpu"] = ["--backend", "cpu", "--quantization", recipe]  # the scalar reference of each


def load_tasks(work):
    with open(os.path.join(work, "tasks.json"), encoding="utf-8") as f:
        return json.load(f)


def cmd_tasks(args):
    os.makedirs(args.out, exist_ok=True)
    tasks = prompts.make_tasks(args.count, seed=args.seed)
    if args.limit:
        tasks = tasks[:args.limit]
    with open(os.path.join(args.out, "tasks.json"), "w", encoding="utf-8") as f:
        json.dump(tasks, f, ensure_ascii=False)
    with open(os.path.join(args.out, "tasks.jsonl"), "w", encoding="utf-8") as f:
        for task_id, system, prompt, image in tasks:
            f.write(json.dumps(P.task_line(task_id, system, prompt, image, args.out, NEW_TOKENS),
                               ensure_ascii=False) + "\n")
    print(f"{len(tasks)} tasks ({sum(t[3] is not None for t in tasks)} with an image) in {args.out}")


def save(work, name, logits, tokens, seconds):
    np.save(os.path.join(work, name + ".logits.npy"), np.asarray(logits, dtype=np.float32))
    with open(os.path.join(work, name + ".tokens.json"), "w") as f:
        json.dump({"tokens": tokens, "seconds": seconds}, f)


def cmd_reference(args):
    import torch
    from transformers import AutoTokenizer, InternVLForConditionalGeneration
    dtype = getattr(torch, args.dtype)
    tok = AutoTokenizer.from_pretrained(args.model)
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model = InternVLForConditionalGeneration.from_pretrained(args.model, dtype=dtype).to(args.device).eval()
    eos = model.generation_config.eos_token_id
    eos = set(eos if isinstance(eos, list) else [eos])
    tasks = load_tasks(args.work)
    logits, tokens, start = [None] * len(tasks), [None] * len(tasks), time.time()
    # Batches of one kind (text-only or one image each), left-padded: the batch changes the float32 reference by
    # rounding only (the attention mask keeps the padding out), and cuts the GPU machine's time by the batch size.
    order = sorted(range(len(tasks)), key=lambda n: tasks[n][3] is not None)
    batches, current = [], []
    for n in order:
        if current and (len(current) == args.batch or (tasks[current[0]][3] is None) != (tasks[n][3] is None)):
            batches.append(current)
            current = []
        current.append(n)
    batches.append(current)
    for b, batch in enumerate(batches):
        texts = [P.prompt_text(tok, tasks[n][1], tasks[n][2], tasks[n][3] is not None) for n in batch]
        enc = tok(texts, return_tensors="pt", padding=True)
        inputs = {"input_ids": enc.input_ids.to(args.device), "attention_mask": enc.attention_mask.to(args.device)}
        images = [tasks[n][3] for n in batch if tasks[n][3] is not None]
        if images:
            pixels = np.concatenate([P.pixel_values(i) for i in images])
            inputs["pixel_values"] = torch.from_numpy(pixels).to(args.device, dtype)
        with torch.no_grad():
            out = model.generate(**inputs, max_new_tokens=NEW_TOKENS, do_sample=False, output_logits=True,
                                 return_dict_in_generate=True, pad_token_id=tok.pad_token_id)
        first = out.logits[0].float().cpu().numpy()
        for row, n in enumerate(batch):
            seq = out.sequences[row, enc.input_ids.shape[1]:].tolist()
            for i, t in enumerate(seq):  # generate pads a finished row: keep up to its EOS, as alone
                if t in eos:
                    seq = seq[:i + 1]
                    break
            logits[n], tokens[n] = first[row], seq
        print(f"reference batch {b + 1}/{len(batches)}", file=sys.stderr, flush=True)
    save(args.work, "ref-" + args.dtype + args.suffix, logits, tokens, time.time() - start)


def run_fovea(args, tasks_path, out, dump, options):
    """`fovea run --dump-logits` over tasks_path; returns (first-token logits by task id, result records by id)."""
    for path in (out, dump + ".f32", dump + ".json"):
        if os.path.exists(path):
            os.remove(path)
    subprocess.run([args.bin, "run", "--model", args.model, "--input", tasks_path, "--output", out, "--dump-logits",
                    dump, "--quiet"] + options + MODES[args.mode] + args.extra, check=True)
    with open(dump + ".json") as f:
        index = json.load(f)
    rows = np.fromfile(dump + ".f32", dtype="<f4").reshape(-1, index["vocab"])
    results = {r["id"]: r for r in map(json.loads, open(out, encoding="utf-8"))}
    return {task_id: rows[row] for task_id, row in index["rows"].items()}, results


def cmd_fovea(args):
    tasks = load_tasks(args.work)
    name = args.name or args.mode
    start = time.time()
    logits, results = run_fovea(args, os.path.join(args.work, "tasks.jsonl"),
                                os.path.join(args.work, name + ".results.jsonl"), os.path.join(args.work, name + ".dump"),
                                [])
    seconds = time.time() - start
    failed = [t[0] for t in tasks if results.get(t[0], {}).get("error")]
    if failed:
        sys.exit(f"{len(failed)} tasks failed, e.g. {failed[:3]}: {results[failed[0]]['error']}")
    save(args.work, name, [logits[t[0]] for t in tasks], [results[t[0]]["tokens"] for t in tasks], seconds)


def cmd_invariance(args):
    """Whether a request's first token depends on its batch-mates: the first --count tasks (one new token each)
    run alone (--concurrency 1: one request per step) and all at once in reverse order; per task, the first
    token and the first-token logits (bit for bit) are compared."""
    tasks = load_tasks(args.work)[:args.count]
    work = os.path.join(args.work, "invariance")
    os.makedirs(work, exist_ok=True)
    runs = {}
    for tag, order, concurrency in (("alone", tasks, 1), ("batched", tasks[::-1], len(tasks))):
        path = os.path.join(work, "tasks-" + tag + ".jsonl")
        with open(path, "w", encoding="utf-8") as f:
            for task_id, system, prompt, image in order:
                f.write(json.dumps(P.task_line(task_id, system, prompt, image, args.work, 1), ensure_ascii=False) + "\n")
        logits, results = run_fovea(args, path, os.path.join(work, args.name + "-" + tag + ".jsonl"),
                                    os.path.join(work, args.name + "-" + tag), ["--concurrency", str(concurrency)])
        runs[tag] = ([results[t[0]]["tokens"][0] for t in tasks], np.stack([logits[t[0]] for t in tasks]))
    (tok_a, log_a), (tok_b, log_b) = runs["alone"], runs["batched"]
    same_rows = int(sum(np.array_equal(x, y) for x, y in zip(log_a, log_b)))
    row = {"mode": args.mode, "extra": " ".join(args.extra), "tasks": len(tasks),
           "first_tokens_equal": int(sum(a == b for a, b in zip(tok_a, tok_b))), "logits_bit_identical": same_rows,
           "max_abs_diff": float(np.abs(log_a - log_b).max())}
    summary = os.path.join(args.work, "invariance.json")
    table = json.load(open(summary)) if os.path.exists(summary) else {}
    table[args.name] = row
    with open(summary, "w") as f:
        json.dump(table, f, indent=1)
    print(f"invariance {args.name}: first tokens {row['first_tokens_equal']}/{len(tasks)}, logits bit-identical "
          f"{same_rows}/{len(tasks)}, max |diff| {row['max_abs_diff']:.4g}")


def log_softmax(x):
    x = x.astype(np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def kl_per_prompt(ref_logits, logits):
    """KL(reference || candidate) of each row's next-token distribution, natural log."""
    lp, lq = log_softmax(ref_logits), log_softmax(logits)
    return (np.exp(lp) * (lp - lq)).sum(axis=-1)


def metrics(ref_logits, ref_tokens, logits, tokens):
    kl = kl_per_prompt(ref_logits, logits)
    top1_ref, top1 = ref_logits.argmax(-1), logits.argmax(-1)
    flips = np.nonzero(top1_ref != top1)[0]
    top2 = np.sort(ref_logits, axis=-1)[:, -2:]
    margins = (top2[:, 1] - top2[:, 0])[flips]
    same_seq = sum(a == b for a, b in zip(ref_tokens, tokens))
    return {"tasks": len(kl), "kl_mean": float(kl.mean()), "kl_p99": float(np.percentile(kl, 99)),
            "kl_max": float(kl.max()), "top1_agree": float((top1_ref == top1).mean()),
            "seq16_agree": same_seq / len(tokens), "seq16_same": int(same_seq), "first_token_flips": len(flips),
            "flip_margins": sorted(round(float(m), 4) for m in margins)}


def cmd_compare(args):
    tasks = load_tasks(args.work)
    ref_logits = np.load(os.path.join(args.work, args.reference + ".logits.npy"))
    ref_tokens = json.load(open(os.path.join(args.work, args.reference + ".tokens.json")))["tokens"]
    image = np.array([t[3] is not None for t in tasks])
    rows = {}
    for name in args.modes.split(","):
        logits = np.load(os.path.join(args.work, name + ".logits.npy"))
        info = json.load(open(os.path.join(args.work, name + ".tokens.json")))
        m = metrics(ref_logits, ref_tokens, logits, info["tokens"])
        m["with_image"] = metrics(ref_logits[image], [t for t, i in zip(ref_tokens, image) if i], logits[image],
                                  [t for t, i in zip(info["tokens"], image) if i])
        m["seconds"] = info["seconds"]
        rows[name] = m
    table = ["| mode | tasks | mean KL | p99 KL | top-1 | 16-token answers | flips (ref top-2 margins) | image tasks top-1 |",
             "|---|---|---|---|---|---|---|---|"]
    for name, m in rows.items():
        table.append(f"| {name} | {m['tasks']} | {m['kl_mean']:.3g} | {m['kl_p99']:.3g} | {m['top1_agree']:.2%} | "
                     f"{m['seq16_same']}/{m['tasks']} | {m['first_token_flips']} ({m['flip_margins'][:8]}) | "
                     f"{m['with_image']['top1_agree']:.2%} |")
    print("\n".join(table))
    if args.out:
        with open(args.out + ".json", "w") as f:
            json.dump({"reference": args.reference, "modes": rows}, f, indent=1)
        with open(args.out + ".md", "w") as f:
            f.write("\n".join(table) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("tasks")
    t.add_argument("--out", required=True)
    t.add_argument("--count", type=int, default=520)
    t.add_argument("--limit", type=int, default=0, help="keep only the first N (a quick subset)")
    t.add_argument("--seed", type=int, default=7, help="another seed gives another set (calibration data)")
    r = sub.add_parser("reference")
    r.add_argument("--model", required=True)
    r.add_argument("--work", required=True)
    r.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    r.add_argument("--device", default="cpu")
    r.add_argument("--batch", type=int, default=1, help="prompts per generate() call (left-padded)")
    r.add_argument("--suffix", default="", help="appended to the run's name (ref-<dtype><suffix>)")
    fv = sub.add_parser("fovea")
    fv.add_argument("--bin", required=True)
    fv.add_argument("--model", required=True)
    fv.add_argument("--work", required=True)
    fv.add_argument("--mode", required=True, choices=sorted(MODES))
    fv.add_argument("--name", default="")
    fv.add_argument("extra", nargs="*", help="more fovea run options (after --)")
    iv = sub.add_parser("invariance")
    iv.add_argument("--bin", required=True)
    iv.add_argument("--model", required=True)
    iv.add_argument("--work", required=True)
    iv.add_argument("--mode", required=True, choices=sorted(MODES))
    iv.add_argument("--name", required=True)
    iv.add_argument("--count", type=int, default=128)
    iv.add_argument("extra", nargs="*", help="more fovea run options (after --)")
    c = sub.add_parser("compare")
    c.add_argument("--work", required=True)
    c.add_argument("--modes", required=True)
    c.add_argument("--reference", default="ref-float32")
    c.add_argument("--out", default="")
    args = ap.parse_args()
    {"tasks": cmd_tasks, "reference": cmd_reference, "fovea": cmd_fovea, "invariance": cmd_invariance,
     "compare": cmd_compare}[args.cmd](args)


if __name__ == "__main__":
    main()
