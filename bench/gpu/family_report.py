"""The family run's table (bench/gpu/family.py): per model QPM, ViT tiles per second, TFLOP per request, the
sustained FLOP floor and the fraction of it, GPU memory and the memory plan, and the InternVL2-8B-shaped row
against the last `fovea bench` of that model recorded in bench/results.

The FLOP model is common.request_flop_parts (PERF.md's, read from each model's config.json) over the tiles of the
requests each model answered and the text tokens fovea bench counted. The floor counts each part at the rate it
runs at, held for seconds at the power cap (gemm_peak.py's sustained bf16 and FP8 rates of the same call): with
--quantization fp8 the LLM's linears at the FP8 rate, the ViT, projector, attention and lm_head at the bf16 one.
Without those rates (the GEMM step failed, or a CPU rehearsal) every part is counted at fovea bench's own GEMM
figure and the table says so.

  family_report.py --work WORK --out-dir OUT          # what family.py does at its end
  family_report.py --from-json FILES_AT/family.json --results-dir bench/results --name family-h200
      # here, after the device call: bench/results/<date>-family-h200.md and .json
"""
import glob
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def model_summaries(work):
    """family.py's model_<key>.json summaries in the order it ran them."""
    found = [common.read_json(os.path.join(work, name)) for name in sorted(os.listdir(work))
             if name.startswith("model_") and name.endswith(".json")]
    return sorted((m for m in found if m), key=lambda m: m.get("order", 0))


def collect(work, results_dir=None):
    data = {key: common.read_json(os.path.join(work, f"{key}.json")) for key in ("env", "workload", "gemm", "steps")}
    requests = (data["workload"] or {}).get("requests") or []
    data["workload"] = {k: v for k, v in (data["workload"] or {}).items() if k != "requests"}
    data["workload"]["official_tiles"] = [r["official_tiles"] for r in requests]
    data["models"] = model_summaries(work)
    data["baseline"] = last_recorded_bench(results_dir) if results_dir else None
    data["derived"] = derive(data)
    return data


def last_recorded_bench(results_dir):
    """The newest bench/results/*.json with a `fovea bench` of the InternVL2-8B-shaped model (run_all.sh's
    internlm2 variant, full size, bf16, official tiling): its QPM, requests and ViT time."""
    best = None
    for path in glob.glob(os.path.join(results_dir, "*.json")):
        data = common.read_json(path)
        if not isinstance(data, dict) or not isinstance(data.get("bench_fovea"), dict):
            continue
        bench, model = data["bench_fovea"], data.get("model") or {}
        if (model.get("variant") != "internlm2" or model.get("tiny") or bench.get("tiling") != "official"
                or (bench.get("quantization") or "none") != "none" or not bench.get("qpm")):
            continue
        date = (data.get("env") or {}).get("date") or ""
        if best is None or date > best["date"]:
            vit = (bench.get("stages") or {}).get("vit") or {}
            tiles = bench.get("tiles_per_request") or 0
            best = {"file": os.path.basename(path), "date": date, "qpm": bench["qpm"],
                    "requests": bench.get("requests"), "tiles_per_request": tiles,
                    "vit_ms_per_tile": vit["ms_per_request"] / tiles if vit.get("ms_per_request") and tiles else None}
    return best


def rates(gemm, bench):
    """TFLOP/s of bf16 and FP8 work for the floor, and where they come from."""
    gemm = gemm or {}
    if gemm.get("bf16_sustained_tflops"):
        return {"bf16": gemm["bf16_sustained_tflops"], "fp8": gemm.get("fp8_sustained_tflops"),
                "source": "gemm_peak.py sustained"}
    own = ((bench or {}).get("gemm_peak") or {}).get("tflops")
    return {"bf16": own, "fp8": own, "source": "fovea bench's own GEMM (one rate)"} if own else None


def derive_model(m, all_tiles, gemm):
    """The figures of one model step; None where the step gave none."""
    bench = m.get("bench") or {}
    ok = (bench.get("requests") or 0) - (bench.get("failed") or 0)
    out = {"key": m["key"], "qpm": bench.get("qpm"), "ok": ok}
    if not bench or ok <= 0 or not m.get("dims"):
        return out
    tiles = all_tiles[: m["photos"]]
    mean_tiles = sum(tiles) / len(tiles) if tiles else None
    prompt_tokens = bench["prompt_tokens_per_s"] * bench["wall_s"] / ok
    text = round(prompt_tokens - common.TOKENS_PER_TILE * mean_tiles) if mean_tiles else None
    out.update(mean_tiles=mean_tiles, bench_tiles=bench.get("tiles_per_request"), text_tokens=text)
    vit_ms = ((bench.get("stages") or {}).get("vit") or {}).get("total_ms")
    total_tiles = (bench.get("tiles_per_request") or 0) * ok
    out["vit_tiles_per_s"] = total_tiles / (vit_ms / 1e3) if vit_ms else None
    out["vit_ms_per_tile"] = vit_ms / total_tiles if vit_ms and total_tiles else None
    if text is None:
        return out
    parts = {}
    for t in tiles:
        for name, flop in common.request_flop_parts(m["dims"], t, text).items():
            parts[name] = parts.get(name, 0.0) + flop / len(tiles)
    out["tflop_per_request"] = sum(parts.values()) / 1e12
    out["tflop_parts"] = {k: v / 1e12 for k, v in parts.items()}
    out["bench_tflop_per_request"] = ((bench.get("flops_per_request") or {}).get("total") or 0) / 1e12 or None
    r = rates(gemm, bench)
    if not r:
        return out
    fp8 = m.get("quantization", "none").startswith("fp8") and r.get("fp8")
    seconds = sum(flop / ((r["fp8"] if fp8 and name == "llm_linear" else r["bf16"]) * 1e12)
                  for name, flop in parts.items())
    out.update(rates=r, floor_qpm=60.0 / seconds, fp8_linears=bool(fp8))
    if out["qpm"]:
        out["x_floor"] = out["qpm"] / out["floor_qpm"]
    return out


def derive(data):
    tiles = data["workload"].get("official_tiles") or []
    rows = [derive_model(m, tiles, data.get("gemm")) for m in data["models"]]
    out = {"rows": rows}
    base, mine = data.get("baseline"), next((r for r in rows if r["key"] == "internvl2-8b-as-recorded"), None)
    if base and mine and mine.get("qpm"):
        out["baseline"] = {"qpm": mine["qpm"], "recorded_qpm": base["qpm"], "ratio": mine["qpm"] / base["qpm"]}
    return out


def f(x, spec=".1f", none="n/a"):
    return format(x, spec) if isinstance(x, (int, float)) and not isinstance(x, bool) else none


def plan_line(m):
    """The plan's row for the weights this step ran (bf16 or fp8), from `fovea inspect --plan`."""
    want = "fp8" if (m.get("quantization") or "none").startswith("fp8") else "bf16"
    for line in (m.get("plan") or "").splitlines():
        if line.strip().startswith(want + " "):
            return " ".join(line.split())
    return m.get("plan_status") or "n/a"


def render(data):
    env, gemm, d = data.get("env") or {}, data.get("gemm") or {}, data["derived"]
    workload = data.get("workload") or {}
    lines = [f"# InternVL family with dummy weights, {env.get('date', '')}", "",
             f"- commit `{env.get('commit', 'unknown')}`; GPU {env.get('gpu', '?')}",
             f"- command: `{env.get('command', '?')}`",
             f"- workload: PERF.md's listing photos ({workload.get('photos', '?')} source photos, seed "
             f"{workload.get('seed', '?')}), the first N of workload.py's requests per model, official tiling, "
             "the bunk-bed question in each model's template, max_tokens 1; `fovea bench --load-format dummy "
             "--no-prefix-cache --vision-cache-tiles 1`: every timed request computed in full (fovea bench warms up "
             "on its first 2 images, which the caches would otherwise serve again), except the row marked "
             "\"as recorded\", run as the last recorded `fovea bench` of that model was (caches on)",
             f"- sustained GEMM (gemm_peak.py, this call): bf16 {f(gemm.get('bf16_sustained_tflops'), '.0f')}, FP8 "
             f"{f(gemm.get('fp8_sustained_tflops'), '.0f')} TFLOP/s; floor = PERF.md's FLOP model from each config, "
             "each part at its own rate (FP8 runs: the LLM's linears at the FP8 rate, the rest bf16)", "",
             "| model | weights | photos | QPM | ViT tiles/s (ms/tile) | TFLOP/request | floor QPM | x floor | "
             "GPU peak GB | step |", "|---|---|---|---|---|---|---|---|---|---|"]
    steps = data.get("steps") or {}
    for m, r in zip(data["models"], d["rows"]):
        step = steps.get(m["key"], {})
        bench = m.get("bench") or {}
        done = f"{r.get('ok', 0)}/{bench.get('requests', m.get('photos'))}" if bench else f"0/{m.get('photos')}"
        weights = m.get("quantization") + ("" if "--no-prefix-cache" in (m.get("flags") or []) else ", as recorded")
        lines.append(f"| {m['row']} ({(m.get('model') or {}).get('llm', '?')}) | {weights} | {done} | "
                     f"{f(r.get('qpm'))} | {f(r.get('vit_tiles_per_s'), '.0f')} ({f(r.get('vit_ms_per_tile'), '.2f')}) | "
                     f"{f(r.get('tflop_per_request'))} | {f(r.get('floor_qpm'))} | {f(r.get('x_floor'), '.2f')} | "
                     f"{f(m.get('peak_gpu_mem_gb'))} | {step.get('status', 'n/a')} ({f(step.get('seconds'), '.0f')} s) |")
    lines += ["", "| model | memory plan for this run's weights (`fovea inspect --plan`) | fovea's start-up line |",
              "|---|---|---|"]
    for m in data["models"]:
        lines.append(f"| {m['key']} | {plan_line(m)} | {m.get('memory_line') or 'n/a'} |")
    lines += ["", "| model | text tokens | tiles/request (workload / bench) | TFLOP/request (this model / fovea "
              "bench's) | rates used |", "|---|---|---|---|---|"]
    for r in d["rows"]:
        rate = r.get("rates") or {}
        lines.append(f"| {r['key']} | {r.get('text_tokens', 'n/a')} | {f(r.get('mean_tiles'), '.2f')} / "
                     f"{f(r.get('bench_tiles'), '.2f')} | {f(r.get('tflop_per_request'))} / "
                     f"{f(r.get('bench_tflop_per_request'))} | {rate.get('source', 'n/a')} |")
    base, cmp_ = data.get("baseline"), d.get("baseline")
    lines.append("")
    if base:
        lines.append(f"InternVL2-8B-shaped, bf16, against the last recorded `fovea bench` of that model "
                     f"({base['file']}, {base['date']}: {f(base['qpm'])} QPM over {base.get('requests')} requests, "
                     f"{f(base.get('vit_ms_per_tile'), '.3f')} ms/tile): "
                     + (f"{f(cmp_['qpm'])} QPM = **{f(cmp_['ratio'], '.3f')}x**" if cmp_ else "no figure this run"))
    else:
        lines.append("No recorded `fovea bench` of the InternVL2-8B-shaped model to compare with.")
    for name, err in ((data.get("gemm") or {}).get("errors") or {}).items():
        lines.append(f"- GEMM {name} failed: {err[:200]}")
    for m in data["models"]:
        if m.get("status") not in (None, "ok"):
            lines.append(f"- {m['key']}: {m.get('status')}; {m.get('error') or ''} log tail: "
                         f"`{' '.join((m.get('log_tail') or '').split()[-40:])}`")
    if steps:
        lines += ["", "Steps: " + ", ".join(f"{k} {v.get('status')} ({f(v.get('seconds'), '.0f')} s)"
                                            for k, v in steps.items())]
    return "\n".join(lines) + "\n"


def write_outputs(data, out_dir, stem):
    return common.write_md_and_json(out_dir, stem, render(data), data)


def main():
    p = common.report_arguments(__doc__, "family", name="family-h200", work_help="family.py's work folder",
                                results_dir="bench/results",
                                results_dir_help="where the baseline's last recorded run is; with --from-json also "
                                "where <date>-<name>.md goes")
    args = p.parse_args()
    data = common.report_input(args, lambda work: collect(work, args.results_dir))
    if args.from_json:
        data["derived"] = derive(data)
    # --work: the results folder is only read (the baseline); the run's page is written from what came back
    common.write_report(data, render(data), "family", args.out_dir, args.results_dir if args.from_json else None,
                        args.name)


if __name__ == "__main__":
    main()
