"""The device instrument end to end on the CPU: bench/gpu/run_all.sh --tiny (a float32 rehearsal of the H200 run
at tiny shapes: workload from ../shared's photos, a random tiny InternVL made by transformers, transformers as the
reference, Fovea official and compact, fovea bench, the decode and profile steps, compare, report). Every step
must end "ok", Fovea's first tokens and logits must match transformers float32 (same weights, float32 on both
sides), and the report must carry the floors, the decode figure and the GPU-clock summary (empty without nvidia-smi).
The FP8 ViT's fidelity call (vit_fp8_fidelity.sh) and the ViT-alone timing (vit_alone.py) are rehearsed the same way.
Needs torch and transformers (skipped without them: CI installs neither), ~4 minutes on 2 cores."""
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


def test_tiny_rehearsal_of_the_fp8_vit_fidelity_call(tmp_path):
    """bench/gpu/vit_fp8_fidelity.sh --tiny: a random checkpoint with a 2-layer LLM, Fovea bf16 / fp8 / fp8-all
    with their logits, transformers on the same requests. Float32 on both sides: Fovea's unquantized run matches
    transformers; each FP8 run differs from it, and the ViT's FP8 changes the logits on top of the LLM's."""
    env = dict(os.environ, FOVEA_BIN=FOVEA_BIN, PHOTOS=str(SHARED / "photos"), TOKENIZER=str(TOKENIZER),
               OUT=str(tmp_path / "out"), WORK=str(tmp_path / "work"))
    proc = subprocess.run(["bash", str(ROOT / "bench" / "gpu" / "vit_fp8_fidelity.sh"), "--tiny", "--requests", "4"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    compare = json.loads((tmp_path / "out" / "compare.json").read_text())
    runs = compare["runs"]
    assert {name: run["answered"] for name, run in runs.items()} == {"official": 4, "fp8": 4, "fp8all": 4}
    assert runs["official"]["logits_rel_err_vs_fp32"]["max"] < 1e-4
    for name in ("fp8", "fp8all"):
        assert 0 < runs[name]["logits_rel_err_vs_fovea_official"]["mean"] < 0.3, name
    assert compare["fp8all_vs_fp8"]["logits_rel_err"]["mean"] > 0


def test_tiny_rehearsal_of_the_vit_alone_call(tmp_path):
    """bench/gpu/vit_alone.py on the CPU at tiny shapes: Fovea at each --quantizations value and transformers on
    the same tiles, each with a time per tile and a ratio."""
    model = tmp_path / "model"
    subprocess.run(["python3", "-c", "import sys; sys.path.insert(0, 'bench/gpu'); import family_models as f; "
                    "f.write_model_dir('InternVL2-8B', sys.argv[1], sys.argv[2], sizes='tiny')", str(model),
                    str(SHARED / "tokenizers")], cwd=ROOT, check=True, capture_output=True)
    out = tmp_path / "vit.json"
    proc = subprocess.run(["python3", "bench/gpu/vit_alone.py", "--fovea", FOVEA_BIN, "--model-dir", str(model),
                           "--images", str(SHARED / "photos"), "--tiles", "4", "--reps", "1", "--hold", "0",
                           "--rounds", "1", "--device", "cpu", "--tiny", "--quantizations", "none,fp8-all",
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    best = json.loads(out.read_text())["best"]["ms_per_tile"]
    assert best["fovea"] > 0 and best["transformers"] > 0 and best["ratio"] > 0
    assert best["fovea_fp8-all"] > 0 and best["ratio_fp8-all"] > 0
