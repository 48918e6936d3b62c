"""Writes the fuzz seed corpora under tests/fuzz/corpus/<target>/ (committed; run again only to change them).

Sources: small files of ../shared/data/images (Pillow's test images, by format), the golden checkpoints'
config.json, the demo SentencePiece model (`fovea make-demo-model`), a 600-token slice of ../shared's Qwen2
vocabulary with the merges inside it (no normalizer, so byte-level round trips are exact), ../shared's
tokenizer test vectors, and hand-written HTTP requests, chat bodies and tasks lines.
Usage: python3 tests/fuzz/make_seeds.py FOVEA_BINARY [SHARED_DATA_DIR]
"""
import base64
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")
FOVEA = sys.argv[1]
SHARED = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "..", "shared", "data")
QWEN2_REGEX = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
               "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")


def put(target, name, data):
    os.makedirs(os.path.join(CORPUS, target), exist_ok=True)
    with open(os.path.join(CORPUS, target, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def images():
    magic = {"jpeg": b"\xff\xd8\xff", "png": b"\x89PNG", "gif": b"GIF8", "bmp": b"BM", "webp": b"RIFF"}
    per_format = {k: 0 for k in magic}
    folder = os.path.join(SHARED, "images")
    for root, _, files in sorted(os.walk(folder)):
        for name in sorted(files):
            path = os.path.join(root, name)
            size = os.path.getsize(path)
            if size > 6000:
                continue
            data = open(path, "rb").read()
            for fmt, m in magic.items():
                if data.startswith(m) and per_format[fmt] < 25:
                    per_format[fmt] += 1
                    seed = os.path.relpath(path, folder).replace("/", "_")
                    put("fuzz_" + fmt, seed, data)
                    if per_format[fmt] <= 8:
                        put("fuzz_image", seed, data)


def safetensors():
    def file(header, data):
        h = json.dumps(header).encode()
        h += b" " * (-len(h) % 8)
        return struct.pack("<Q", len(h)) + h + data
    put("fuzz_safetensors", "two_tensors.safetensors", file(
        {"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
         "b": {"dtype": "BF16", "shape": [3], "data_offsets": [16, 22]},
         "__metadata__": {"format": "pt"}}, bytes(range(22))))
    put("fuzz_safetensors", "empty_tensor.safetensors", file(
        {"e": {"dtype": "I64", "shape": [0, 4], "data_offsets": [0, 0]}}, b""))


def configs():
    for fam in ("internlm2", "qwen2"):
        for fmt in ("original", "hf"):
            src = os.path.join(ROOT, "tests", "data", "golden", fam, fmt, "config.json")
            put("fuzz_config", f"{fam}_{fmt}.json", open(src, "rb").read())


def tokenizers():
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([FOVEA, "make-demo-model", "--out", os.path.join(tmp, "demo")], check=True,
                       capture_output=True)
        put("fuzz_sentencepiece", "demo.model", open(os.path.join(tmp, "demo", "tokenizer.model"), "rb").read())
    qwen = os.path.join(SHARED, "tokenizers", "qwen2")
    vocab = json.load(open(os.path.join(qwen, "vocab.json"), encoding="utf-8"))
    kept = {t: i for t, i in vocab.items() if i < 600}
    merges = []
    for line in open(os.path.join(qwen, "merges.txt"), encoding="utf-8"):
        parts = line.rstrip("\n").split(" ")
        if len(parts) == 2 and parts[0] in kept and parts[1] in kept and parts[0] + parts[1] in kept:
            merges.append(line.rstrip("\n"))
    added = [{"id": 600, "content": "<|im_start|>", "special": True},
             {"id": 601, "content": "<|im_end|>", "special": True}]
    doc = {"added_tokens": added, "normalizer": None,
           "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
               {"type": "Split", "pattern": {"Regex": QWEN2_REGEX}, "behavior": "Isolated", "invert": False},
               {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
           "model": {"type": "BPE", "vocab": kept, "merges": merges}}
    put("fuzz_tokenizer_json", "qwen2_small.json", json.dumps(doc, ensure_ascii=False))
    put("fuzz_vocab_merges", "qwen2_small", json.dumps(kept, ensure_ascii=False) + "\n#merges\n#version: 0.2\n" +
        "\n".join(merges) + "\n")
    texts = [open(os.path.join(SHARED, "tokenizers", "vectors", "internlm2.inp"), "rb").read()[:2000],
             "Hello <|im_start|>user\nWhat is in the <image>? 你好！ 123 4567\n".encode(),
             b"\xff\xfe bad \xc3\x28 utf8 \xe2\x82", "   \t\n\n  spaces\r\n".encode(),
             "Ünïcödé ﬁ ligature 🙂 emoji \u200b".encode()]
    for i, text in enumerate(texts):
        put("fuzz_tokenize_text", f"text{i}", text)
        put("fuzz_chat_template", f"text{i}", b"\x02\x01\x03" + text)


def server_and_tasks():
    put("fuzz_http_request", "get", "\x00\x10\x00\x00\x00\x10\x00\x00GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    put("fuzz_http_request", "post", "\x00\x10\x00\x00\x00\x10\x00\x00POST /v1/chat/completions HTTP/1.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}")
    put("fuzz_http_request", "chunked", "\x00\x10\x00\x00\x00\x10\x00\x00POST /x HTTP/1.1\r\n"
        "Transfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n5\r\nhello\r\n0\r\nTrailer: y\r\n\r\n"
        "GET /b?q=1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
    pngs = sorted(os.listdir(os.path.join(CORPUS, "fuzz_png")),
                  key=lambda n: os.path.getsize(os.path.join(CORPUS, "fuzz_png", n)))
    png = open(os.path.join(CORPUS, "fuzz_png", pngs[0]), "rb").read()  # the smallest PNG seed
    url = "data:image/png;base64," + base64.b64encode(png).decode()
    bodies = [
        {"model": "m", "messages": [{"role": "user", "content": "Describe."}]},
        {"model": "m", "stream": True, "stream_options": {"include_usage": True}, "max_tokens": 5,
         "temperature": 0.5, "top_p": 0.9, "logprobs": True, "top_logprobs": 2, "stop": ["\n"], "seed": 3,
         "messages": [{"role": "system", "content": "Be brief."},
                      {"role": "user", "content": [{"type": "text", "text": "What?"},
                                                   {"type": "image_url", "image_url": {"url": url}}]}]},
    ]
    for i, b in enumerate(bodies):
        put("fuzz_openai_request", f"body{i}.json", json.dumps(b))
    lines = [{"id": "a", "image": "x.jpg", "prompt": "Describe."},
             {"id": 7, "image": "/abs/y.png", "max_tokens": 4, "answers": ["yes", "no"]},
             {"id": "b", "image": "z.jpg", "prompts": ["one", "two"], "choices": ["yes", "no"]},
             {"id": "m", "system": "Be brief.", "messages": [
                 {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x.jpg"}},
                                              {"type": "text", "text": "What?"}]}]}]
    put("fuzz_batch_tasks", "tasks.jsonl", "\n".join(json.dumps(x) for x in lines) + "\nnot json\n{}\n")


if __name__ == "__main__":
    shutil.rmtree(CORPUS, ignore_errors=True)
    images()
    safetensors()
    configs()
    tokenizers()
    server_and_tasks()
