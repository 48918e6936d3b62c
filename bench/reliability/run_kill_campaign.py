#!/usr/bin/env python3
"""Kill-and-resume campaign for `fovea run` on the CPU demo model (run by hand; figures go to bench/results/):
a batch job is killed with SIGKILL at KILLS random moments, each time resumed with the same command, then run
to the end. Every task id must then appear in the results exactly once, with no torn line.

usage: run_kill_campaign.py --fovea build/fovea [--kills 20] [--tasks 300] [--seed 1] [--json OUT]
"""
import argparse
import json
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from PIL import Image


def read_ids(path):
    if not path.exists():
        return [], False
    data = path.read_bytes()
    torn = bool(data) and not data.endswith(b"\n")
    lines = data.decode(errors="replace").splitlines()
    if torn:
        lines = lines[:-1]
    return [str(json.loads(line)["id"]) for line in lines], torn


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fovea", required=True)
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--tasks", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="fovea_kill_"))
    subprocess.run([args.fovea, "make-demo-model", "--out", str(work / "model")], check=True, capture_output=True)
    (work / "img").mkdir()
    for i in range(16):
        Image.new("RGB", (40 + 3 * i, 30 + 2 * i), ((53 * i) % 256, 80, 160)).save(work / "img" / f"{i}.png")
    tasks = [{"id": f"t{i}", "image": f"img/{i % 16}.png", "prompt": f"question {i}", "max_tokens": 1 + i % 3}
             for i in range(args.tasks)]
    (work / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    out = work / "results.jsonl"
    command = [args.fovea, "run", "--model", str(work / "model"), "--input", str(work / "tasks.jsonl"), "--output",
               str(out), "--backend", "cpu", "--max-tiles", "1", "--concurrency", "4", "--kv-blocks", "512"]
    # The first run without a kill measures the whole job (reported); it is then started over.
    t0 = time.time()
    subprocess.run(command, check=True, capture_output=True)
    full_s = time.time() - t0
    out.unlink()
    kills = []
    for k in range(args.kills):
        done_before, _ = read_ids(out)
        remaining = len(tasks) - len(done_before)
        if remaining <= 0:
            break
        # A random moment: while the model loads (no new record yet) or after up to a third of what is left,
        # plus a few milliseconds so that some kills land in the middle of a write.
        target = rng.choice([0, rng.randint(1, max(1, remaining // 3))])
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t0 = time.time()
        if target == 0:
            time.sleep(rng.uniform(0.0, 1.5))
        else:
            while proc.poll() is None and len(read_ids(out)[0]) < len(done_before) + target:
                time.sleep(0.01)
            time.sleep(rng.uniform(0.0, 0.05))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        done_after, torn = read_ids(out)
        kills.append({"after_s": round(time.time() - t0, 3), "done_before": len(done_before),
                      "done_after": len(done_after), "torn_line": torn})
    final = subprocess.run(command, capture_output=True, text=True)
    ids, torn = read_ids(out)
    counts = Counter(ids)
    report = {
        "tasks": len(tasks), "kills": len(kills), "full_run_s": round(full_s, 2), "kill_log": kills,
        "final_exit_code": final.returncode, "records": len(ids), "distinct_ids": len(counts),
        "duplicated": sorted(i for i, c in counts.items() if c > 1),
        "missing": sorted(set(t["id"] for t in tasks) - set(counts)), "torn_at_end": torn,
    }
    report["pass"] = (final.returncode == 0 and not report["duplicated"] and not report["missing"] and not torn
                      and len(ids) == len(tasks) and len(kills) == args.kills)
    print(json.dumps(report, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    return 0 if report["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
