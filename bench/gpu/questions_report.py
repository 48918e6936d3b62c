#!/usr/bin/env python3
"""Summarises bench/gpu/questions.sh: QPM per question for K = 1, 4, 16 questions per image (same images, same
call), the ratio to K = 1 against the targets of issue 17, prompt tokens computed against needed, and the first
tokens of every (image, question) compared with the same question asked alone (prefix cache off).
Writes OUT/questions.json and OUT/questions.md and prints the table."""
import argparse
import json
import os

TARGETS = {4: 3.4, 16: 10.0}


def load_tokens(path):
    out = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                out[(r["image"], r["question"])] = r["tokens"][:1]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    alone = load_tokens(os.path.join(a.work, "questions_alone.tokens.jsonl"))
    runs, base = {}, None
    for k in (1, 4, 16):
        path = os.path.join(a.work, f"questions_k{k}.json")
        if not os.path.exists(path):
            runs[k] = {"status": "missing"}
            continue
        b = json.load(open(path))
        q = b.get("questions", {})
        tokens = load_tokens(os.path.join(a.work, f"questions_k{k}.tokens.jsonl"))
        shared = [key for key in tokens if key in alone]
        agree = sum(tokens[key] == alone[key] for key in shared)
        run = {"requests": b["requests"], "failed": b["failed"], "wall_s": b["wall_s"], "qpm": b["qpm"],
               "prompt_tokens_needed": q.get("prompt_tokens_needed"),
               "prompt_tokens_computed": q.get("prompt_tokens_computed"),
               "inflight_prefix_waits": q.get("inflight_prefix_waits"),
               "first_tokens_vs_alone": {"n": len(shared), "agree": agree}}
        if k == 1:
            base = b["qpm"]
        if base and k in TARGETS:
            run["ratio_to_k1"] = b["qpm"] / base
            run["target"] = TARGETS[k]
            run["meets_target"] = b["qpm"] / base >= TARGETS[k]
        runs[k] = run
    result = {"runs": {str(k): v for k, v in runs.items()}, "alone_pairs": len(alone)}
    os.makedirs(a.out, exist_ok=True)
    json.dump(result, open(os.path.join(a.out, "questions.json"), "w"), indent=2)
    lines = ["| K | requests | QPM per question | x K=1 (target) | prompt tokens computed / needed | "
             "first tokens = alone |", "|---|---|---|---|---|---|"]
    for k, r in runs.items():
        if r.get("status") == "missing":
            lines.append(f"| {k} | missing | | | | |")
            continue
        ratio = f"{r['ratio_to_k1']:.2f} (>= {r['target']})" if "ratio_to_k1" in r else "1"
        comp = (f"{r['prompt_tokens_computed']} / {r['prompt_tokens_needed']}"
                if r["prompt_tokens_needed"] else "-")
        ft = r["first_tokens_vs_alone"]
        lines.append(f"| {k} | {r['requests']} ({r['failed']} failed) | {r['qpm']:.1f} | {ratio} | {comp} | "
                     f"{ft['agree']}/{ft['n']} |")
    table = "\n".join(lines) + "\n"
    open(os.path.join(a.out, "questions.md"), "w").write(table)
    print(table)


if __name__ == "__main__":
    main()
