"""4-bit checkpoints (W4A16): `fovea make-demo-model --quantize awq|gptq` packs the demo LLM's linears; this test
dequantizes that checkpoint INDEPENDENTLY in numpy, from the published layouts (AutoAWQ's gemm packing with its
interleaved nibble order, AutoGPTQ's row packing with g_idx, GPTQModel's v1 zeros word offset), into a plain bf16
checkpoint without quantization_config, and requires `fovea run --backend cpu` to give identical first-token
logits on both (same weights, same arithmetic). Unsupported bits are refused naming the value."""
import json
import os
import shutil
import subprocess

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("PIL.Image")
from test_run_fp8 import row as logits_row, run as run_fp8_test_job  # noqa: E402 (after the skips)

FOVEA_BIN = os.environ.get("FOVEA_BIN", "")
pytestmark = pytest.mark.skipif(not os.path.exists(FOVEA_BIN), reason="FOVEA_BIN is not set to the fovea binary")

NUMPY_DTYPES = {"I32": "<i4", "F16": "<f2", "BF16": "<u2", "F32": "<f4", "I64": "<i8"}
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]  # AutoAWQ: nibble i of a word holds output column 8c + AWQ_ORDER[i]
GPTQ_V1_ZERO_OFFSET = np.uint32(0x11111111)  # GPTQModel: v1 zeros word = true word - 0x11111111


def read_safetensors(path):
    raw = path.read_bytes()
    size = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + size])
    data = raw[8 + size:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        tensors[name] = (info["dtype"], np.frombuffer(data[begin:end], dtype=NUMPY_DTYPES[info["dtype"]])
                         .reshape(info["shape"]))
    return tensors


def write_safetensors(path, tensors):
    header, chunks, offset = {}, [], 0
    for name, (dtype, array) in tensors.items():
        blob = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(blob)]}
        chunks.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(len(text).to_bytes(8, "little") + text + b"".join(chunks))


def nibbles(words):
    """[..., m] int32 words -> [..., m, 8]: element i is bits 4i..4i+3."""
    shifts = np.arange(8, dtype=np.uint32) * 4
    return ((words.view(np.uint32)[..., None] >> shifts) & 0xF).astype(np.float32)


def awq_weight(qweight, qzeros, scales, group):
    rows, cols = qweight.shape
    q = np.empty((rows, cols, 8), np.float32)
    q[:, :, AWQ_ORDER] = nibbles(qweight)  # column 8c + AWQ_ORDER[i] <- nibble i
    z = np.empty((qzeros.shape[0], cols, 8), np.float32)
    z[:, :, AWQ_ORDER] = nibbles(qzeros)
    q, z = q.reshape(rows, cols * 8), z.reshape(qzeros.shape[0], cols * 8)
    g = np.arange(rows) // group
    return ((q - z[g]) * scales.astype(np.float32)[g]).T  # [in, out] -> [out, in]


def gptq_weight(qweight, qzeros, scales, g_idx, v1):
    packed_rows, out = qweight.shape
    q = nibbles(qweight).transpose(0, 2, 1).reshape(packed_rows * 8, out)  # row 8r + i <- nibble i of word r
    zwords = qzeros.view(np.uint32) + (GPTQ_V1_ZERO_OFFSET if v1 else np.uint32(0))  # wraps mod 2^32
    z = nibbles(zwords).reshape(qzeros.shape[0], out)  # plain order along the output dim
    return ((q - z[g_idx]) * scales.astype(np.float32)[g_idx]).T


def to_bf16_bits(values):
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def dequantized_copy(src, dst):
    """The same checkpoint with every X.qweight/... replaced by a bf16 X.weight and no quantization_config."""
    shutil.copytree(src, dst)
    config = json.loads((src / "config.json").read_text())
    quant = config.pop("quantization_config", None) or config["llm_config"].pop("quantization_config")
    tensors = read_safetensors(src / "model.safetensors")
    out = {}
    for name, (dtype, array) in tensors.items():
        if not name.endswith(".qweight"):
            if not name.endswith((".qzeros", ".scales", ".g_idx")):
                out[name] = (dtype, array)
            continue
        prefix = name[:-len(".qweight")]
        qzeros, scales = tensors[prefix + ".qzeros"][1], tensors[prefix + ".scales"][1]
        if quant["quant_method"] == "awq":
            weight = awq_weight(array, qzeros, scales, quant["group_size"])
        else:
            weight = gptq_weight(array, qzeros, scales, tensors[prefix + ".g_idx"][1],
                                 quant.get("checkpoint_format", "gptq") == "gptq")
        out[prefix + ".weight"] = ("BF16", to_bf16_bits(weight))
    (dst / "model.safetensors").unlink()
    write_safetensors(dst / "model.safetensors", out)
    (dst / "config.json").write_text(json.dumps(config, indent=2))
    return quant


def make_demo(tmp_path, name, quantize):
    out = tmp_path / name
    proc = subprocess.run([FOVEA_BIN, "make-demo-model", "--out", str(out), "--seed", "5"]
                          + (["--quantize", quantize] if quantize else []),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return out


def run_logits(model, tmp_path, name):
    proc, logits = run_fp8_test_job(model, tmp_path, name, "none")  # the same CPU job as the FP8 test
    assert proc.returncode == 0, proc.stderr
    return logits_row(logits)


@pytest.mark.parametrize("method", ["awq", "gptq"])
def test_packed_checkpoint_runs_exactly_like_its_numpy_dequantization(tmp_path, method):
    packed = make_demo(tmp_path, method, method)
    quant = dequantized_copy(packed, tmp_path / f"{method}_dense")
    assert quant["quant_method"] == method and quant["bits"] == 4
    tensors = read_safetensors(packed / "model.safetensors")
    assert any(name.endswith(".qweight") for name in tensors)
    assert not any(name.startswith("vision_model") and name.endswith(".qweight") for name in tensors)
    if method == "gptq":  # act-order: g_idx is not the identity grouping
        g_idx = tensors["language_model.model.layers.0.attention.wqkv.g_idx"][1]
        assert not np.array_equal(g_idx, np.arange(g_idx.size) // quant["group_size"])

    from_packed = run_logits(packed, tmp_path, "packed")
    from_numpy = run_logits(tmp_path / f"{method}_dense", tmp_path, "numpy")
    assert np.isfinite(from_packed).all()
    assert np.array_equal(from_packed, from_numpy)

    # The quantization is real: the dense demo of the same seed gives close, not equal, logits.
    dense = run_logits(make_demo(tmp_path, "dense", None), tmp_path, "dense")
    rel = np.linalg.norm(dense - from_packed) / np.linalg.norm(dense)
    assert 0 < rel < 0.2, rel


def test_inspect_shows_the_quantization(tmp_path):
    packed = make_demo(tmp_path, "gptq", "gptq")
    proc = subprocess.run([FOVEA_BIN, "inspect", "--model", str(packed)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "gptq 4-bit, group 16, act-order, sym, v1 zeros" in proc.stdout


def test_unsupported_bits_are_refused(tmp_path):
    packed = make_demo(tmp_path, "awq", "awq")
    config = json.loads((packed / "config.json").read_text())
    config["llm_config"]["quantization_config"]["bits"] = 3
    (packed / "config.json").write_text(json.dumps(config))
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "a", "image": "none.png", "prompt": "x", "max_tokens": 1}) + "\n")
    proc = subprocess.run([FOVEA_BIN, "run", "--model", str(packed), "--input", str(tasks), "--output",
                           str(tmp_path / "out.jsonl"), "--backend", "cpu", "--quiet"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "llm_config.quantization_config.bits 3 is not supported (4-bit awq only)" in proc.stderr
