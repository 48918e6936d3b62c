"""Config-only model folders of the InternVL family for `--load-format dummy`: config.json and
tokenizer_config.json of a row of tests/data/family/family.json (tools/family/family_table.py writes both, at the
real checkpoint's sizes and special token ids), and the tokenizer files of its LLM family (InternLM2's
tokenizer.model, or the Qwen2 vocab.json + merges.txt that Qwen2.5 and Qwen3 share).

  family_models.py --row InternVL3-78B --out DIR --tokenizers .carry/tokenizers [--sizes real|tiny-vocab]

--sizes tiny-vocab keeps the real vocabulary and token ids with tiny widths and depths: the same folder layout a
CPU runs in seconds (the family.sh --tiny rehearsal).
"""
import argparse
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "family"))
import family_table  # noqa: E402

# The tokenizer files each LLM architecture's checkpoints ship, by the folder of bench/gpu/prepare_carry.sh.
TOKENIZER_FILES = {
    "InternLM2ForCausalLM": ("internlm2", ["tokenizer.model"]),
    "Qwen2ForCausalLM": ("qwen2", ["vocab.json", "merges.txt"]),
    "Qwen3ForCausalLM": ("qwen2", ["vocab.json", "merges.txt"]),  # Qwen3 keeps Qwen2's byte-level BPE
}
MARKER = "family_model.json"


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


def write_model_dir(row_name, out, tokenizers, sizes="real"):
    """Writes the folder and returns what it holds (row, sizes, the LLM and vision tower names)."""
    doc = family_table.load_doc()
    row = family_table.find_row(doc, row_name)
    arch = doc["llms"][row["llm"]]["arch"]
    if arch not in TOKENIZER_FILES:
        raise SystemExit(f"{row_name}: no tokenizer files known for {arch}")
    if os.path.isdir(out) and os.listdir(out) and not os.path.exists(os.path.join(out, MARKER)):
        raise SystemExit(f"{out} is not empty and was not written by family_models.py: refusing to overwrite it")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    write_json(os.path.join(out, "config.json"), family_table.model_config(doc, row, sizes))
    write_json(os.path.join(out, "tokenizer_config.json"), family_table.tokenizer_config(doc, row, sizes))
    folder, names = TOKENIZER_FILES[arch]
    for name in names:
        shutil.copy(os.path.join(tokenizers, folder, name), os.path.join(out, name))
    info = {"row": row_name, "sizes": sizes, "vision": row["vision"], "llm": row["llm"], "arch": arch,
            "template": row.get("template")}
    write_json(os.path.join(out, MARKER), info)
    return info


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--row", required=True, help="a model name of tests/data/family/family.json")
    p.add_argument("--out", required=True)
    p.add_argument("--tokenizers", required=True, help="folder holding internlm2/ and qwen2/")
    p.add_argument("--sizes", choices=["real", "tiny-vocab"], default="real")
    args = p.parse_args()
    print(json.dumps(write_model_dir(args.row, args.out, args.tokenizers, args.sizes)))


if __name__ == "__main__":
    main()
