"""fovea run --quantization fp8 (W8A8 E4M3 LLM projections) and fp8-all (the ViT's linears too) on the
CPU reference backend: the jobs complete, their first-token logits stay close to the unquantized run's (E4M3 keeps
3 mantissa bits) and differ from each other (the ViT's quantization is on), and an unknown quantization is
refused before any work with a message naming the choices."""
import json
import os
import subprocess

import pytest

np = pytest.importorskip("numpy")
Image = pytest.importorskip("PIL.Image")
FOVEA_BIN = os.environ.get("FOVEA_BIN", "")
pytestmark = pytest.mark.skipif(not os.path.exists(FOVEA_BIN), reason="FOVEA_BIN is not set to the fovea binary")


def run_one_task(model, tmp_path, name, options, colour=(120, 30, 200)):
    """`fovea run` on the CPU backend over one 64x48 image task "a" with `options` added; its first-token logits
    are dumped to tmp_path/<name>_logits (read them with row()). Returns (the process, that path)."""
    (tmp_path / "img").mkdir(exist_ok=True)
    Image.new("RGB", (64, 48), colour).save(tmp_path / "img" / "a.png")
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "a", "image": "img/a.png", "prompt": "Is there a bed?", "max_tokens": 1}) + "\n")
    logits = tmp_path / f"{name}_logits"
    proc = subprocess.run([FOVEA_BIN, "run", "--model", str(model), "--input", str(tasks), "--output",
                           str(tmp_path / f"{name}.jsonl"), "--backend", "cpu", "--max-tiles", "1", "--kv-blocks",
                           "128", "--quiet", *options, "--dump-logits", str(logits)],
                          capture_output=True, text=True, timeout=300)
    return proc, logits


def run(model, tmp_path, name, quantization):
    return run_one_task(model, tmp_path, name, ["--quantization", quantization])


def row(logits):
    index = json.loads((logits.parent / (logits.name + ".json")).read_text())
    data = np.fromfile(logits.parent / (logits.name + ".f32"), dtype="<f4").reshape(-1, index["vocab"])
    return data[index["rows"]["a"]].astype(np.float64)


def test_fp8_run_stays_close_to_the_unquantized_run(demo_model, tmp_path):
    plain, plain_logits = run(demo_model, tmp_path, "plain", "none")
    fp8, fp8_logits = run(demo_model, tmp_path, "fp8", "fp8")
    all_linears, all_logits = run(demo_model, tmp_path, "fp8_all", "fp8-all")
    for proc in (plain, fp8, all_linears):
        assert proc.returncode == 0, proc.stderr
    a, b, c = row(plain_logits), row(fp8_logits), row(all_logits)
    for quantized in (b, c):
        assert np.isfinite(quantized).all()
        rel = np.linalg.norm(a - quantized) / np.linalg.norm(a)
        assert 0 < rel < 0.08, rel
    assert not np.array_equal(b, c)


def test_unknown_quantization_is_refused(demo_model, tmp_path):
    proc, _ = run(demo_model, tmp_path, "bad", "int3")
    assert proc.returncode != 0
    assert "unknown quantization 'int3' (none, fp8, fp8-all)" in proc.stderr


def test_bench_reports_fp8_and_measures_its_peak_in_fp8(demo_model, tmp_path):
    (tmp_path / "img").mkdir()
    Image.new("RGB", (64, 48), (10, 130, 60)).save(tmp_path / "img" / "a.png")
    out = tmp_path / "bench.json"
    proc = subprocess.run([FOVEA_BIN, "bench", "--model", str(demo_model), "--images", str(tmp_path / "img"),
                           "--backend", "cpu", "--count", "2", "--warmup", "0", "--gemm-seconds", "0.05",
                           "--max-tiles", "1", "--quantization", "fp8", "--json", str(out),
                           "--svg", str(tmp_path / "bench.svg")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["quantization"] == "fp8"
    assert report["gemm_peak"]["dtype"] == "F8_E4M3"
    assert report["failed"] == 0 and report["requests"] == 2
