"""Collects the step results of one benchmark run into one JSON and one table (QPM of each engine, ratios, MFU
against the measured bf16 GEMM peak, the FLOP floor, first-token agreement, ViT ms per tile, preprocessing ms
per image, GPU memory), prints the table, and writes report.md + report.json.

  report.py --work WORK --out-dir OUT                 # on the GPU machine, at the end of run_all.sh
  report.py --from-json OUT/report.json --results-dir bench/results --name h200   # here, after the run:
      writes bench/results/<date>-<name>.md and .json from what came back
  --peers PEERS.json: the peers' results (bench/gpu/peers.sh's OUT/peers.json) in the side-by-side table
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import peers_report  # noqa: E402


def collect(work):
    data = {key: common.read_json(os.path.join(work, f"{key}.json")) for key in
            ("env", "workload", "gemm", "model", "prompt", "ref", "compare", "steps", "gpu_tests",
             "bench_fovea", "bench_decode")}
    data["fovea"] = {}
    for name in sorted(os.listdir(work)):
        # fovea_<run>.json summaries; fovea_<run>_logits.json is a logits dump's index, not a run
        if name.startswith("fovea_") and name.endswith(".json") and not name.endswith("_logits.json"):
            data["fovea"][name[len("fovea_"):-len(".json")]] = common.read_json(os.path.join(work, name))
    # questions.sh's fovea bench runs (K questions per photo) and the peers (peers.sh), when they ran
    data["questions"] = {f"k{k}": common.read_json(os.path.join(work, f"questions_k{k}.json")) for k in (1, 4, 16)}
    data["peers"] = common.read_json(os.path.join(work, "peers.json"))
    data["derived"] = derive(data)
    return data


def mean(xs):
    return sum(xs) / len(xs) if xs else None


def derive(data):
    """FLOP model per request, the floors, and every engine's QPM, ratios and MFU."""
    workload, model, prompt = data["workload"] or {}, data["model"] or {}, data["prompt"] or {}
    gemm, ref, compare = data["gemm"] or {}, data["ref"] or {}, data["compare"] or {}
    dims, text = model.get("dims"), (prompt or {}).get("text_tokens", 81)
    flops = {}
    if dims and workload:
        flops = {r["id"]: common.request_flops(dims, r["official_tiles"], text) for r in workload["requests"]}
    out = {"text_tokens": text, "mean_tflop_per_request": mean(list(flops.values())) / 1e12 if flops else None}
    peak_bf16, peak_fp8 = gemm.get("bf16_peak_tflops"), gemm.get("fp8_peak_tflops")
    per_req = out["mean_tflop_per_request"]
    out["floor_qpm_bf16"] = 60.0 * peak_bf16 / per_req if peak_bf16 and per_req else None
    out["floor_qpm_fp8"] = 60.0 * peak_fp8 / per_req if peak_fp8 and per_req else None
    # The same floors at the rate a GEMM holds for seconds at the power cap (gemm_peak.py --sustain-seconds).
    for kind in ("bf16", "fp8"):
        rate = gemm.get(f"{kind}_sustained_tflops")
        out[f"floor_qpm_{kind}_sustained"] = 60.0 * rate / per_req if rate and per_req else None
    rows = []
    ref_ids = list((ref.get("records") or {}).keys())
    for key, label in (("e2e", "transformers end-to-end"), ("forward_only", "transformers forward-only")):
        if ref.get(key):
            tflop = mean([flops[i] for i in ref_ids if i in flops]) / 1e12 if flops and ref_ids else per_req
            rows.append({"engine": f"{label} (batch {ref[key]['batch']})", "qpm": ref[key]["qpm"],
                         "tflop_per_request": tflop, "requests": ref[key]["requests"]})
    for name, run in sorted(data["fovea"].items(), key=lambda kv: (kv[0] != "official", kv[0])):
        done_ids = [r for r in (run.get("done_ids") or []) if r in flops]
        tflop = mean([flops[i] for i in done_ids]) / 1e12 if done_ids else per_req
        if (compare.get("runs", {}).get(name, {}).get("policy") or name) != "official":
            tflop = None  # another tiling executes other FLOPs: MFU of the official FLOP model would mislead
        rows.append({"engine": f"Fovea {name}", "qpm": run.get("qpm_steady"), "tflop_per_request": tflop,
                     "requests": run.get("done"), "of": run.get("tasks"), "timed_out": run.get("timed_out"),
                     "exit_code": run.get("exit_code"), "gpu_mem_gb": run.get("peak_gpu_mem_gb")})
    base = next((r["qpm"] for r in rows if r["engine"].startswith("transformers end-to-end")), None)
    for row in rows:
        qpm = row["qpm"]
        row["x_transformers_e2e"] = qpm / base if qpm and base else None
        row["x_floor_bf16"] = qpm / out["floor_qpm_bf16"] if qpm and out["floor_qpm_bf16"] else None
        sustained = out["floor_qpm_bf16_sustained"]
        row["x_floor_bf16_sustained"] = qpm / sustained if qpm and sustained else None
        row["mfu"] = (qpm / 60.0 * row["tflop_per_request"] / peak_bf16
                      if qpm and row["tflop_per_request"] and peak_bf16 else None)
    out["rows"] = rows
    return out


def f(x, spec=".1f", none="n/a"):
    """Formats a number; anything else (a missing figure) reads as n/a, so a partial run still renders."""
    return format(x, spec) if isinstance(x, (int, float)) and not isinstance(x, bool) else none


def pct(entry):
    if not entry or not entry.get("n"):
        return "n/a"
    return f"{entry['pct']:.1f}% ({entry['agree']}/{entry['n']})"


def render(data):
    d, env, ref, gemm = data["derived"], data["env"] or {}, data["ref"] or {}, data["gemm"] or {}
    compare, model, workload = data["compare"] or {}, data["model"] or {}, data["workload"] or {}
    lines = [f"# Fovea GPU benchmark {env.get('date', '')}", "",
             f"- commit `{env.get('commit', 'unknown')}`; GPU {env.get('gpu', gemm.get('gpu', '?'))}; "
             f"torch {ref.get('torch', gemm.get('torch', '?'))}, transformers {ref.get('transformers', '?')}",
             f"- command: `{env.get('command', '?')}`",
             f"- model: {model.get('variant', '?')}{' (tiny)' if model.get('tiny') else ''}, "
             f"{f(model.get('params', 0) / 1e9, '.2f')} B params, random (seed {model.get('seed')}, std "
             f"{model.get('std')}, constants perturbed: {model.get('perturbed')})",
             f"- workload: {len(workload.get('requests', []))} listing photos, {workload.get('unique_images')} "
             f"unique, mean {f(workload.get('mean_official_tiles'), '.2f')} official tiles, "
             f"{d.get('text_tokens')} text tokens ({(data['prompt'] or {}).get('template', '?')} template), "
             f"{f(d.get('mean_tflop_per_request'), '.1f')} TFLOP/request",
             "", "| engine | QPM | x transformers e2e | x bf16 floor | MFU | requests |",
             "|---|---|---|---|---|---|",
             f"| FLOP floor bf16 ({f(gemm.get('bf16_peak_tflops'), '.0f')} TFLOP/s) | {f(d.get('floor_qpm_bf16'))} "
             f"| | 1.00 | 100% | |",
             f"| FLOP floor FP8 ({f(gemm.get('fp8_peak_tflops'), '.0f')} TFLOP/s) | {f(d.get('floor_qpm_fp8'))} "
             f"| | | | |"]
    for kind in ("bf16", "fp8"):
        if d.get(f"floor_qpm_{kind}_sustained"):
            held = gemm.get(f"{kind}_sustained") or {}
            clocks = held.get("clocks") or {}
            lines.append(f"| FLOP floor {kind} sustained ({f(gemm.get(f'{kind}_sustained_tflops'), '.0f')} TFLOP/s "
                         f"held {f(held.get('seconds'), '.0f')} s, SM {f(clocks.get('sm_clock_mhz'), '.0f')} MHz, "
                         f"{f(clocks.get('power_w'), '.0f')} W) | {f(d[f'floor_qpm_{kind}_sustained'])} | | | | |")
    for row in d["rows"]:
        done = f"{row['requests']}" + (f"/{row['of']}" if row.get("of") else "")
        if row.get("timed_out"):
            done += " TIMEOUT"
        elif row.get("exit_code") not in (None, 0):
            done += f" exit {row['exit_code']}"
        lines.append(f"| {row['engine']} | {f(row['qpm'])} | {f(row['x_transformers_e2e'], '.2f')} | "
                     f"{f(row['x_floor_bf16'], '.2f')} | {f(row['mfu'] * 100 if row['mfu'] else None, '.1f')}"
                     f"{'%' if row['mfu'] else ''} | "
                     f"{done} |")
    lines += ["", "| check | value |", "|---|---|"]
    tf32 = compare.get("transformers_bf16_vs_fp32")
    dtype = ref.get("dtype", "bf16")
    lines.append(f"| transformers {dtype} vs fp32, first token | {pct(tf32)}; logits rel err "
                 f"{f(((tf32 or {}).get('logits_rel_err') or {}).get('mean'), '.2e')} mean |")
    for name, entry in (compare.get("runs") or {}).items():
        if not entry.get("answered"):
            continue
        if "vs_reference" in entry:
            lines.append(f"| Fovea {name} vs transformers {dtype}, first token | {pct(entry['vs_reference'])}; "
                         f"decisive requests {pct(entry.get('vs_reference_decisive'))} |")
        if "vs_fp32" in entry:
            lines.append(f"| Fovea {name} vs fp32, first token | {pct(entry['vs_fp32'])} |")
        if entry.get("logits_rel_err_vs_reference"):
            lines.append(f"| Fovea {name} logits rel err vs transformers {dtype} | "
                         f"{entry['logits_rel_err_vs_reference']['mean']:.2e} mean, "
                         f"{entry['logits_rel_err_vs_reference']['max']:.2e} max "
                         f"({entry['logits_rel_err_vs_reference']['n']} requests) |")
        if entry.get("logits_argmax_is_token"):
            lines.append(f"| Fovea {name} dumped logits: argmax = its first token | "
                         f"{pct(entry['logits_argmax_is_token'])} |")
        if entry.get("logits_rel_err_vs_fp32"):
            lines.append(f"| Fovea {name} logits rel err vs transformers fp32 | "
                         f"{entry['logits_rel_err_vs_fp32']['mean']:.2e} mean, "
                         f"{entry['logits_rel_err_vs_fp32']['max']:.2e} max ({entry['logits_rel_err_vs_fp32']['n']} "
                         f"requests) |")
        if "vs_fovea_official" in entry:
            lines.append(f"| Fovea {name} vs Fovea official, first token | {pct(entry['vs_fovea_official'])} |")
    lines.append(f"| distinct first tokens (transformers, {compare.get('reference_requests', 0)} requests) | "
                 f"{compare.get('distinct_reference_tokens', 'n/a')}"
                 f"{' — DEGENERATE: constant argmax' if compare.get('reference_tokens_constant') else ''} |")
    e2e = ref.get("e2e") or {}
    if e2e.get("padding_fallback_batches") or e2e.get("non_finite_requests"):
        lines.append(f"| transformers batches redone unpadded (NaN from padding) / non-finite requests | "
                     f"{e2e.get('padding_fallback_batches')} / {e2e.get('non_finite_requests')} |")
    for phase, err in (ref.get("errors") or {}).items():
        lines.append(f"| transformers phase {phase} FAILED | {err[:200]} |")
    vit = ref.get("vit") or {}
    lines.append(f"| ViT + projector, transformers | {f(vit.get('ms_per_tile'), '.3f')} ms/tile (batch "
                 f"{vit.get('tiles', '?')}) |")
    lines.append(f"| Pillow preprocessing in the transformers e2e loop (1 core, decode included) | "
                 f"{f((ref.get('e2e') or {}).get('preprocess_ms_per_image'))} ms/image |")
    lines.append(f"| GPU memory: transformers peak allocated | {f((ref.get('e2e') or {}).get('peak_gpu_mem_gb'))} GB "
                 f"(weights {f(ref.get('weights_gpu_mem_gb'))} GB) |")
    for name, run in sorted(data["fovea"].items()):
        if run.get("qpm_reported"):
            lines.append(f"| Fovea {name}: QPM that fovea run itself reported | {f(run['qpm_reported'])} |")
        lines.append(f"| GPU memory: Fovea {name} (nvidia-smi peak, whole device) | "
                     f"{f(run.get('peak_gpu_mem_gb'))} GB |")
        clocks = run.get("gpu_clocks") or {}
        if clocks.get("samples"):
            lines.append(f"| GPU while Fovea {name} answered: median SM clock / power, share at the power cap | "
                         f"{f(clocks['sm_clock_mhz'], '.0f')} MHz / {f(clocks['power_w'], '.0f')} W, "
                         f"{f(100 * clocks['power_capped_share'], '.0f')}% of {clocks['samples']} samples |")
    for row in d["rows"]:
        if row.get("x_floor_bf16_sustained") and row.get("tflop_per_request"):  # official FLOP model only
            lines.append(f"| {row['engine']} x the sustained bf16 floor | {f(row['x_floor_bf16_sustained'], '.2f')} |")
    bf = gemm.get("bf16_prefill_tflops")
    f8 = gemm.get("fp8_prefill_tflops")
    lines.append(f"| GEMM bf16 / FP8 at prefill shapes (M=8192) | "
                 f"{'-'.join(f(x, '.0f') for x in bf) if bf else 'n/a'} / "
                 f"{'-'.join(f(x, '.0f') for x in f8) if f8 else 'n/a'} TFLOP/s |")
    lines += bench_lines(data.get("bench_fovea"))
    lines += decode_lines(data.get("bench_decode"))
    for test, result in (data.get("gpu_tests") or {}).items():
        lines.append(f"| GPU test {test} | {result['status']} ({result['seconds']:.0f} s) |")
    lines += peers_report.render_lines(data)
    steps = data.get("steps") or {}
    if steps:
        lines += ["", "Steps: " + ", ".join(f"{k} {v.get('status')} ({v.get('seconds', 0):.0f} s)"
                                            for k, v in steps.items())]
    return "\n".join(lines) + "\n"


def bench_lines(bench):
    """Rows from `fovea bench`'s JSON: its own QPM and MFU, and the stage times the table asks for."""
    if not bench:
        return []
    stages = bench.get("stages") or {}
    tiles = bench.get("tiles_per_request") or 0
    vit = (stages.get("vit") or {}).get("ms_per_request")
    pre = (stages.get("preprocess") or {}).get("ms_per_request")
    gemm = bench.get("gemm_peak") or {}
    return [f"| fovea bench ({bench.get('requests')} requests, {bench.get('tiling')}) | {f(bench.get('qpm'))} QPM, "
            f"MFU {f((bench.get('mfu') or 0) * 100)}% of its own GEMM peak {f(gemm.get('tflops'), '.0f')} TFLOP/s |",
            f"| ViT + projector, Fovea (fovea bench stage time) | "
            f"{f(vit / tiles if vit is not None and tiles else None, '.3f')} ms/tile |",
            f"| preprocessing, Fovea (fovea bench stage time, summed over threads) | {f(pre)} ms/image |"]


def decode_lines(bench):
    """The long-output row from the fovea_decode step's `fovea bench` JSON (issue 6: target <= 6 ms/step)."""
    decode = (bench or {}).get("decode")
    if not decode:
        return []
    shape = f"{decode.get('requests')} x {decode.get('max_tokens')} tokens, 1 tile"
    return [f"| decode ms/step ({shape}) | {f(decode.get('ms_per_step'), '.2f')} ms "
            f"(runner alone {f(decode.get('llm_ms_per_step'), '.2f')} ms; "
            f"{f(decode.get('decode_tokens_per_s'), '.0f')} decode tokens/s; "
            f"fewest tokens per request {decode.get('min_output_tokens')}) |"]


def main():
    p = common.report_arguments(__doc__, "report", name="h200",
                                work_help="work folder of a run (collects the step JSONs)",
                                results_dir_help="also writes <date>-<name>.md/.json here")
    p.add_argument("--peers", help="peers.json of bench/gpu/peers.sh (else WORK/peers.json when there)")
    args = p.parse_args()
    data = common.report_input(args, collect)
    if args.peers:
        data["peers"] = common.read_json(args.peers)
        if data["peers"] is None:
            common.die(f"cannot read {args.peers}")
    data["derived"] = derive(data)
    common.write_report(data, render(data), "report", args.out_dir, args.results_dir, args.name)


if __name__ == "__main__":
    main()
