#!/usr/bin/env python3
"""Records transformers float32 greedy answers (16 tokens) of the SmolLM2 InternVL checkpoint on the oracle
prompt set (tools/smollm2/smollm2_prompts.py) into tests/data/smollm2/goldens.json, for tests/python/test_smollm2_oracle.py.

    fovea make-demo-model --llm smollm2 --out /tmp/smollm2
    pip install torch transformers pillow     # CPU is enough
    python3 tools/smollm2/make_smollm2_goldens.py --model /tmp/smollm2
"""
import argparse
import hashlib
import json
import os
import sys

import torch
import transformers
from transformers import AutoTokenizer, InternVLForConditionalGeneration

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import smollm2_prompts as P  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NEW_TOKENS = 16


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "smollm2", "goldens.json"))
    args = ap.parse_args()
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(args.model)
    model = InternVLForConditionalGeneration.from_pretrained(args.model, dtype=torch.float32).eval()
    with open(os.path.join(args.model, "model.safetensors"), "rb") as f:
        weights_sha = hashlib.sha256(f.read()).hexdigest()
    cases = []
    for task_id, system, question, image in P.ORACLE_TASKS:
        text = P.prompt_text(tok, system, question, image is not None)
        ids = tok(text, add_special_tokens=True, return_tensors="pt").input_ids
        inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        if image is not None:
            inputs["pixel_values"] = torch.from_numpy(P.pixel_values(image))
        with torch.no_grad():
            out = model.generate(**inputs, max_new_tokens=NEW_TOKENS, do_sample=False)
        answer = out[0, ids.shape[1]:].tolist()
        cases.append({"id": task_id, "prompt_ids": ids[0].tolist(), "tokens": answer,
                      "text": tok.decode(answer, skip_special_tokens=True)})
        print(task_id, repr(cases[-1]["text"]))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"transformers": transformers.__version__, "torch": torch.__version__, "dtype": "float32",
                   "max_new_tokens": NEW_TOKENS, "model_safetensors_sha256": weights_sha, "cases": cases},
                  f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
