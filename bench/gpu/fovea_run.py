"""Runs `fovea run` on the workload's tasks and measures it from outside: results are appended to the output
JSONL as they finish, so a watcher that timestamps each new line gives the steady throughput without the model
load, and a sampler of nvidia-smi gives the GPU memory and the SM clock / power while results come in. A run cut
by the timeout still yields QPM over what finished. Writes a JSON summary; the JSONL itself is what compare.py reads.
"""
import argparse
import os
import re
import shlex
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from gpu_sampler import GpuSampler  # noqa: E402


class LineWatcher:
    """Timestamps each complete line appended to the output file."""

    def __init__(self, path):
        self.path, self.offset, self.pending, self.times = path, 0, b"", []

    def poll(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return
        self.offset += len(data)
        now = time.time()
        self.pending += data
        while b"\n" in self.pending:
            _, self.pending = self.pending.split(b"\n", 1)
            self.times.append(now)


def stop_child(proc):
    """SIGTERM (fovea drains and flushes), then SIGKILL if it lingers. Only our own child."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def steady_qpm(records, times):
    """Requests per minute from the first request's submission (its finish time minus its own `ms`) to the last
    finish; falls back to first-to-last finish when `ms` is absent."""
    if len(times) < 2:
        return None
    first_ms = next((r.get("ms") for r in records if isinstance(r.get("ms"), (int, float))), None)
    start = times[0] - first_ms / 1000.0 if first_ms else times[0]
    count = len(times) if first_ms else len(times) - 1
    return 60.0 * count / max(times[-1] - start, 1e-9)


def effective_timeout(requested):
    """run_all.sh exports STEP_DEADLINE (epoch seconds): finish, with fovea stopped cleanly, before the step's
    own timeout would kill this watcher and leave fovea running on the GPU."""
    deadline = os.environ.get("STEP_DEADLINE")
    if deadline:
        return max(1.0, min(requested, float(deadline) - time.time() - 15))
    return requested


def run(args):
    tasks = common.read_jsonl(args.tasks)
    args.timeout = effective_timeout(args.timeout)
    dumps = [args.dump_logits + ext for ext in (".f32", ".json")] if args.dump_logits else []
    for path in [args.output] + dumps:
        if os.path.exists(path):
            os.remove(path)  # fovea run resumes from an existing output (and logits dump): start clean
    cmd = [args.fovea, "run", "--model", args.model, "--input", args.tasks, "--output", args.output,
           "--backend", args.backend, "--policy", args.policy] + shlex.split(args.extra_args)
    if args.dump_logits:
        cmd += ["--dump-logits", args.dump_logits]
    common.log("fovea:", " ".join(shlex.quote(c) for c in cmd))
    sampler, watcher = GpuSampler(), LineWatcher(args.output)
    sampler.start()
    t0 = time.time()
    with open(args.log, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        # If this watcher is told to stop, stop fovea first: it must not outlive the step.
        signal.signal(signal.SIGTERM, lambda *_: (stop_child(proc), sys.exit(143)))
        timed_out = False
        while proc.poll() is None:
            watcher.poll()
            if time.time() - t0 > args.timeout:
                timed_out = True
                stop_child(proc)
                break
            time.sleep(0.05)
    wall = time.time() - t0
    watcher.poll()
    sampler.finish()
    records = common.read_jsonl(args.output)
    errors = [r for r in records if r.get("error")]
    summary = {"name": args.name, "command": cmd, "exit_code": proc.returncode, "timed_out": timed_out,
               "tasks": len(tasks), "done": len(records), "errors": len(errors),
               "done_ids": [r.get("id") for r in records if not r.get("error")],
               "first_errors": [f"{r.get('id')}: {r.get('error')}" for r in errors[:5]], "wall_s": wall,
               "first_result_s": watcher.times[0] - t0 if watcher.times else None,
               "qpm_steady": steady_qpm(records, watcher.times),
               "qpm_wall": 60.0 * len(records) / wall if records else None,
               "peak_gpu_mem_gb": sampler.peak_mib * 1.048576e6 / 1e9 if sampler.peak_mib else None,
               "gpu_clocks": sampler.summary(since=watcher.times[0] if watcher.times else None),
               "qpm_reported": reported_qpm(common.tail(args.log, 4000)),
               "log_tail": common.tail(args.log, 2000)}
    common.write_json(args.summary, summary)
    common.log(f"fovea {args.name}: {len(records)}/{len(tasks)} done ({len(errors)} errors) in {wall:.1f} s, "
               f"steady {fmt(summary['qpm_steady'])} QPM, exit {proc.returncode}{' TIMEOUT' if timed_out else ''}")
    return summary


def reported_qpm(log_text):
    """The QPM of fovea run's own final line ("done: N/M tasks, F failed, TIME, X QPM"), if it printed one."""
    found = re.findall(r"done: .*?([0-9.]+) QPM", log_text)
    return float(found[-1]) if found else None


def fmt(x):
    return "n/a" if x is None else f"{x:.1f}"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fovea", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--tasks", required=True)
    p.add_argument("--output", required=True, help="results JSONL")
    p.add_argument("--summary", required=True, help="JSON summary to write")
    p.add_argument("--log", required=True, help="fovea's stdout+stderr")
    p.add_argument("--name", default="official")
    p.add_argument("--backend", default="cuda")
    p.add_argument("--policy", default="official", choices=["official", "compact"])
    p.add_argument("--extra-args", default="", help="more fovea run options, shell-quoted")
    p.add_argument("--timeout", type=float, default=300)
    p.add_argument("--dump-logits", default="", help="PATH: first-token logits to PATH.f32 + PATH.json")
    args = p.parse_args()
    summary = run(args)
    sys.exit(0 if summary["exit_code"] == 0 and summary["done"] == summary["tasks"] else 1)


if __name__ == "__main__":
    main()
