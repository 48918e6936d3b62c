#!/usr/bin/env python3
"""Ray actor throughput vs the same engine fed directly (issue 24: an actor must keep its engine full across
batches; target: actor >= 0.95 x direct).

    PYTHONPATH=build-cpu/python python3 bench/ray/ray_throughput.py --fovea build-cpu/fovea --out bench/results/NAME

Both sides run the same CPU engine (demo model unless --model) on the same N distinct noise images (no cache can
skip work): "direct" is one Engine.generate over all rows, timed around the call (model load excluded); "actor" is
Ray Data's map_batches(fovea.ray.Predictor, concurrency=1) over the same rows in batches of --batch-size, timed
inside the actor from the first batch's arrival to the last batch's return (actor start and model load excluded,
Ray's feeding gaps included). "actor-sync" is the same with a synchronous __call__ (the Predictor before issue
24), which drains the engine between batches; "direct-batch" is the direct call with only --batch-size requests
in flight (Engine(concurrency=...)), the engine load the synchronous actor gives at best. Sides alternate for
--rounds rounds and the medians are compared, so a change of load on a shared machine hits all of them.
Writes NAME.json and NAME.md.
"""
import argparse
import datetime
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from PIL import Image

import fovea
import fovea.ray


class TimedPredictor(fovea.ray.Predictor):
    """fovea.ray.Predictor adding when its batch arrived and left (actor clock), per row."""

    async def __call__(self, batch):
        start = time.monotonic()
        out = await super().__call__(batch)
        return _stamped(out, start)


class SyncTimedPredictor(fovea.ray.Predictor):
    """The synchronous __call__ the Predictor had: one batch at a time, the engine drains in between."""

    def __call__(self, batch):
        start = time.monotonic()
        return _stamped(self.predict(batch), start)


def _stamped(out, start):
    end = time.monotonic()
    count = len(out["answer"])
    out["t_start"] = np.full(count, start)
    out["t_end"] = np.full(count, end)
    return out


def make_rows(count, size, seed):
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(count):
        pixels = rng.integers(0, 256, (size[1], size[0], 3), np.uint8)
        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, "PNG")
        rows.append({"image": buffer.getvalue(), "prompt": "Describe the picture."})
    return rows


def run_direct(model, rows, options, max_tokens, concurrency=64):
    with fovea.Engine(model, concurrency=concurrency, **options) as llm:
        requests = [fovea.Request(image=r["image"], prompt=r["prompt"], max_tokens=max_tokens, ignore_eos=True)
                    for r in rows]
        start = time.monotonic()
        results = llm.generate(requests)
        seconds = time.monotonic() - start
    assert all(r.error is None for r in results), [r.error for r in results if r.error][:3]
    return len(rows) / seconds


def run_actor(ray, model, rows, options, max_tokens, batch_size, predictor):
    ds = ray.data.from_items(rows, override_num_blocks=max(1, len(rows) // batch_size))
    kwargs = dict(model=model, max_tokens=max_tokens, sampling={"ignore_eos": True}, **options)
    ds = ds.map_batches(predictor, fn_constructor_kwargs=kwargs, concurrency=1, batch_size=batch_size, num_cpus=1)
    out = ds.select_columns(["error", "t_start", "t_end"]).to_pandas()
    assert len(out) == len(rows) and out["error"].isna().all(), out["error"].dropna().head(3).tolist()
    return len(rows) / (out["t_end"].max() - out["t_start"].min())


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fovea", default=os.environ.get("FOVEA_BIN", "build-cpu/fovea"), help="to make the demo model")
    p.add_argument("--model", default=None, help="a model directory (default: a fresh demo model)")
    p.add_argument("--rows", type=int, default=192)
    p.add_argument("--image-size", default="448x448")
    p.add_argument("--max-tiles", type=int, default=1)
    p.add_argument("--max-tokens", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--replicas", type=int, default=1)
    p.add_argument("--preprocess-threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", required=True, help="results path without extension")
    args = p.parse_args()

    import ray
    work = tempfile.mkdtemp(prefix="fovea_ray_bench_")
    model = args.model
    if model is None:
        model = os.path.join(work, "demo")
        subprocess.run([args.fovea, "make-demo-model", "--out", model], check=True, capture_output=True)
    size = tuple(int(v) for v in args.image_size.split("x"))
    rows = make_rows(args.rows, size, seed=7)
    options = dict(backend="cpu", max_tiles=args.max_tiles, kv_blocks=2048, replicas=args.replicas,
                   preprocess_threads=args.preprocess_threads)
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(fovea.__file__)))
    bench_dir = os.path.dirname(os.path.abspath(__file__))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join([package_dir, bench_dir])}})
    ray.data.DataContext.get_current().enable_progress_bars = False
    runs = {"direct": [], "actor": [], "direct-batch": [], "actor-sync": []}
    try:
        for round_ in range(args.rounds):
            runs["direct"].append(run_direct(model, rows, options, args.max_tokens))
            runs["actor"].append(run_actor(ray, model, rows, options, args.max_tokens, args.batch_size,
                                           TimedPredictor))
            runs["direct-batch"].append(run_direct(model, rows, options, args.max_tokens, args.batch_size))
            runs["actor-sync"].append(run_actor(ray, model, rows, options, args.max_tokens, args.batch_size,
                                                SyncTimedPredictor))
            print(f"round {round_ + 1}: " + ", ".join(f"{k} {v[-1]:.1f} rows/s" for k, v in runs.items()),
                  file=sys.stderr)
    finally:
        ray.shutdown()
    medians = {k: statistics.median(v) for k, v in runs.items()}
    report = {
        "date": datetime.date.today().isoformat(),
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                 text=True).stdout.strip(),
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
        "load_average": os.getloadavg(),
        "settings": vars(args) | {"engine": options},
        "rows_per_second": runs,
        "median": medians,
        "actor_over_direct": medians["actor"] / medians["direct"],
        "sync_actor_over_direct": medians["actor-sync"] / medians["direct"],
        "sync_actor_over_direct_batch": medians["actor-sync"] / medians["direct-batch"],
    }
    with open(args.out + ".json", "w") as f:
        json.dump(report, f, indent=2)
    lines = [f"# Ray actor vs direct engine, CPU ({report['date']}, commit {report['commit']})", "",
             f"Command: `{report['command']}`", "",
             f"{args.rows} distinct {args.image_size} noise PNGs, max_tiles {args.max_tiles}, {args.max_tokens} tokens "
             f"(ignore_eos), batch_size {args.batch_size}, 1 actor, engine {options}; {args.rounds} alternating "
             "rounds, "
             f"medians. Load average at the end: {', '.join(f'{x:.1f}' for x in report['load_average'])}.", "",
             "| side | rows/s per round | median | vs direct |", "|---|---|---|---|"]
    for name, values in runs.items():
        lines.append(f"| {name} | {', '.join(f'{v:.1f}' for v in values)} | {medians[name]:.1f} | "
                     f"{medians[name] / medians['direct']:.3f} |")
    lines += ["", f"Target: actor ≥ 0.95 × direct → {report['actor_over_direct']:.3f} "
              f"({'met' if report['actor_over_direct'] >= 0.95 else 'NOT met'})."]
    with open(args.out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
