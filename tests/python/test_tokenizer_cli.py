"""`fovea tokenize --tokenizer PATH [--special]` / `--decode`: the exact command form outside tools use."""
import json
import os
import subprocess

import pytest

import tokenizer_vectors

FOVEA = os.environ.get("FOVEA_BIN", "")
pytestmark = pytest.mark.skipif(not FOVEA or not os.path.exists(FOVEA), reason="FOVEA_BIN not set")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.environ.get("FOVEA_SHARED_DATA", os.path.join(REPO, "..", "shared", "data"))  # a worktree: set it
TOKENIZERS = os.path.join(SHARED, "tokenizers")
QWEN2 = os.path.join(TOKENIZERS, "qwen2")
INTERNLM2 = os.path.join(TOKENIZERS, "internlm2", "tokenizer.model")
needs_shared = pytest.mark.skipif(not os.path.isdir(TOKENIZERS), reason="no ../shared")
QWEN2_REGEX = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
               "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")


def tokenize(path, data, *flags, check=True):
    if isinstance(data, str):
        data = data.encode("utf-8")
    return subprocess.run([FOVEA, "tokenize", "--tokenizer", str(path), *flags], input=data, capture_output=True,
                          timeout=60, check=check)


def encode(path, text, *flags):
    out = tokenize(path, text, *flags).stdout.decode()
    assert out.endswith("\n") and out.count("\n") == 1, repr(out)
    return [int(x) for x in out.split()]


def decode(path, ids, *flags):
    return tokenize(path, " ".join(map(str, ids)), "--decode", *flags).stdout


def read_vectors(name, count):
    vectors = tokenizer_vectors.read_vectors(TOKENIZERS, name)
    # A spread of cases (each run loads the tokenizer): the C++ tests cover every case.
    step = max(1, len(vectors) // count)
    return vectors[::step]


@needs_shared
@pytest.mark.parametrize("path,name", [(QWEN2, "qwen2.gguf"), (INTERNLM2, "internlm2")])
def test_vectors_through_the_cli(path, name):
    for text, ids in read_vectors(name, 3):
        assert encode(path, text) == ids, repr(text)
        assert decode(path, ids) == text.encode("utf-8")


@needs_shared
def test_stdin_is_taken_byte_for_byte():
    with_newline = encode(QWEN2, "Hello world\n")
    assert with_newline == encode(QWEN2, "Hello world") + [198]
    assert encode(QWEN2, "") == []
    # Invalid UTF-8: each bad byte means U+FFFD, the same rule for both tokenizer kinds.
    for path in (QWEN2, INTERNLM2):
        assert encode(path, b"a\xffb") == encode(path, "a\ufffdb")


@needs_shared
def test_special_tokens_only_with_the_flag():
    text = "<|im_start|>user\nhi<|im_end|>"
    with_flag = encode(QWEN2, text, "--special")
    assert with_flag[0] == 151644 and with_flag[-1] == 151645
    without = encode(QWEN2, text)
    assert 151644 not in without and 151645 not in without
    assert decode(QWEN2, with_flag) == text.encode()
    assert decode(QWEN2, with_flag, "--skip-special") == b"user\nhi"


@needs_shared
def test_tokenizer_json_gives_the_same_ids(tmp_path):
    vocab = json.load(open(os.path.join(QWEN2, "vocab.json"), encoding="utf-8"))
    merges = [l for l in open(os.path.join(QWEN2, "merges.txt"), encoding="utf-8").read().split("\n")[1:] if l]
    doc = {
        "added_tokens": [{"id": 151643 + i, "content": c, "special": True}
                         for i, c in enumerate(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_REGEX}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        "model": {"type": "BPE", "vocab": vocab, "merges": [m.split(" ") for m in merges[:50000]]},
    }
    (tmp_path / "tokenizer.json").write_text(json.dumps(doc), encoding="utf-8")
    text = "Is there a bunk bed? 图中有3张床。<|im_end|>"
    # Only the first 50k merges: same ids as the full tokenizer for common words, fewer merges for rare ones.
    assert encode(tmp_path, text, "--special")[-1] == 151645
    assert encode(tmp_path / "tokenizer.json", "Hello world") == encode(QWEN2, "Hello world")
    doc["pre_tokenizer"] = {"type": "Whitespace"}
    (tmp_path / "tokenizer.json").write_text(json.dumps(doc), encoding="utf-8")
    bad = tokenize(tmp_path, "x", check=False)
    assert bad.returncode != 0 and b"pre-tokenizer" in bad.stderr


def test_errors_exit_non_zero(tmp_path):
    missing = tokenize(tmp_path / "nope.model", "x", check=False)
    assert missing.returncode != 0 and missing.stderr.count(b"\n") == 1
    (tmp_path / "garbage.model").write_bytes(b"\x0a\x7fabc")
    assert tokenize(tmp_path / "garbage.model", "x", check=False).returncode != 0
    assert subprocess.run([FOVEA, "tokenize"], capture_output=True, timeout=30).returncode != 0


def test_demo_tokenizer_matches_libsentencepiece(tmp_path):
    made = subprocess.run([FOVEA, "make-demo-model", "--out", str(tmp_path / "m")], capture_output=True, timeout=120)
    if made.returncode != 0:
        pytest.skip("make-demo-model unavailable: " + made.stderr.decode()[-200:])
    model = tmp_path / "m" / "tokenizer.model"
    texts = ["Is there a bunk bed in this room? Answer yes or no.", "图中有几张床？请回答是或者否。",
             "  leading spaces,\ttabs\nand newlines  ", "unseen: ✓ 😀 Ünïcödé", "<|im_start|> is text here"]
    ours = [encode(model, t) for t in texts]
    for t, ids in zip(texts, ours):
        assert decode(model, ids) == t.encode()
    spm = pytest.importorskip("sentencepiece")
    sp = spm.SentencePieceProcessor(model_file=str(model))
    assert ours == [sp.encode(t) for t in texts]
    assert encode(model, "<|im_start|>", "--special") == [sp.piece_to_id("<|im_start|>")]


def test_decode_refuses_ids_outside_the_vocabulary(demo_model):
    """-1 and 2147483647 used to be dropped silently; an id the vocabulary lacks is an error naming it."""
    assert tokenize(demo_model, "5", "--decode").returncode == 0
    for bad in ("-1", "2147483647", "5 796"):
        proc = tokenize(demo_model, bad, "--decode", check=False)
        assert proc.returncode == 1, (bad, proc.stdout)
        assert b"is outside the vocabulary (0..795)" in proc.stderr, proc.stderr
        assert proc.stdout == b""
