"""`fovea make-demo-model --out DIR`: the exact command form other tools use, and what it writes."""
import json
import os
import struct
import subprocess

import pytest

FOVEA = os.environ.get("FOVEA_BIN", "")
pytestmark = pytest.mark.skipif(not FOVEA or not os.path.exists(FOVEA), reason="FOVEA_BIN not set")


def safetensors_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n))


def test_make_demo_model_writes_an_internvl2_checkpoint(tmp_path):
    out = tmp_path / "model"
    subprocess.run([FOVEA, "make-demo-model", "--out", str(out)], check=True, capture_output=True, timeout=120)
    for name in ("config.json", "model.safetensors", "tokenizer.model", "tokenizer_config.json", "README.txt"):
        assert (out / name).is_file(), name
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "internvl_chat"
    assert config["template"] == "internlm2-chat"
    assert config["max_dynamic_patch"] == 12 and config["use_thumbnail"] is True
    assert config["llm_config"]["architectures"] == ["InternLM2ForCausalLM"]
    vocab = config["llm_config"]["vocab_size"]
    header = safetensors_header(out / "model.safetensors")
    tensors = {k: v for k, v in header.items() if k != "__metadata__"}
    assert all(v["dtype"] == "BF16" for v in tensors.values())
    assert tensors["language_model.model.tok_embeddings.weight"]["shape"] == [vocab, 64]
    # InternLM2 wqkv: (4 q heads + 2 k + 2 v) x head_dim 16 rows.
    assert tensors["language_model.model.layers.0.attention.wqkv.weight"]["shape"] == [128, 64]
    assert tensors["vision_model.embeddings.patch_embedding.weight"]["shape"] == [64, 3, 14, 14]
    assert tensors["vision_model.embeddings.position_embedding"]["shape"] == [1, 1025, 64]
    assert tensors["mlp1.1.weight"]["shape"] == [64, 256]
    assert "random" in (out / "README.txt").read_text().lower()
    specials = {v["content"]: int(k) for k, v in json.loads((out / "tokenizer_config.json").read_text())[
        "added_tokens_decoder"].items()}
    assert specials["<IMG_CONTEXT>"] == vocab - 1


def test_make_demo_model_requires_out(tmp_path):
    result = subprocess.run([FOVEA, "make-demo-model"], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "--out" in result.stderr
