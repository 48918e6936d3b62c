"""fovea bench's long-output decode measurement on CPU with the demo model (small numbers: 8 requests x 16
tokens): EOS is ignored so every request generates max_tokens, and the max_tokens 1 / N passes are reported."""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

Image = pytest.importorskip("PIL.Image")
FOVEA_BIN = os.environ.get("FOVEA_BIN", "")
pytestmark = pytest.mark.skipif(not os.path.exists(FOVEA_BIN), reason="FOVEA_BIN is not set to the fovea binary")


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench_decode")
    subprocess.run([FOVEA_BIN, "make-demo-model", "--out", str(root / "model")], check=True, capture_output=True,
                   timeout=300)
    images = root / "images"
    images.mkdir()
    for i in range(4):
        Image.new("RGB", (64, 48), (50 * i, 30, 200 - 40 * i)).save(images / f"i{i}.png")
    return root


def bench(demo, cwd, *extra):
    args = [FOVEA_BIN, "bench", "--model", str(demo / "model"), "--images", str(demo / "images"), "--backend", "cpu",
            "--kv-blocks", "1024", "--max-tiles", "1", "--gemm-seconds", "0.1", "--warmup", "1", *extra]
    return subprocess.run(args, capture_output=True, text=True, timeout=600, cwd=cwd)


def test_decode_measure_runs_every_request_to_max_tokens(demo, tmp_path):
    r = bench(demo, tmp_path, "--count", "8", "--max-tokens", "16", "--no-cuda-graphs")
    assert r.returncode == 0, r.stderr
    assert "ms per decode step" in r.stdout
    report = json.loads((tmp_path / "bench.json").read_text())
    assert report["requests"] == 8 and report["failed"] == 0
    decode = report["decode"]
    assert decode["requests"] == 8 and decode["max_tokens"] == 16
    # ignore_eos: the demo model's greedy outputs would otherwise stop at whatever EOS the weights produce.
    assert decode["min_output_tokens"] == 16
    assert decode["t1_s"] > 0 and decode["tn_s"] > 0 and decode["llm_ms_1"] > 0 and decode["llm_ms_n"] > 0
    assert decode["ms_per_step"] == pytest.approx((decode["tn_s"] - decode["t1_s"]) * 1e3 / 15, rel=1e-6, abs=1e-9)
    assert decode["llm_ms_per_step"] == pytest.approx((decode["llm_ms_n"] - decode["llm_ms_1"]) / 15, rel=1e-6,
                                                      abs=1e-9)
    assert math.isfinite(decode["decode_tokens_per_s"]) and decode["output_tokens_per_s"] > 0
    # bench/gpu/report.py turns the same JSON into the table's row (the fovea_decode step of run_all.sh).
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "gpu"))
    import report
    rows = report.decode_lines(json.loads((tmp_path / "bench.json").read_text()))
    assert len(rows) == 1 and rows[0].startswith("| decode ms/step (8 x 16 tokens, 1 tile) | ")
    assert report.decode_lines({"qpm": 1.0}) == []


def test_main_run_ignores_eos_and_single_token_runs_have_no_decode_section(demo, tmp_path):
    r = bench(demo, tmp_path, "--count", "4", "--max-tokens", "5", "--decode-reps", "1", "--json", "five.json")
    assert r.returncode == 0, r.stderr
    five = json.loads((tmp_path / "five.json").read_text())
    assert five["output_tokens_per_s"] * five["wall_s"] == pytest.approx(4 * 5)
    assert five["decode"]["min_output_tokens"] == 5
    r = bench(demo, tmp_path, "--count", "2", "--json", "one.json")
    assert r.returncode == 0, r.stderr
    assert "decode" not in json.loads((tmp_path / "one.json").read_text())
    assert "ms per decode step" not in r.stdout
    assert bench(demo, tmp_path, "--count", "2", "--decode-reps", "0").returncode == 2


@pytest.mark.parametrize("command", ["run", "serve", "bench"])
def test_engine_options_in_every_command(command):
    # allow_only runs before --help: an unknown option exits 2, a known one lets --help print the usage (0).
    r = subprocess.run([FOVEA_BIN, command, "--no-cuda-graphs", "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "--no-cuda-graphs" in r.stderr + r.stdout
    bogus = subprocess.run([FOVEA_BIN, command, "--no-such-option", "--help"], capture_output=True, timeout=60)
    assert bogus.returncode == 2
    # One table of engine options (src/cli/engine_options.cc): every command takes and shows each of them.
    for flag in ("--vit-graphs", "--max-step-tokens", "--no-prefix-cache", "--max-queue", "--tiling"):
        r = subprocess.run([FOVEA_BIN, command, flag, "--help"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and flag in r.stderr + r.stdout, flag
