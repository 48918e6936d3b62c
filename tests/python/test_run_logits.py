"""fovea run --dump-logits: one row of vocab float32 per successful task, indexed by id; the row's argmax is the
task's first token; failed tasks get no row; a resumed run appends only the new tasks' rows."""
import json
import os
import subprocess

import pytest

np = pytest.importorskip("numpy")
Image = pytest.importorskip("PIL.Image")
FOVEA_BIN = os.environ.get("FOVEA_BIN", "")
pytestmark = pytest.mark.skipif(not os.path.exists(FOVEA_BIN), reason="FOVEA_BIN is not set to the fovea binary")


def write_tasks(folder, ids):
    (folder / "img").mkdir(parents=True, exist_ok=True)
    tasks = []
    for i, task_id in enumerate(ids):
        Image.new("RGB", (40 + 3 * i, 30 + i), ((53 * i) % 256, (17 * i) % 256, 200)).save(folder / "img" / f"{i}.png")
        tasks.append({"id": task_id, "image": f"img/{i}.png", "prompt": "Describe it.", "max_tokens": 2})
    tasks.append({"id": "missing", "image": "img/none.png", "prompt": "q"})
    (folder / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    return folder / "tasks.jsonl"


def run(model, tasks, out, logits):
    return subprocess.run([FOVEA_BIN, "run", "--model", str(model), "--input", str(tasks), "--output", str(out),
                           "--backend", "cpu", "--max-tiles", "1", "--concurrency", "2", "--kv-blocks", "256",
                           "--quiet", "--dump-logits", str(logits)], capture_output=True, text=True, timeout=300)


def load(logits):
    index = json.loads((logits.parent / (logits.name + ".json")).read_text())
    data = np.fromfile(logits.parent / (logits.name + ".f32"), dtype="<f4")
    vocab = index["vocab"]
    assert data.size % vocab == 0
    return index["rows"], data.reshape(-1, vocab)


def test_dump_logits_rows_match_first_tokens_and_resume(demo_model, tmp_path):
    tasks = write_tasks(tmp_path, ["a", 2, "c"])
    out, logits = tmp_path / "results.jsonl", tmp_path / "logits"
    first = run(demo_model, tasks, out, logits)
    assert first.returncode == 1, first.stderr  # the missing image fails
    rows, table = load(logits)
    assert sorted(rows) == ["2", "a", "c"], "one row per successful task, none for the failed one"
    assert table.shape[0] == 3 and table.shape[1] > 100  # the demo vocab (796)
    records = {str(r["id"]): r for r in map(json.loads, out.read_text().splitlines())}
    for key, row in rows.items():
        assert np.isfinite(table[row]).all()
        assert int(np.argmax(table[row])) == records[key]["tokens"][0], key
    assert len({table[r].tobytes() for r in rows.values()}) == 3, "different images give different logits"

    # Rows written after the last index update (a kill in between) are cut off on resume.
    with open(logits.parent / "logits.f32", "ab") as f:
        f.write(b"\x00" * 12)
    more = write_tasks(tmp_path, ["a", 2, "c", "d"])
    second = run(demo_model, more, out, logits)
    assert second.returncode == 1, second.stderr
    rows2, table2 = load(logits)
    assert sorted(rows2) == ["2", "a", "c", "d"] and table2.shape[0] == 4
    assert all(rows2[k] == rows[k] for k in rows), "earlier rows keep their place"
    records = {str(r["id"]): r for r in map(json.loads, out.read_text().splitlines())}
    assert int(np.argmax(table2[rows2["d"]])) == records["d"]["tokens"][0]


def test_dump_logits_needs_a_path(demo_model, tmp_path):
    tasks = write_tasks(tmp_path, ["a"])
    result = subprocess.run([FOVEA_BIN, "run", "--model", str(demo_model), "--input", str(tasks), "--output",
                             str(tmp_path / "r.jsonl"), "--dump-logits"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
