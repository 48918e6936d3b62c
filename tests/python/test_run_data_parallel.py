"""fovea run over several engines (--replicas N on the CPU, the same dispatch as --gpus): the records equal one
engine's token for token. (An engine failing mid-batch: tests/engine/test_engine_failure_demo.cc, through the
test-only fault hook.)"""
import json
import os
import subprocess

import pytest

Image = pytest.importorskip("PIL.Image")
FOVEA_BIN = os.environ.get("FOVEA_BIN", "")
pytestmark = pytest.mark.skipif(not os.path.exists(FOVEA_BIN), reason="FOVEA_BIN is not set to the fovea binary")


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dp")
    for i in range(8):
        Image.new("RGB", (40 + 3 * i, 30 + 5 * i), ((53 * i) % 256, (29 * i) % 256, 200 - 9 * i)).save(
            folder / f"img{i}.png")
    (folder / "corrupt.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x01" * 40)
    # Two questions per image (the second meets the first's caches on the same engine), answers, a bad image.
    items = [{"id": f"t{i}", "image": f"img{i % 8}.png", "prompt": ["Is there a bed?", "What room?"][i // 8],
              "max_tokens": 3} for i in range(16)]
    items.append({"id": "ans", "image": "img3.png", "prompt": "Is there a bed?", "answers": ["yes", "no"]})
    items.append({"id": "corrupt", "image": "corrupt.png", "prompt": "q"})
    (folder / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in items))
    return folder


def run_job(model, folder, out, extra):
    proc = subprocess.run([FOVEA_BIN, "run", "--model", str(model), "--input", str(folder / "tasks.jsonl"),
                           "--output", str(out), "--backend", "cpu", "--max-tiles", "1", "--kv-blocks", "256",
                           "--concurrency", "6", "--progress-interval", "0.2", *extra],
                          capture_output=True, text=True, timeout=300)
    records = {}
    for line in out.read_text().splitlines():
        r = json.loads(line)
        assert r["id"] not in records, "an id was written twice"
        records[r["id"]] = r
    return proc, records


def comparable(r):
    return {k: v for k, v in r.items() if k != "ms"}


def test_two_replicas_give_the_records_of_one(demo_model, tasks, tmp_path):
    _, one = run_job(demo_model, tasks, tmp_path / "one.jsonl", ["--replicas", "1"])
    proc, two = run_job(demo_model, tasks, tmp_path / "two.jsonl", ["--replicas", "2"])
    assert proc.returncode == 1  # the corrupt image
    assert "2 engines" in proc.stderr and "cpu#0" in proc.stderr and "cpu#1" in proc.stderr
    assert one.keys() == two.keys()
    for key in one:
        assert comparable(one[key]) == comparable(two[key]), key
    assert "error" in two["corrupt"] and "error" not in two["t0"]
    # Both engines took a share, shown on the progress line.
    done = [l for l in proc.stderr.splitlines() if l.startswith("done:")][-1]
    assert "engines cpu#0" in done and " 0%" not in done, done
