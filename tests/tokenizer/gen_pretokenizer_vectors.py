#!/usr/bin/env python3
"""Writes golden/pretok_texts.inp and golden/pretok_{gpt2,llama3,smollm2}.out: random texts (fixed seed) and where Hugging Face
`tokenizers` cuts them, for the byte-level pre-tokenizers besides Qwen2's: GPT-2's (ByteLevel's own regex),
Llama-3's (Split regex + ByteLevel) and SmolLM2's (Digits(individual_digits) + ByteLevel). Each .out line holds
the end byte offset (UTF-8) of every piece; the cuts do not depend on a vocabulary, so no vocabulary is needed.
Also golden/missing_bytes.{json,out}: a small byte-level BPE with SmolLM2's pipeline whose vocabulary lacks the 21
byte pieces SmolLM2's lacks, and the ids `tokenizers` gives the same texts (bytes without a piece are dropped and
their neighbours may merge).

Run from the repository root:  pip install tokenizers && python3 tests/tokenizer/gen_pretokenizer_vectors.py
"""
import json
import os
import random

from tokenizers import Regex, Tokenizer, pre_tokenizers

import gen_fuzz_vectors as ref

LLAMA3_REGEX = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
PIPELINES = {
    "gpt2": pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    "llama3": pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3_REGEX), behavior="isolated", invert=False),
                                       pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]),
    "smollm2": pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]),
}
EXTRA = ["12345", "3.14159", "x=1,234,567", "٣٤٥", "①②", "½¼", "abc123def", " 42 ", "'S 'T 'Re", "don'T", "I'M",
         "\x04\x06\x13", "\U00050000", "a\x1db", "  \n\n  x", "\r\n\r\n", "tab\there", "end  "]


def texts(seed):
    rng = random.Random(seed)
    out = ref.random_texts(300, seed=seed)
    for _ in range(100):
        out.append("".join(rng.choice(EXTRA + ref.FRAGMENTS) for _ in range(rng.randint(1, 6))))
    return out + EXTRA


def byte_ends(text, pieces):
    return [len(text[:end].encode("utf-8")) for _, (_, end) in pieces]


SMOLLM2_MISSING_BYTES = [4, 6, 19, 20, 22, 29, 192, 193, 241, 242, 245, 246, 247, 248, 249, 250, 251, 252, 253, 254, 255]
MERGES = [("a", "b"), ("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("in", "g"), ("Ġ", "1"), ("e", "r"),
          ("Ã", "©"), ("Ġ", "a"), ("Ġa", "b")]


def byte_alphabet():
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    extra, out = 256, {}
    for b in range(256):
        if b in printable:
            out[b] = chr(b)
        else:
            out[b] = chr(extra)
            extra += 1
    return out


def missing_bytes_tokenizer():
    alphabet = byte_alphabet()
    pieces = [alphabet[b] for b in range(256) if b not in SMOLLM2_MISSING_BYTES]
    pieces += [left + right for left, right in MERGES]
    spec = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                {"type": "Digits", "individual_digits": True},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]},
            "post_processor": None, "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                                                "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                      "vocab": {p: i for i, p in enumerate(pieces)}, "merges": [list(m) for m in MERGES]}}
    return json.dumps(spec, ensure_ascii=False, indent=1)


def main():
    cases = texts(seed=11)
    with open(os.path.join(ref.ROOT, "golden", "pretok_texts.inp"), "w", encoding="utf-8", newline="") as f:
        f.write(ref.SEPARATOR.join(cases) + ref.SEPARATOR)
    for name, pre in PIPELINES.items():
        with open(os.path.join(ref.ROOT, "golden", "pretok_" + name + ".out"), "w", encoding="utf-8", newline="") as f:
            for text in cases:
                f.write("".join(" %d" % e for e in byte_ends(text, pre.pre_tokenize_str(text))) + "\n")
    spec = missing_bytes_tokenizer()
    with open(os.path.join(ref.ROOT, "golden", "missing_bytes.json"), "w", encoding="utf-8") as f:
        f.write(spec)
    tok = Tokenizer.from_str(spec)
    with open(os.path.join(ref.ROOT, "golden", "missing_bytes.out"), "w", encoding="utf-8", newline="") as f:
        for text in cases:
            f.write("".join(" %d" % i for i in tok.encode(text).ids) + "\n")
    print(json.dumps({"cases": len(cases), "pipelines": list(PIPELINES)}))


if __name__ == "__main__":
    main()
