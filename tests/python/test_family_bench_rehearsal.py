"""bench/gpu/family.sh --tiny: the whole family GPU call rehearsed on the CPU (every model step of the device
run, CPU backend, tiny widths over each model's real vocabulary, special token ids and tokenizer files, 2 photos a
model), so the one H200 call cannot fail on a typo. Checks against outside figures: the InternVL2-8B prompt has
the 81 text tokens PERF.md counts with the InternLM2 tokenizer; the workload's official tile counts (Python's
port of InternVL's tiling) equal what fovea bench tiled; the Python FLOP model (bench/gpu/common.py, read from each
config.json) agrees with fovea bench's own C++ one; then family_report.py --from-json writes the results page.
Needs FOVEA_BIN and ../shared/data (photos, tokenizers; or FOVEA_SHARED_DATA); ~2 minutes on 2 cores."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("FOVEA_SHARED_DATA", ROOT.parent / "shared" / "data"))  # a worktree: set it
FOVEA_BIN = os.environ.get("FOVEA_BIN", "")
pytestmark = [pytest.mark.skipif(not os.path.exists(FOVEA_BIN), reason="FOVEA_BIN is not set to the fovea binary"),
              pytest.mark.skipif(not (SHARED / "photos").is_dir() or not (SHARED / "tokenizers" / "qwen2").is_dir(),
                                 reason="../shared/data (photos, tokenizers) is absent")]
sys.path.insert(0, str(ROOT / "bench" / "gpu"))
import family  # noqa: E402


def test_tiny_rehearsal_of_the_family_call(tmp_path):
    out, results = tmp_path / "out", tmp_path / "results"
    env = dict(os.environ, FOVEA_BIN=FOVEA_BIN, PHOTOS=str(SHARED / "photos"), TOKENIZERS=str(SHARED / "tokenizers"),
               OUT=str(out), WORK=str(tmp_path / "work"))
    proc = subprocess.run(["bash", str(ROOT / "bench" / "gpu" / "family.sh"), "--tiny"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    data = json.loads((out / "family.json").read_text())
    assert {k: v["status"] for k, v in data["steps"].items()} == {
        "env": "ok", "workload": "ok", "gemm": "skipped (tiny)", **{m[0]: "ok" for m in family.MODELS}}
    assert [m["key"] for m in data["models"]] == [m[0] for m in family.MODELS]
    rows = {r["key"]: r for r in data["derived"]["rows"]}
    for m in data["models"]:
        row = rows[m["key"]]
        assert m["bench"]["requests"] == 2 and m["bench"]["failed"] == 0, m["key"]
        assert m["bench"]["quantization"] == m["quantization"]
        assert row["mean_tiles"] == pytest.approx(row["bench_tiles"]), m["key"]  # Python's tiling = Fovea's
        assert row["tflop_per_request"] == pytest.approx(row["bench_tflop_per_request"], rel=0.01), m["key"]
        assert row["qpm"] > 0 and row["x_floor"] > 0, m["key"]
        if m["flags"] == family.FULL_WORK:  # every timed request computed: the ViT ran for each
            assert row["vit_tiles_per_s"] > 0, m["key"]
        assert row["rates"]["source"].startswith("fovea bench's own GEMM")  # no sustained GEMM on a CPU
        assert "fits" in family_report_plan(m), m["plan"]
        assert m["memory_line"] and "memory: weights" in m["memory_line"], m["log_tail"]
    assert rows["internvl2-8b"]["text_tokens"] == 81  # PERF.md: the question in InternVL2-8B's template
    # The caches serve the warm-up's images again unless turned off: the as-recorded run computes less.
    assert rows["internvl2-8b-as-recorded"]["qpm"] > rows["internvl2-8b"]["qpm"]
    assert rows["internvl3_5-8b-fp8"]["fp8_linears"] and not rows["internvl3_5-8b"]["fp8_linears"]
    assert data["baseline"]["file"].endswith(".json") and data["baseline"]["qpm"] > 0  # found in bench/results
    assert data["derived"]["baseline"]["qpm"] == rows["internvl2-8b-as-recorded"]["qpm"]
    table = (out / "family.md").read_text()
    for m in family.MODELS:
        assert f"| {m[1]} (" in table
    # Here, after the device call: the results page from what came back.
    subprocess.run([sys.executable, str(ROOT / "bench" / "gpu" / "family_report.py"), "--from-json",
                    str(out / "family.json"), "--results-dir", str(results), "--name", "family-tiny"],
                   check=True, capture_output=True, timeout=60)
    date = data["env"]["date"][:10]
    assert (results / f"{date}-family-tiny.md").read_text() == table


def family_report_plan(model):
    import family_report
    return family_report.plan_line(model)
