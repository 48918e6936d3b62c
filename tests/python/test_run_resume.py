"""fovea run: a batch job killed with SIGKILL and resumed yields every id exactly once; bad images become error
records; the exit status says whether anything failed; usage errors exit 2."""
import io
import json
import os
import signal
import subprocess
import time

import pytest

Image = pytest.importorskip("PIL.Image")
FOVEA_BIN = os.environ.get("FOVEA_BIN", "")
pytestmark = pytest.mark.skipif(not os.path.exists(FOVEA_BIN), reason="FOVEA_BIN is not set to the fovea binary")


def write_images(folder, count):
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        Image.new("RGB", (48 + i, 36 + 2 * i), ((37 * i) % 256, (91 * i) % 256, 120)).save(folder / f"img{i:03d}.png")


def read_records(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data == b"" or data.endswith(b"\n"), "the results file ends in a torn line"
    return [json.loads(line) for line in data.decode().splitlines()]


def run(args, **kw):
    return subprocess.run([FOVEA_BIN, "run", *args], capture_output=True, text=True, timeout=600, **kw)


def test_kill_and_resume_gives_every_id_once(demo_model, tmp_path):
    write_images(tmp_path / "img", 24)
    (tmp_path / "img" / "corrupt.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 30)
    tasks = [{"id": f"task-{i}", "image": f"img/img{i:03d}.png", "prompt": "Is there a bed?", "max_tokens": 2}
             for i in range(24)]
    tasks.append({"id": "corrupt", "image": "img/corrupt.png", "prompt": "q"})
    tasks.append({"id": "missing", "image": "img/none.png", "prompt": "q"})
    tasks.append({"id": 7, "image": "img/img000.png", "prompt": "q", "answers": ["yes", "no"]})
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    out = tmp_path / "results.jsonl"
    args = ["--model", str(demo_model), "--input", str(tmp_path / "tasks.jsonl"), "--output", str(out),
            "--backend", "cpu", "--max-tiles", "1", "--concurrency", "2", "--kv-blocks", "512", "--progress-interval", "0.5"]

    proc = subprocess.Popen([FOVEA_BIN, "run", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 300
    while proc.poll() is None and time.time() < deadline:
        if out.exists() and out.read_bytes().count(b"\n") >= 3:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stderr.close()
    done_before = len(read_records(out))
    print("finished before the kill:", done_before, "of", len(tasks))
    assert done_before >= 1
    # A write cut short by the kill leaves a torn line: simulate the worst case.
    with open(out, "ab") as f:
        f.write(b'{"id": "task-23", "text": "tor')

    resumed = run(args)
    assert resumed.returncode == 1, resumed.stderr  # the corrupt and the missing image failed
    assert "resume:" in resumed.stderr
    records = read_records(out)
    ids = [r["id"] for r in records]
    assert sorted(map(str, ids)) == sorted(str(t["id"]) for t in tasks)
    assert len(ids) == len(set(map(str, ids))), "duplicated ids"
    by_id = {str(r["id"]): r for r in records}
    assert "error" in by_id["corrupt"] and "error" in by_id["missing"]
    # An image that cannot be decoded (by the engine) or read (before it) is invalid_image, in every door.
    assert by_id["corrupt"]["error_kind"] == "invalid_image" and by_id["missing"]["error_kind"] == "invalid_image"
    ok = by_id["task-5"]
    assert "error" not in ok and 1 <= len(ok["tokens"]) <= 2 and isinstance(ok["text"], str) and ok["ms"] >= 0
    assert set(by_id["7"]["logprobs"]) == {"yes", "no"}
    assert all(v <= 0 for v in by_id["7"]["logprobs"].values())

    # Nothing left: a third run does no work, changes nothing, and still reports the failures.
    before = out.read_bytes()
    again = run(args)
    assert again.returncode == 1
    assert out.read_bytes() == before

    # The missing image turns up: --retry-failed runs the failed tasks again (the corrupt one fails again).
    Image.new("RGB", (40, 30), (1, 2, 3)).save(tmp_path / "img" / "none.png")
    retried = run(args + ["--retry-failed"])
    assert retried.returncode == 1, retried.stderr
    by_id = {str(r["id"]): r for r in read_records(out)}
    assert len(by_id) == len(tasks) == len(read_records(out))
    assert "error" not in by_id["missing"] and "error" in by_id["corrupt"]


def test_image_directory_shortcut_and_exit_codes(demo_model, tmp_path):
    write_images(tmp_path / "img", 3)
    out = tmp_path / "out.jsonl"
    ok = run(["--model", str(demo_model), "--images", str(tmp_path / "img"), "--prompt", "Bed?", "--output", str(out),
              "--backend", "cpu", "--max-tiles", "2", "--kv-blocks", "512", "--policy", "compact", "--answers", "A,B", "--max-tokens", "1"])
    assert ok.returncode == 0, ok.stderr
    records = read_records(out)
    assert [r["id"] for r in records] == sorted(r["id"] for r in records) or len(records) == 3
    assert sorted(r["id"] for r in records) == ["img000.png", "img001.png", "img002.png"]
    assert all(set(r["logprobs"]) == {"A", "B"} and len(r["tokens"]) == 1 for r in records)

    usage = [
        ["--model", str(demo_model), "--output", str(out)],                          # no input
        ["--model", str(demo_model), "--images", str(tmp_path), "--output", str(out)],  # no prompt
        ["--model", str(demo_model), "--input", "x", "--output", str(out), "--bogus", "1"],
        ["--model", str(demo_model), "--input", "x", "--output", str(out), "--policy", "odd"],
        ["--model", str(demo_model), "--input", "x", "--output", str(out), "--concurrency", "many"],
    ]
    for args in usage:
        r = run(args)
        assert r.returncode == 2, (args, r.stderr)
        assert "usage:" in r.stderr
