"""The side-by-side table of issue 26 from one run's files: Fovea, LMDeploy, vLLM, transformers and the FLOP
floor for one question per photo (official tiling, bf16), 4 and 16 questions per photo (QPM per question) and
FP8, with Fovea divided by the best peer; then the work each did (prompt tokens per request), first-token
agreement with transformers and GPU memory. report.py renders it under its own table when WORK/peers.json
(bench/gpu/peers.py) is there, or when given --peers FILE. Pure Python (tests/python/test_peers_report.py).
"""

PEERS = (("lmdeploy", "LMDeploy"), ("vllm", "vLLM"))
ROWS = (("q1", "bf16", "1 question per photo, official tiling, bf16: QPM"),
        ("q4", "bf16", "4 questions per photo: QPM per question"),
        ("q16", "bf16", "16 questions per photo: QPM per question"),
        ("q1", "fp8", "1 question per photo, FP8: QPM"))


def fmt(x, spec=".1f"):
    return format(x, spec) if isinstance(x, (int, float)) and not isinstance(x, bool) else "—"


def peer_phase(peers, engine, precision, phase):
    run = ((peers or {}).get("runs") or {}).get(f"{engine}/{precision}") or {}
    return (run.get("phases") or {}).get(phase) or {}, run


def fovea_figures(data):
    """Fovea's QPM per row: the official run, questions.sh's K = 4 / 16 runs, the FP8 run."""
    fovea = data.get("fovea") or {}
    questions = data.get("questions") or {}
    return {("q1", "bf16"): (fovea.get("official") or {}).get("qpm_steady"),
            ("q4", "bf16"): (questions.get("k4") or {}).get("qpm"),
            ("q16", "bf16"): (questions.get("k16") or {}).get("qpm"),
            ("q1", "fp8"): (fovea.get("fp8") or {}).get("qpm_steady")}


def comparison(data):
    """{row key: {"fovea", engine..., "best_peer", "x_best_peer"}} for the four rows."""
    peers = data.get("peers") or {}
    fovea = fovea_figures(data)
    out = {}
    for phase, precision, _ in ROWS:
        row = {"fovea": fovea[(phase, precision)]}
        for engine, _ in PEERS:
            row[engine] = peer_phase(peers, engine, precision, phase)[0].get("qpm")
        best = max((row[e] for e, _ in PEERS if row[e]), default=None)
        row["best_peer"] = best
        row["x_best_peer"] = row["fovea"] / best if row["fovea"] and best else None
        out[f"{phase}/{precision}"] = row
    return out


def render_lines(data, heading="## Peers (issue 26)"):
    """The tables' lines; `heading` starts the title line (the README gives its own)."""
    peers = data.get("peers")
    if not peers:
        return []
    derived = data.get("derived") or {}
    ref = (data.get("ref") or {}).get("e2e") or {}
    versions = peers.get("versions") or {}
    table = comparison(data)
    head = " | ".join(f"{label} {versions.get(engine, '')}".strip() for engine, label in PEERS)
    lines = ["", f"{heading}: same checkpoint, photos, prompt tokens, greedy, 1 new token", "",
             f"| run | Fovea | {head} | transformers | floor (sustained) | Fovea ÷ best peer |",
             "|---|---|---|---|---|---|---|"]
    for phase, precision, label in ROWS:
        row = table[f"{phase}/{precision}"]
        floor = derived.get(f"floor_qpm_{precision}_sustained")
        tf = ref.get("qpm") if (phase, precision) == ("q1", "bf16") else None
        lines.append(f"| {label} | {fmt(row['fovea'])} | "
                     + " | ".join(fmt(row[e]) for e, _ in PEERS)
                     + f" | {fmt(tf)} | {fmt(floor) if phase == 'q1' else '—'} | {fmt(row['x_best_peer'], '.2f')} |")
    lines += work_lines(data)
    lines += ["", "| peer run | status | settings | prompt tokens / request (Fovea's) | first token = transformers "
              "(decisive) | = Fovea official | GPU peak MiB (nvidia-smi) |", "|---|---|---|---|---|---|---|"]
    for key, run in sorted((peers.get("runs") or {}).items()):
        q1 = (run.get("phases") or {}).get("q1") or {}
        tokens = (f"{fmt(q1.get('prompt_tokens_mean'), '.0f')} ({fmt(q1.get('fovea_prompt_tokens_mean'), '.0f')}; "
                  f"equal in {q1.get('prompt_tokens_equal_fovea')}/{q1.get('requests')})" if q1 else "—")
        settings = ", ".join(f"{k}={v}" for k, v in (run.get("settings") or {}).items()) or "—"
        status = run.get("status", "?")
        if status != "ok" and run.get("log_tail"):
            status += ": " + run["log_tail"].strip().splitlines()[-1][:120].replace("|", "/")
        lines.append(f"| {key} | {status} | {settings} | {tokens} | {agreement(q1.get('vs_reference'))} "
                     f"({agreement(q1.get('vs_reference_decisive'))}) | {agreement(q1.get('vs_fovea_official'))} | "
                     f"{run.get('gpu_memory_peak_mib') or '—'} |")
    return lines


def work_lines(data):
    """How much work each engine did per bf16 row: photos asked, and the share of prompt tokens it computed
    (the rest came from its prefix cache), so that rows on different photo counts or reuse read fairly."""
    fovea = data.get("fovea") or {}
    questions = data.get("questions") or {}
    peers = data.get("peers") or {}
    cells = []
    for phase, k in (("q1", 1), ("q4", 4), ("q16", 16)):
        if phase == "q1":
            f_photos, f_share = (fovea.get("official") or {}).get("tasks"), None
        else:
            q = (questions.get(f"k{k}") or {}).get("questions") or {}
            f_photos, f_share = q.get("images"), q.get("computed_fraction")
        parts = [f"Fovea {f_photos or '—'} photos" + (f", computed {100 * f_share:.1f}%" if f_share else "")]
        for engine, label in PEERS:
            p = peer_phase(peers, engine, "bf16", phase)[0]
            if not p:
                continue
            share = None
            if p.get("cached_prompt_tokens_mean") is not None and p.get("prompt_tokens_mean"):
                share = 1.0 - p["cached_prompt_tokens_mean"] / p["prompt_tokens_mean"]
            parts.append(f"{label} {p.get('photos', '—')}" + (f", computed {100 * share:.1f}%" if share is not None
                                                               else ""))
        cells.append(f"{k} question{'s' if k > 1 else ''}: " + "; ".join(parts))
    return ["", "Work per row (photos asked; share of prompt tokens computed, the rest reused from a prefix cache): "
            + " · ".join(cells) + "."]


def agreement(entry):
    if not entry or not entry.get("n"):
        return "—"
    return f"{entry['agree']}/{entry['n']}"
