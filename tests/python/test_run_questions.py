"""fovea run with several questions per image: "prompts" gives one record per question (ids "<id>#<k>") with the
same tokens as each question asked in its own task, however the file scatters an image's tasks; "choices"
answers with one of the choices and records every choice's total log-prob."""
import json
import os
import subprocess

import pytest

Image = pytest.importorskip("PIL.Image")
FOVEA_BIN = os.environ.get("FOVEA_BIN", "")
pytestmark = pytest.mark.skipif(not os.path.exists(FOVEA_BIN), reason="FOVEA_BIN is not set to the fovea binary")

QUESTIONS = ["Is there a bed?", "Is there a sofa?", "Is it indoors?"]


def run_tasks(demo_model, tmp_path, name, tasks, concurrency):
    (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    out = tmp_path / f"{name}_out.jsonl"
    proc = subprocess.run([FOVEA_BIN, "run", "--model", str(demo_model), "--input", str(tmp_path / f"{name}.jsonl"),
                           "--output", str(out), "--backend", "cpu", "--max-tiles", "2", "--quiet",
                           "--concurrency", str(concurrency)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}


def test_prompts_and_choices(demo_model, tmp_path):
    for i in range(2):
        Image.new("RGB", (64 + 8 * i, 48), (40 + 90 * i, 120, 200 - 70 * i)).save(tmp_path / f"p{i}.png")
    multi = [{"id": f"p{i}", "image": f"p{i}.png", "prompts": QUESTIONS, "max_tokens": 3} for i in range(2)]
    multi.append({"id": 9, "image": "p0.png", "prompts": ["Is there a bed?"], "choices": ["yes", "no", "not visible"]})
    got = run_tasks(demo_model, tmp_path, "multi", multi, 8)
    # The same questions one task each, scattered (question-major), one at a time.
    single = [{"id": f"p{i}-{k}", "image": f"p{i}.png", "prompt": q, "max_tokens": 3}
              for k, q in enumerate(QUESTIONS) for i in range(2)]
    alone = run_tasks(demo_model, tmp_path, "single", single, 1)
    assert sorted(got) == sorted([f"p{i}#{k}" for i in range(2) for k in range(3)] + ["9#0"])
    for i in range(2):
        for k in range(3):
            assert got[f"p{i}#{k}"]["tokens"] == alone[f"p{i}-{k}"]["tokens"], (i, k)
    chosen = got["9#0"]
    assert set(chosen["choice_logprobs"]) == {"yes", "no", "not visible"}
    best = max(chosen["choice_logprobs"], key=chosen["choice_logprobs"].get)
    assert chosen["text"] == best
    assert all(v < 0 for v in chosen["choice_logprobs"].values())
