"""The device instrument end to end on the CPU: bench/gpu/run_all.sh --tiny (a float32 rehearsal of the H200 run
at tiny shapes: workload from ../shared's photos, a random tiny InternVL made by transformers, transformers as the
reference, Fovea official and compact, fovea bench, the decode and profile steps, compare, report). Every step
must end "ok", Fovea's first tokens and logits must match transformers float32 (same weights, float32 on both
sides), and the report must carry the floors, the decode figure and the GPU-clock summary (empty without nvidia-smi).
Needs torch and transformers (skipped without them: CI installs neither), ~1 minute on 2 cores."""
import json
import os
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data"
FOVEA_BIN = os.environ.get("FOVEA_BIN", "")
TOKENIZER = SHARED / "tokenizers" / "internlm2" / "tokenizer.model"
pytestmark = [pytest.mark.skipif(not os.path.exists(FOVEA_BIN), reason="FOVEA_BIN is not set to the fovea binary"),
              pytest.mark.skipif(not (SHARED / "photos").is_dir() or not TOKENIZER.is_file(),
                                 reason="../shared/data (photos, internlm2 tokenizer) is absent")]


def test_tiny_rehearsal_of_the_device_run(tmp_path):
    env = dict(os.environ, FOVEA_BIN=FOVEA_BIN, PHOTOS=str(SHARED / "photos"), TOKENIZER=str(TOKENIZER),
               OUT=str(tmp_path / "out"), WORK=str(tmp_path / "work"))
    proc = subprocess.run(["bash", str(ROOT / "bench" / "gpu" / "run_all.sh"), "--tiny", "--requests", "6",
                           "--budget", "500", "--name", "tiny"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=700)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    bad = {name: step["status"] for name, step in report["steps"].items() if step["status"] != "ok"}
    assert not bad, (bad, proc.stdout[-3000:])
    official = report["compare"]["runs"]["official"]
    assert official["answered"] == 6
    assert official["vs_reference"]["agree"] == official["vs_reference"]["n"] == 6
    assert official["logits_argmax_is_token"]["agree"] == 6
    assert official["logits_rel_err_vs_reference"]["max"] < 1e-4  # float32 on both sides
    derived = report["derived"]
    assert derived["floor_qpm_bf16"] > 0 and derived["floor_qpm_bf16_sustained"] is None  # no sustained run on a CPU
    assert (report["bench_decode"]["decode"]["ms_per_step"] or 0) > 0
    assert "samples" in report["fovea"]["official"]["gpu_clocks"]  # the sampler ran (empty without nvidia-smi)
    table = (tmp_path / "out" / "report.md").read_text()
    assert "| Fovea official |" in table and "sustained" not in table
