"""`fovea quantize` on the demo model, each method: the written checkpoint loads in Fovea (`fovea run` on the CPU
gives finite first-token logits, and the same with the 4-bit linears kept packed; `fovea inspect --model` names
the method and the quantized linears), and its packed weights, read back by an independent numpy unpacking, stay
within the 4-bit step of the originals (AWQ: after undoing the scales it folded into the attention norm)."""
import json
import os
import re
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
from test_w4_checkpoint import awq_dequantize  # noqa: E402

make_w4_checkpoint.DTYPES.setdefault("F8_E4M3", np.uint8)  # fp8 codes, read as bytes

FOVEA_BIN = os.environ.get("FOVEA_BIN", "")
pytestmark = pytest.mark.skipif(not os.path.exists(FOVEA_BIN), reason="FOVEA_BIN is not set to the fovea binary")
QKV = "language_model.model.layers.0.attention.wqkv"
NORM = "language_model.model.layers.0.attention_norm.weight"
GROUP = 16  # divides the demo LLM's input widths (64, 176)


@pytest.fixture(scope="module")
def calibration(tmp_path_factory):
    """tasks.jsonl (4 calibration tasks) and held_out.jsonl (4 others) over random images."""
    folder = tmp_path_factory.mktemp("calib")
    rng = np.random.default_rng(0)
    lines = []
    for i in range(8):
        pixels = rng.integers(0, 256, size=(48 + 8 * (i % 4), 64, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(folder / f"{i}.png")
        lines.append(json.dumps({"id": str(i), "image": f"{i}.png", "prompt": f"What is in picture {i}?",
                                 "max_tokens": 2}))
    (folder / "tasks.jsonl").write_text("\n".join(lines[:4]) + "\n")
    (folder / "held_out.jsonl").write_text("\n".join(lines[4:]) + "\n")
    return folder / "tasks.jsonl"


@pytest.fixture(scope="module")
def quantized(demo_model, calibration, tmp_path_factory):
    """method -> the demo quantized by it (group 16; gptq with act-order), made lazily once per module."""
    made = {}

    def get(method):
        if method not in made:
            out = tmp_path_factory.mktemp("quantized") / method
            extra = ["--act-order"] if method == "gptq" else []
            if method in ("awq", "gptq"):
                extra += ["--calib", str(calibration), "--samples", "4", "--max-tiles", "2"]
            quantize(demo_model, out, method, *extra)
            made[method] = out
        return made[method]
    return get


def quantize(model, out, method, *extra):
    proc = subprocess.run([FOVEA_BIN, "quantize", "--model", str(model), "--out", str(out), "--method", method,
                           "--group", str(GROUP), *extra], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "quantize [" in proc.stderr  # the progress bar
    return proc


def gptq_dequantize(qweight, qzeros, scales, g_idx):
    """AutoGPTQ layout (v1 zeros: stored word = true word - 0x11111111) -> [out, in] float32."""
    shifts = np.arange(8, dtype=np.uint32) * 4
    q = ((qweight.view(np.uint32)[:, None, :] >> shifts[None, :, None]) & 0xF).reshape(-1, qweight.shape[1])
    words = (qzeros.view(np.uint32).astype(np.uint64) + 0x11111111) & 0xFFFFFFFF
    z = ((words[..., None] >> shifts.astype(np.uint64)) & 0xF).reshape(qzeros.shape[0], -1)
    return ((q.astype(np.float32) - z[g_idx]) * scales.astype(np.float32)[g_idx]).T


def first_logits(model, tmp_path, name):
    proc, logits = run_one_task(model, tmp_path, name, [])
    assert proc.returncode == 0, proc.stderr
    values = logits_row(logits)
    assert np.isfinite(values).all()
    return values


def read(model):
    return make_w4_checkpoint.read_safetensors(model / "model.safetensors")[0]


@pytest.mark.parametrize("method", ["awq", "gptq", "rtn", "fp8"])
def test_quantized_demo_loads_and_runs(demo_model, quantized, tmp_path, method):
    out = quantized(method)
    config = json.loads((out / "config.json").read_text())
    q = config["quantization_config"]
    assert q["quant_method"] == {"awq": "awq", "gptq": "gptq", "rtn": "gptq", "fp8": "compressed-tensors"}[method]
    assert config["llm_config"]["quantization_config"] == q  # LMDeploy reads the LLM's config
    inspect = subprocess.run([FOVEA_BIN, "inspect", "--model", str(out)], capture_output=True, text=True, timeout=60)
    assert inspect.returncode == 0, inspect.stderr
    assert "quantized linears 10" in inspect.stdout  # wqkv, wo, w1, w2, w3 of both layers
    assert "layers.*.attention.wqkv x2" in inspect.stdout

    before, after = read(demo_model), read(out)
    assert not any(n.startswith("vision_model") and (n.endswith(".qweight") or n.endswith("_scale")) for n in after)
    assert after["language_model.output.weight"][0] == "BF16"  # the LM head stays
    w = make_w4_checkpoint.as_float32(*before[QKV + ".weight"])
    if method == "fp8":
        codes, scale = after[QKV + ".weight"], after[QKV + ".weight_scale"][1]
        assert codes[0] == "F8_E4M3" and scale.shape == (w.shape[0], 1)
        np.testing.assert_allclose(scale[:, 0], np.abs(w).max(axis=1) / 448, rtol=1e-6)
        assert codes[1].max() == 0x7E or (codes[1] & 0x7F).max() == 0x7E  # each row's max is 448 = E4M3 0x7E
    elif method == "awq":
        dq = awq_dequantize(after[QKV + ".qweight"][1], after[QKV + ".qzeros"][1], after[QKV + ".scales"][1], GROUP)
        # The runtime computes dq x (norm_new * x_in), the original W x (norm_old * x_in): undo the fold.
        s = (make_w4_checkpoint.as_float32(*before[NORM]) / make_w4_checkpoint.as_float32(*after[NORM]))
        step = np.repeat(after[QKV + ".scales"][1].astype(np.float32).T, GROUP, axis=1)
        assert not np.allclose(s, 1.0)  # scales were searched and folded
        # within a step (AWQ's rounded zero point shifts the grid by up to half a step)
        assert (np.abs(dq / s - w) <= (1.001 * step + 1e-6) / s + np.abs(w) * 2 ** -7).all()
    else:
        g_idx = after[QKV + ".g_idx"][1]
        dq = gptq_dequantize(after[QKV + ".qweight"][1], after[QKV + ".qzeros"][1], after[QKV + ".scales"][1], g_idx)
        step = after[QKV + ".scales"][1].astype(np.float32)[g_idx].T
        steps = np.abs(dq - w) / step
        if method == "rtn":
            assert (steps <= 0.5 * 1.01).all()  # 1%: the float16 scale's rounding over 7.5 steps
            assert (g_idx == np.arange(w.shape[1]) // GROUP).all()
        else:  # error feedback moves later columns; act-order permutes the groups
            assert steps.mean() < 1.0 and steps.max() < 4.0
            assert not (g_idx == np.arange(w.shape[1]) // GROUP).all()
    dequantized = first_logits(out, tmp_path, method)
    if method != "fp8":  # the 4-bit files also stay packed (W4A16; the CPU's linear_w4 reference) with equal logits
        proc, logits = run_one_task(out, tmp_path, method + "_packed", ["--w4", "packed"])
        assert proc.returncode == 0 and "8 LLM linears kept 4-bit on the device" in proc.stderr, proc.stderr
        assert np.array_equal(logits_row(logits), dequantized)


def held_out_logits(model, calibration, tmp_path, name):
    """First-token logits [4, vocab] of the held-out tasks."""
    logits = tmp_path / f"{name}_logits"
    proc = subprocess.run([FOVEA_BIN, "run", "--model", str(model), "--input", str(calibration.parent / "held_out.jsonl"),
                           "--output", str(tmp_path / f"{name}.jsonl"), "--backend", "cpu", "--max-tiles", "2",
                           "--quiet", "--dump-logits", str(logits)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    index = json.loads((tmp_path / f"{name}_logits.json").read_text())
    data = np.fromfile(tmp_path / f"{name}_logits.f32", dtype="<f4").reshape(-1, index["vocab"])
    return np.stack([data[index["rows"][k]] for k in sorted(index["rows"])]).astype(np.float64)


def mean_kl(reference, other):
    def log_softmax(x):
        x = x - x.max(axis=1, keepdims=True)
        return x - np.log(np.exp(x).sum(axis=1, keepdims=True))
    p, q = log_softmax(reference), log_softmax(other)
    return float((np.exp(p) * (p - q)).sum(axis=1).mean())


def test_calibrated_methods_beat_round_to_nearest_on_held_out_prompts(demo_model, quantized, calibration, tmp_path):
    # Random weights, 4 prompts the calibration did not see: the next-token KL to the dense model (measured:
    # rtn 9.3e-5, awq 4.7e-5, gptq 4.9e-6).
    dense = held_out_logits(demo_model, calibration, tmp_path, "dense")
    kl = {m: mean_kl(dense, held_out_logits(quantized(m), calibration, tmp_path, m)) for m in ("rtn", "awq", "gptq")}
    assert kl["gptq"] < 0.5 * kl["rtn"], kl
    assert kl["awq"] < kl["rtn"], kl


def test_calibration_rows_are_sampled_from_every_task_and_reported(demo_model, calibration, tmp_path):
    """--calib-rows bounds the rows per linear; they are drawn from all the tasks (not the first ones), the count
    is printed, and the draw does not depend on how the engine scheduled the tasks: two runs, the same bytes."""
    runs = []
    for i in range(2):
        proc = quantize(demo_model, tmp_path / f"awq{i}", "awq", "--calib", str(calibration), "--samples", "4",
                        "--max-tiles", "2", "--calib-rows", "24")
        m = re.search(r"calibration [0-9.]+ s: (\d+) of (\d+) rows per linear, sampled from (\d+) tasks", proc.stdout)
        assert m, proc.stdout
        kept, seen, tasks = map(int, m.groups())
        assert kept == 24 and seen > 4 * 24 and tasks == 4, proc.stdout
        runs.append((tmp_path / f"awq{i}" / "model.safetensors").read_bytes())
    assert runs[0] == runs[1]
    # Fewer rows than asked for: all of them, and the line says so.
    proc = quantize(demo_model, tmp_path / "awq-all", "awq", "--calib", str(calibration), "--samples", "4",
                    "--max-tiles", "2", "--calib-rows", "1000000")
    m = re.search(r"(\d+) of (\d+) rows per linear", proc.stdout)
    assert m and m.group(1) == m.group(2) == str(seen), proc.stdout
    bad = subprocess.run([FOVEA_BIN, "quantize", "--model", str(demo_model), "--out", str(tmp_path / "x"),
                          "--method", "awq", "--calib", str(calibration), "--calib-rows", "0"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--calib-rows must be at least 1" in bad.stderr


def test_bad_requests_fail_clearly(demo_model, tmp_path):
    proc = subprocess.run([FOVEA_BIN, "quantize", "--model", str(demo_model), "--out", str(tmp_path / "x"),
                           "--method", "gptq"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "needs calibration data" in proc.stderr
    proc = subprocess.run([FOVEA_BIN, "quantize", "--model", str(demo_model), "--out", str(tmp_path / "x"),
                           "--method", "rtn", "--group", "128"], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "not a multiple of --group 128" in proc.stderr
    (tmp_path / "calib").mkdir()
    (tmp_path / "calib" / "notes.txt").write_text("not an image")
    proc = subprocess.run([FOVEA_BIN, "quantize", "--model", str(demo_model), "--out", str(tmp_path / "x"),
                           "--method", "awq", "--group", "16", "--calib", str(tmp_path / "calib")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "1 of 1 calibration tasks failed" in proc.stderr
    assert "notes.txt" in proc.stderr and "cannot identify image format" in proc.stderr


HF_GOLDEN = str(ROOT / "tests" / "data" / "golden" / "qwen2" / "hf")  # -hf names: vision_tower, multi_modal_projector


def test_hf_checkpoint_names_its_dense_modules_in_its_own_layout(tmp_path):
    """An -hf checkpoint's ViT and projector stay dense, and the config says so in names a loader of that layout
    matches: FP8's compressed-tensors `ignore` regexes cover every dense linear left (transformers took the ViT's
    linears for quantized ones with missing scales when only the original layout's names were listed), and GPTQ's
    block_name_to_quantize is the module path of the decoder's layers, where every packed weight lives."""
    import re
    for method in ("fp8", "rtn"):
        out = tmp_path / method
        proc = subprocess.run([FOVEA_BIN, "quantize", "--model", HF_GOLDEN, "--out", str(out), "--method", method,
                               "--group", "8"], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        config = json.loads((out / "config.json").read_text())["quantization_config"]
        names = list(make_w4_checkpoint.read_safetensors(str(out / "model.safetensors"))[0])
        dense = [n[:-len(".weight")] for n in names if n.endswith(".weight") and
                 ("vision_tower" in n or "multi_modal_projector" in n) and ("linear" in n or "proj" in n or "fc" in n)]
        assert dense, "the golden -hf checkpoint has vision linears"
        if method == "fp8":
            patterns = [re.compile(p[3:]) for p in config["ignore"] if p.startswith("re:")]
            unmatched = [n for n in dense if not any(p.match(n) for p in patterns)]
            assert not unmatched, unmatched
            assert not [n for n in names if n.endswith("weight_scale") and n[:-len(".weight_scale")] in dense]
        else:
            # A module path: transformers (>= 4.52) renames the legacy -hf tensor names on load
            # (language_model.model.* -> model.language_model.*) and matches the block name against the result.
            blocks = config["block_name_to_quantize"]
            packed = [re.sub(r"^language_model\.model\.", "model.language_model.", n) for n in names
                      if n.endswith(".qweight")]
            assert packed and all(n.startswith(blocks + ".") for n in packed), (blocks, packed[:3])


def test_fp8_checkpoint_of_the_trained_model_loads_in_transformers(tmp_path):
    """The trained-weights model quantized to FP8 (compressed-tensors) loads in transformers with every tensor
    accounted for and answers the factual question as the unquantized model does. Needs torch, transformers,
    compressed-tensors and a converted SmolLM2 checkpoint (FOVEA_SMOLLM2); skipped otherwise (CI has no torch)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("compressed_tensors")
    model = os.environ.get("FOVEA_SMOLLM2", "")
    if not os.path.isdir(model):
        pytest.skip("FOVEA_SMOLLM2 is not set to a converted SmolLM2 checkpoint")
    out = tmp_path / "fp8"
    proc = subprocess.run([FOVEA_BIN, "quantize", "--model", model, "--out", str(out), "--method", "fp8"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    sys.path.insert(0, str(ROOT / "tools" / "smollm2"))
    import smollm2_prompts as P
    tok = transformers.AutoTokenizer.from_pretrained(str(out))
    loaded, info = transformers.InternVLForConditionalGeneration.from_pretrained(
        str(out), dtype=torch.bfloat16, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    ids = tok(P.prompt_text(tok, None, "What is the capital of France?", False), return_tensors="pt").input_ids
    answer = loaded.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=8, do_sample=False)
    assert "Paris" in tok.decode(answer[0, ids.shape[1]:])


W4_QUESTIONS = ["What is the capital of France?", "Name a primary colour.", "How many legs does a spider have?",
                "What do bees make?", "Which planet is closest to the sun?", "Translate 'thank you' into French.",
                "Is water wet? Answer yes or no.", "What is 7 times 8?"]


@pytest.mark.parametrize("method", ["gptq", "awq"])
def test_w4_checkpoint_of_the_trained_model_matches_in_transformers(tmp_path, method):
    """The trained-weights model quantized to 4 bits (calibrated, group 64) loads in transformers with every tensor
    accounted for (the ViT and projector dense), and transformers' own kernels for the layout (gptqmodel's, on the
    CPU) give the first-token logits Fovea gives on the same file: both dequantize the same codes, so what is left
    is float rounding. Needs torch, transformers, gptqmodel (+ optimum for GPTQ, accelerate for AWQ) and a
    converted SmolLM2 checkpoint (FOVEA_SMOLLM2); skipped otherwise (CI has none of them)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("gptqmodel")
    pytest.importorskip("optimum" if method == "gptq" else "accelerate")
    model = os.environ.get("FOVEA_SMOLLM2", "")
    if not os.path.isdir(model):
        pytest.skip("FOVEA_SMOLLM2 is not set to a converted SmolLM2 checkpoint")
    calib = tmp_path / "calib.jsonl"
    calib.write_text("".join(json.dumps({"id": f"c{i}", "prompt": q}) + "\n" for i, q in enumerate(
        ["Describe a sunny beach.", "Explain how a bicycle works.", "Write a haiku about snow.",
         "What is photosynthesis?"])))
    out = tmp_path / method
    proc = subprocess.run([FOVEA_BIN, "quantize", "--model", model, "--out", str(out), "--method", method,
                           "--group", "64", "--calib", str(calib), "--samples", "4"],
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": str(i), "prompt": q, "max_tokens": 1}) + "\n"
                             for i, q in enumerate(W4_QUESTIONS)))
    dump = tmp_path / "logits"
    proc = subprocess.run([FOVEA_BIN, "run", "--model", str(out), "--input", str(tasks), "--output",
                           str(tmp_path / "results.jsonl"), "--backend", "cpu", "--quiet", "--dump-logits", str(dump)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    index = json.loads((tmp_path / "logits.json").read_text())
    rows = np.fromfile(tmp_path / "logits.f32", dtype="<f4").reshape(-1, index["vocab"])
    fovea_logits = np.stack([rows[index["rows"][str(i)]] for i in range(len(W4_QUESTIONS))])

    sys.path.insert(0, str(ROOT / "tools" / "smollm2"))
    import smollm2_prompts as P
    tok = transformers.AutoTokenizer.from_pretrained(str(out))
    loaded, info = transformers.InternVLForConditionalGeneration.from_pretrained(
        str(out), dtype=torch.float32, output_loading_info=True, device_map="cpu")
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    reference = []
    with torch.no_grad():
        for q in W4_QUESTIONS:
            ids = tok(P.prompt_text(tok, None, q, False), return_tensors="pt").input_ids
            reference.append(loaded(input_ids=ids, attention_mask=torch.ones_like(ids)).logits[0, -1].float().numpy())
    reference = np.stack(reference)[:, :fovea_logits.shape[1]]
    # Measured on 120 prompts (bench/results/2026-12-02-smollm2-w4-in-transformers.md): GPTQ mean KL 0.00018,
    # top-1 100%; a layout misread (swapped nibbles, zero points off by one, a missed scale) gives KL >> 0.1.
    assert (reference.argmax(axis=1) == fovea_logits.argmax(axis=1)).sum() >= len(W4_QUESTIONS) - 1
    assert mean_kl(reference, fovea_logits) < 0.005
