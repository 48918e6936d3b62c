"""The InternVL family on one GPU with dummy weights (issue 22), one call: the listing-photo workload (PERF.md,
workload.py's 200 requests, the first N of them per model), the GEMM rates a long run holds (gemm_peak.py), then
for each model a config-only folder of its real sizes (family_models.py), its memory plan (`fovea inspect
--plan`), and `fovea bench --load-format dummy` on the workload's images, watched by nvidia-smi for the peak GPU
memory. family_report.py turns the steps' JSON into family.json + family.md (QPM, ViT tiles/s, the fraction of
the sustained FLOP floor, GPU memory, the plan) in OUT.

Every step runs under its own limit, capped so that the steps after it keep a minimum and the whole run ends
within --budget seconds; a step that fails or runs out of time is recorded and the others go on. Each fovea runs
in its own process group, killed whole at its limit, so none outlives its step on the GPU.

  family.py --fovea build-gpu/fovea [--budget 540] [--only KEY,...] [--tiny]
--tiny: a CPU rehearsal of the same steps (CPU backend, tiny widths over the real vocabularies and tokenizers,
8 requests, 2 photos a model, no GEMM step: the floor then uses fovea bench's own GEMM figure).
"""
import argparse
import os
import shlex
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402
import family_models  # noqa: E402
import family_report  # noqa: E402
from gpu_sampler import GpuSampler  # noqa: E402

# (key, family row, --quantization, photos, step cap in s). The estimates at the floor on an H200 (sustained
# 660 TFLOP/s bf16, ~1,150 FP8; PERF.md's FLOP model at 12.75 tiles): 8B-class ~60 TFLOP per request, ~0.09 s;
# InternVL2.5-26B ~290 TFLOP, 0.44 s; InternVL3-38B ~370 TFLOP, 0.56 s; InternVL3-78B FP8 ~640 TFLOP, 0.67 s
# (its 6B ViT alone ~150 TFLOP in bf16). At 0.8 of the floor: 96 photos ~12 s, 64 x 26B ~35 s, 64 x 38B ~45 s,
# 48 x 78B ~40 s, each plus ~10-20 s of start-up (process, GEMM probe, dummy weights, 2 warm-up requests); the
# caps leave room for half the floor. With ~45 s of env + workload + GEMM steps: ~250 s expected, ~400 s at 0.5.
# Each timed request computed in full (the floor's FLOP model counts every one): fovea bench's 2 warm-up requests
# are its first 2 images again, which the prefix cache (whole prompts, image included) and the vision cache would
# otherwise serve, 2 of 48 requests for free.
FULL_WORK = ["--no-prefix-cache", "--vision-cache-tiles", "1"]
# The command of the last recorded InternVL2-8B `fovea bench` (run_all.sh's fovea_bench step: 96 images, caches
# on), for the "no slower than today" comparison.
AS_RECORDED = []
MODELS = [
    ("internvl2-8b-as-recorded", "InternVL2-8B", "", 96, 45, AS_RECORDED),
    ("internvl2-8b", "InternVL2-8B", "", 96, 45, FULL_WORK),
    ("internvl3-78b-fp8", "InternVL3-78B", "fp8", 48, 130, FULL_WORK),
    ("internvl2_5-26b", "InternVL2_5-26B", "", 64, 110, FULL_WORK),
    ("internvl3-38b", "InternVL3-38B", "", 64, 120, FULL_WORK),
    ("internvl3_5-8b", "InternVL3_5-8B", "", 96, 50, FULL_WORK),
    ("internvl3_5-8b-fp8", "InternVL3_5-8B", "fp8", 96, 50, FULL_WORK),
]
# Rows for a GPU with less memory than an H200 (an 80 GB H100), run only when --only names them: InternVL3-38B's
# bf16 weights (~77 GB) and InternVL3-78B's FP8 weights (~81 GiB) do not fit there, FP8 and 4-bit do.
SMALLER_GPU_MODELS = [
    ("internvl3-38b-fp8", "InternVL3-38B", "fp8", 64, 120, FULL_WORK),
    ("internvl3-78b-w4a16", "InternVL3-78B", "w4a16", 48, 130, FULL_WORK),
]
MIN_MODEL_STEP = 25  # seconds kept for each model step still to come
REPORT_RESERVE = 10


class Clock:
    def __init__(self, budget):
        self.start, self.budget = time.time(), budget

    def limit(self, cap, steps_after):
        left = self.budget - (time.time() - self.start) - REPORT_RESERVE - MIN_MODEL_STEP * steps_after
        return min(cap, int(left))


_running = []  # the process started by run_logged, while it runs


def kill_group(proc):
    """SIGTERM to the process group, SIGKILL if it lingers."""
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=wait)
            return
        except (ProcessLookupError, subprocess.TimeoutExpired):
            continue


def stop_on_signal(signum, _frame):
    """family.sh's outer timeout (or the device) stopping this driver stops the fovea it started too: that runs in
    its own session, which would otherwise keep the GPU after the call returned."""
    for proc in _running:
        kill_group(proc)
    sys.exit(128 + signum)


def run_logged(cmd, limit, log_path):
    """Runs cmd in its own process group with stdout+stderr to log_path; kills the whole group at `limit`.
    Returns (status, seconds)."""
    t0 = time.time()
    with open(log_path, "ab") as log:
        log.write(("$ " + " ".join(shlex.quote(c) for c in cmd) + "\n").encode())
        log.flush()
        try:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as e:
            log.write(f"cannot start: {e}\n".encode())
            return f"failed({e.__class__.__name__})", 0.0
        _running.append(proc)
        try:
            rc = proc.wait(timeout=limit)
            status = "ok" if rc == 0 else f"failed({rc})"
        except subprocess.TimeoutExpired:
            status = "timeout"
            kill_group(proc)
        finally:
            _running.remove(proc)
    return status, time.time() - t0


class Run:
    def __init__(self, args):
        self.args, self.clock = args, Clock(args.budget)
        self.steps = {}
        os.makedirs(args.work, exist_ok=True)
        os.makedirs(args.out, exist_ok=True)
        for name in os.listdir(args.work):  # an earlier run's results go; nothing else is in WORK
            if name.endswith((".json", ".log", ".txt")):
                os.remove(os.path.join(args.work, name))

    def record(self, name, status, seconds):
        self.steps[name] = {"status": status, "seconds": round(seconds, 1)}
        common.write_json(os.path.join(self.args.work, "steps.json"), self.steps)
        common.log(f"step {name}: {status} ({seconds:.0f} s)")

    def step(self, name, cap, cmd, steps_after):
        limit = self.clock.limit(cap, steps_after)
        if limit < 5:
            return self.record(name, "no-time", 0)
        common.log(f"step {name} (limit {limit} s)")
        status, seconds = run_logged(cmd, limit, os.path.join(self.args.work, name + ".log"))
        print(common.tail(os.path.join(self.args.work, name + ".log"), 800), flush=True)
        self.record(name, status, seconds)

    def model(self, order, key, row, quantization, photos, cap, flags, steps_after):
        """Folder, plan and bench of one model; writes WORK/model_<key>.json whatever happens."""
        a, work = self.args, self.args.work
        limit = self.clock.limit(cap, steps_after)
        count = 2 if a.tiny else photos
        summary = {"order": order, "key": key, "row": row, "quantization": quantization or "none", "photos": count,
                   "flags": flags}
        summary_path = os.path.join(work, f"model_{key}.json")
        if limit < 10:
            common.write_json(summary_path, summary)
            return self.record(key, "no-time", 0)
        common.log(f"step {key}: {row} {quantization or 'bf16'}, {count} photos (limit {limit} s)")
        t0 = time.time()
        model_dir = os.path.join(work, "models", row)
        log_path = os.path.join(work, key + ".log")
        try:
            family_models.write_model_dir(row, model_dir, a.tokenizers, "tiny-vocab" if a.tiny else "real")
            summary["model"] = common.read_json(os.path.join(model_dir, family_models.MARKER))
            summary["dims"] = common.model_dims(common.read_json(os.path.join(model_dir, "config.json")))
        except (OSError, SystemExit, KeyError) as e:
            summary["error"] = f"model folder: {e}"
            common.write_json(summary_path, summary)
            return self.record(key, "failed(model folder)", time.time() - t0)
        plan_cmd = [a.fovea, "inspect", "--model", model_dir, "--plan", "--gpu-memory", a.gpu_memory]
        if quantization:
            plan_cmd += ["--quantization", quantization]
        plan_path = os.path.join(work, key + ".plan.txt")
        plan_status, _ = run_logged(plan_cmd, min(30, limit), plan_path)
        summary["plan_status"], summary["plan"] = plan_status, common.tail(plan_path, 3000)
        bench_json = os.path.join(work, key + ".bench.json")
        cmd = [a.fovea, "bench", "--model", model_dir, "--images", os.path.join(work, "images"), "--count", str(count),
               "--backend", a.backend, "--load-format", "dummy", "--gemm-seconds", "1", "--json", bench_json,
               "--svg", os.path.join(work, key + ".svg")] + flags
        if quantization:
            cmd += ["--quantization", quantization]
        sampler = GpuSampler()
        sampler.start()
        started = time.time()
        status, _ = run_logged(cmd, max(5, limit - (time.time() - t0)), log_path)
        sampler.finish()
        summary.update(status=status, bench=common.read_json(bench_json), command=cmd,
                       peak_gpu_mem_gb=sampler.peak_mib * 1.048576e6 / 1e9 if sampler.peak_mib else None,
                       gpu_clocks=sampler.summary(since=started), log_tail=common.tail(log_path, 1500),
                       memory_line=next((line.strip() for line in common.tail(log_path, 200000).splitlines()
                                         if " memory: weights" in line), None))
        common.write_json(summary_path, summary)
        print(summary["plan"], summary["log_tail"][-700:], sep="\n", flush=True)
        self.record(key, status, time.time() - t0)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fovea", default=os.environ.get("FOVEA_BIN", "build-gpu/fovea"))
    p.add_argument("--photos", default=os.environ.get("PHOTOS", ".carry/photos"))
    p.add_argument("--tokenizers", default=os.environ.get("TOKENIZERS", ".carry/tokenizers"))
    p.add_argument("--work", default=os.environ.get("WORK", "/tmp/fovea_family"))
    p.add_argument("--out", default=os.environ.get("OUT", "out/family"))
    p.add_argument("--results-dir", default="bench/results", help="where the baseline's last recorded run is")
    p.add_argument("--budget", type=int, default=540)
    p.add_argument("--gpu-memory", default="143771MiB", help="the memory the plans are made for (an H200)")
    p.add_argument("--only", default="", help="comma-separated model keys (default: all)")
    p.add_argument("--tiny", action="store_true")
    args = p.parse_args()
    args.backend = "cpu" if args.tiny else "cuda"
    args.fovea = os.path.abspath(args.fovea)
    only = args.only.split(",") if args.only else []
    models = [m for m in MODELS + SMALLER_GPU_MODELS if m[0] in only] if only else MODELS
    if not models:
        common.die(f"--only {args.only}: no such model (keys: "
                   f"{', '.join(m[0] for m in MODELS + SMALLER_GPU_MODELS)})")
    signal.signal(signal.SIGTERM, stop_on_signal)
    signal.signal(signal.SIGINT, stop_on_signal)
    run = Run(args)
    common.log(f"family: {len(models)} models, budget {args.budget} s, work {args.work}, out {args.out}")
    command = "bench/gpu/family.sh " + " ".join(shlex.quote(x) for x in sys.argv[1:])
    run.step("env", 30, [sys.executable, os.path.join(HERE, "env_info.py"), os.path.join(args.work, "env.json"),
                         command, args.fovea], len(models))
    run.step("workload", 60, [sys.executable, os.path.join(HERE, "workload.py"), "--photos", args.photos,
                              "--out", args.work, "--requests", "8" if args.tiny else "200"], len(models))
    if args.tiny:
        run.record("gemm", "skipped (tiny)", 0)
    else:
        run.step("gemm", 45, [sys.executable, os.path.join(HERE, "gemm_peak.py"), "--out",
                              os.path.join(args.work, "gemm.json")], len(models))
    for i, (key, row, quantization, photos, cap, flags) in enumerate(models):
        run.model(i, key, row, quantization, photos, cap, flags, len(models) - i - 1)
    data = family_report.collect(args.work, args.results_dir)
    text = family_report.write_outputs(data, args.out, "family")
    print(text, flush=True)
    ok = all(s["status"] in ("ok", "skipped (tiny)") for s in run.steps.values())
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
