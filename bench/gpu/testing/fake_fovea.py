#!/usr/bin/env python3
"""A stand-in for the `fovea` binary, for rehearsing bench/gpu on a CPU before the real commands exist:
`tokenize` (a made-up but deterministic tokenizer that keeps the chat template's special tokens, or the real
one of FAKE_FOVEA_TOKENIZE_WITH=path/to/fovea) and `run`
(answers every task with transformers itself, so the comparison must come out at 100%). Never used on the GPU.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import common  # noqa: E402
import prompt_ids  # noqa: E402

SPECIALS = {"internlm2": {"<|im_start|>": 92543, "<|im_end|>": 92542},
            "qwen2": {"<|im_start|>": 151644, "<|im_end|>": 151645}}


def flag(args, name, default=None):
    return args[args.index(name) + 1] if name in args else default


def variant_of(path):
    model_json = common.read_json(os.path.join(path, "model.json"), {}) if os.path.isdir(path) else {}
    if model_json.get("variant"):
        return model_json["variant"]
    return "qwen2" if "qwen" in path or os.path.exists(os.path.join(path, "vocab.json")) else "internlm2"


def tokenize(args):
    real = os.environ.get("FAKE_FOVEA_TOKENIZE_WITH")  # a real fovea binary that has `tokenize` only
    if real:
        os.execv(real, [real, "tokenize"] + args)
    specials = SPECIALS[variant_of(flag(args, "--tokenizer"))]
    text, ids = sys.stdin.read(), []
    while text:
        hit = next((s for s in specials if text.startswith(s)), None)
        if hit:
            ids.append(specials[hit])
            text = text[len(hit):]
        else:
            ids.append(3 + ord(text[0]) % 30000)
            text = text[1:]
    print(" ".join(map(str, ids)))
    return 0


def run(args):
    import torch
    import reference
    model_dir, out_path = flag(args, "--model"), flag(args, "--output")
    template = common.read_json(os.path.join(model_dir, "config.json"), {}).get("template")
    prompt = prompt_ids.build(sys.argv[0], model_dir, variant_of(model_dir), template)
    model = reference.load_model(model_dir, "cpu", torch.float32, "sdpa")
    with open(flag(args, "--input"), encoding="utf-8") as f:
        tasks = [json.loads(line) for line in f if line.strip()]
    with open(out_path, "a", encoding="utf-8") as out:
        for task in tasks:
            t0 = time.time()
            batch = reference.make_batch([task], [common.load_pixel_values(task["image"])], prompt, 0)
            token = int(reference.forward_last_logits(model, batch, "cpu")[0].argmax())
            out.write(json.dumps({"id": task["id"], "text": "", "tokens": [token],
                                  "ms": 1000 * (time.time() - t0)}) + "\n")
            out.flush()
    return 0


def main():
    command, args = (sys.argv[1] if len(sys.argv) > 1 else ""), sys.argv[2:]
    if command == "tokenize":
        return tokenize(args)
    if command == "run":
        return run(args)
    print(f"fake_fovea: unsupported command {command!r}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
