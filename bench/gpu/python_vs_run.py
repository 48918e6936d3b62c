"""The listing-photo workload through the Python API (fovea.Engine.stream) and through `fovea run`, on the same
tasks, in one invocation: QPM of both, measured the same way (from the first request's submission, i.e. its
finish time minus its own `ms`, to the last finish; the model load is outside), and their ratio (issue 15's
target: Python >= 0.98 x fovea run). Runs alternate (run, python, run, python, ...) so drift hits both; fovea run
goes first, before this process holds any GPU memory, and the Python engine is closed before each fovea run.

    PYTHONPATH=build-gpu/python python3 bench/gpu/python_vs_run.py --fovea build-gpu/fovea --model WORK/model \
        --tasks WORK/tasks.jsonl --work WORK --out OUT/python_vs_run.json [--repeats 2]
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import fovea_run  # noqa: E402


def run_cli(args, k):
    ns = argparse.Namespace(fovea=args.fovea, model=args.model, tasks=args.tasks, name=f"run{k}",
                            output=os.path.join(args.work, f"pyvs_run{k}.jsonl"),
                            summary=os.path.join(args.work, f"pyvs_run{k}.json"),
                            log=os.path.join(args.work, f"pyvs_run{k}.log"), backend=args.backend,
                            policy=args.policy, timeout=args.timeout, dump_logits="",
                            extra_args=f"--concurrency {args.concurrency} --max-tiles {args.max_tiles} {args.extra_args}")
    summary = fovea_run.run(ns)
    records = {str(r["id"]): r for r in common.read_jsonl(ns.output)}
    return summary["qpm_steady"], summary["done"], summary["errors"], records


def run_python(args, tasks):
    import fovea
    base = os.path.dirname(os.path.abspath(args.tasks))
    requests = [fovea.Request(image=t["image"] if os.path.isabs(t["image"]) else os.path.join(base, t["image"]),
                              prompt=t.get("prompt", ""), max_tokens=t.get("max_tokens", 1), answers=t.get("answers"))
                for t in tasks]
    t0 = time.time()
    llm = fovea.Engine(args.model, backend=args.backend, tiling=args.policy, concurrency=args.concurrency,
                       max_tiles=args.max_tiles or None)
    common.log(f"python: engine loaded in {time.time() - t0:.1f} s")
    finished, times = [], []
    start = time.time()
    for result in llm.stream(requests):
        finished.append(result)
        times.append(time.time())
        if time.time() - start > args.timeout:
            break
    llm.close()
    records = [{"ms": r.ms} for r in finished]
    qpm = fovea_run.steady_qpm(records, times)
    by_id = {str(tasks[r.index]["id"]): r for r in finished}
    errors = sum(r.error is not None for r in finished)
    common.log(f"python: {len(finished)}/{len(tasks)} done ({errors} errors), steady {fovea_run.fmt(qpm)} QPM")
    return qpm, len(finished), errors, by_id


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fovea", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--tasks", required=True)
    p.add_argument("--work", required=True, help="scratch folder for fovea run's outputs")
    p.add_argument("--out", required=True, help="JSON summary")
    p.add_argument("--backend", default="cuda")
    p.add_argument("--policy", default="official", choices=["official", "compact"])
    p.add_argument("--concurrency", type=int, default=64, help="as fovea run's default --concurrency")
    p.add_argument("--max-tiles", type=int, default=0, help="0: the model's max_dynamic_patch")
    p.add_argument("--extra-args", default="", help="more fovea run options (not for the Python side), shell-quoted")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--timeout", type=float, default=120)
    args = p.parse_args()
    tasks = common.read_jsonl(args.tasks)
    runs, pythons = [], []
    same_tokens = compared = 0
    for k in range(args.repeats):
        qpm, done, errors, records = run_cli(args, k)
        runs.append({"qpm": qpm, "done": done, "errors": errors})
        qpm, done, errors, results = run_python(args, tasks)
        pythons.append({"qpm": qpm, "done": done, "errors": errors})
        for key, result in results.items():  # the same tokens (the GPU's batching may differ run to run)
            if key in records and result.error is None and not records[key].get("error"):
                compared += 1
                same_tokens += result.tokens == records[key]["tokens"]
    best = lambda xs: max((x["qpm"] for x in xs if x["qpm"]), default=None)  # noqa: E731
    median = lambda xs: statistics.median([x["qpm"] for x in xs if x["qpm"]] or [0]) or None  # noqa: E731
    summary = {"tasks": len(tasks), "fovea_run": runs, "python": pythons,
               "qpm_run_best": best(runs), "qpm_python_best": best(pythons),
               "qpm_run_median": median(runs), "qpm_python_median": median(pythons),
               "ratio_best": best(pythons) / best(runs) if best(runs) and best(pythons) else None,
               "ratio_median": median(pythons) / median(runs) if median(runs) and median(pythons) else None,
               "same_tokens": f"{same_tokens}/{compared}", "command": " ".join(sys.argv)}
    common.write_json(args.out, summary)
    common.log(f"python vs fovea run: {fovea_run.fmt(summary['qpm_python_best'])} vs "
               f"{fovea_run.fmt(summary['qpm_run_best'])} QPM (best of {args.repeats}), ratio best "
               f"{summary['ratio_best']}, median {summary['ratio_median']}; same tokens {summary['same_tokens']}")
    ok = summary["ratio_best"] is not None and all(x["done"] == len(tasks) for x in runs + pythons)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
