"""W4A16 end to end on the CPU: bench/gpu/make_w4_checkpoint.py turns the demo checkpoint's bf16 LLM linears into
an AWQ-format copy (checked here against the original weights by an independent numpy dequantization), and
`fovea run --w4 packed` (the LLM's linears kept 4-bit, the CPU reference of linear_w4) gives the same first-token
logits bit for bit as `--w4 dequantize` (bf16 at load), saying at start-up how many linears it kept packed."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")
Image = pytest.importorskip("PIL.Image")
from test_run_fp8 import row as logits_row, run_one_task  # noqa: E402 (after the skips)

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "gpu"))
import make_w4_checkpoint  # noqa: E402

FOVEA_BIN = os.environ.get("FOVEA_BIN", "")
pytestmark = pytest.mark.skipif(not os.path.exists(FOVEA_BIN), reason="FOVEA_BIN is not set to the fovea binary")


def run(model, tmp_path, name, w4):
    proc, logits = run_one_task(model, tmp_path, name, ["--w4", w4], colour=(20, 90, 200))
    assert proc.returncode == 0, proc.stderr
    return proc.stderr, logits_row(logits)


def awq_dequantize(qweight, qzeros, scales, group):
    """The AWQ gemm layout read back independently: [in, out/8] words -> [out, in] float32."""
    shifts = np.arange(8, dtype=np.uint32) * 4
    order = [0, 2, 4, 6, 1, 3, 5, 7]  # nibble i holds column 8c + order[i]

    def unpack(words):
        nib = (words.view(np.uint32)[..., None] >> shifts) & 0xF  # [rows, out/8, 8] by nibble
        cols = np.empty_like(nib)
        cols[..., order] = nib
        return cols.reshape(words.shape[0], -1).astype(np.float32)

    q, z = unpack(qweight), unpack(qzeros)
    rows = np.arange(q.shape[0]) // group
    return ((q - z[rows]) * scales.astype(np.float32)[rows]).T


def test_awq_copy_of_the_demo_runs_packed_exactly_like_dequantized(tmp_path):
    demo = tmp_path / "demo"
    subprocess.run([FOVEA_BIN, "make-demo-model", "--out", str(demo)], check=True, capture_output=True, timeout=300)
    awq = tmp_path / "awq"
    assert make_w4_checkpoint.convert(demo, awq, 16) == 2 * 5  # wqkv, wo, w1, w2, w3 of both layers

    before, _ = make_w4_checkpoint.read_safetensors(demo / "model.safetensors")
    after, _ = make_w4_checkpoint.read_safetensors(awq / "model.safetensors")
    assert not any(name.startswith("vision_model") and name.endswith(".qweight") for name in after)
    assert "language_model.output.weight" in after  # the LM head stays bf16
    prefix = "language_model.model.layers.1.feed_forward.w2"
    original = make_w4_checkpoint.as_float32(*before[prefix + ".weight"])
    restored = awq_dequantize(after[prefix + ".qweight"][1], after[prefix + ".qzeros"][1], after[prefix + ".scales"][1],
                              16)
    rel = np.linalg.norm(restored - original) / np.linalg.norm(original)
    assert 0 < rel < 0.15, rel
    config = json.loads((awq / "config.json").read_text())
    assert config["llm_config"]["quantization_config"]["quant_method"] == "awq"

    packed_log, packed = run(awq, tmp_path, "packed", "packed")
    dense_log, dense = run(awq, tmp_path, "dense", "dequantize")
    assert "W4A16 (awq 4-bit, group 16): 8 LLM linears kept 4-bit on the device" in packed_log, packed_log
    assert "dequantized to bf16 at load (W4A16 off)" in dense_log, dense_log
    assert np.isfinite(packed).all()
    assert np.array_equal(packed, dense)


def test_unknown_w4_mode_is_refused(demo_model, tmp_path):
    with pytest.raises(AssertionError, match="unknown --w4 'int4' \\(auto, packed, dequantize\\)"):
        run(demo_model, tmp_path, "bad", "int4")


SHARED_TOKENIZER = ROOT.parent / "shared" / "data" / "tokenizers" / "internlm2" / "tokenizer.model"


@pytest.mark.skipif(not SHARED_TOKENIZER.is_file(), reason="../shared/data's internlm2 tokenizer is absent")
def test_awq_copy_of_the_tiny_hf_model_runs_packed_exactly_like_dequantized(tmp_path):
    """The -hf layout run_all.sh benchmarks (text_config, separate q/k/v and gate/up parts stacked at load), at the
    tiny shapes of make_model.py (needs torch and transformers)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    model = tmp_path / "model"
    subprocess.run([sys.executable, str(ROOT / "bench" / "gpu" / "make_model.py"), "--out", str(model), "--tiny",
                    "--device", "cpu", "--dtype", "bf16", "--tokenizer", str(SHARED_TOKENIZER)],
                   check=True, capture_output=True, timeout=600)
    awq = tmp_path / "awq"
    assert make_w4_checkpoint.convert(model, awq, 32) == 2 * 7  # q, k, v, o, gate, up, down of both layers
    assert json.loads((awq / "config.json").read_text())["text_config"]["quantization_config"]["group_size"] == 32
    packed_log, packed = run(awq, tmp_path, "packed", "packed")
    _, dense = run(awq, tmp_path, "dense", "dequantize")
    assert "W4A16 (awq 4-bit, group 32): 8 LLM linears kept 4-bit on the device" in packed_log, packed_log
    assert np.array_equal(packed, dense)
