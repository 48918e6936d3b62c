"""Checks Fovea's answers against the transformers reference on the requests both ran with the same (official)
tiling: first greedy token agreement, also restricted to "decisive" requests (the reference's top-1/top-2
logit gap is more than DECISIVE_MARGIN x the logits' RMS, i.e. beyond bf16 noise), and — on the requests also
run in float32 — the agreement of each bf16 engine with float32, the yardstick of what bf16 can reach.

Fovea's first-token logits come from `fovea run --dump-logits WORK/fovea_<name>_logits` (fovea_<name>_logits.json
{"vocab", "rows": {id: row}} + fovea_<name>_logits.f32 rows of vocab float32; an .npz with arrays `ids` [N] and
`logits` [N, vocab] is read too) and are compared with transformers bf16 and float32 by relative error
||a - b|| / ||b||, per request, reported as mean and max.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

DECISIVE_MARGIN = 0.03  # bf16 logits carry ~1e-2 relative error; 3x that is a gap noise does not close


def first_tokens(records):
    out = {}
    for r in records:
        toks = r.get("tokens")
        if not r.get("error") and isinstance(toks, list) and toks:
            out[r["id"]] = int(toks[0])
    return out


def agreement(candidate, truth, ids):
    ids = [i for i in ids if i in candidate and i in truth]
    same = sum(1 for i in ids if candidate[i] == truth[i])
    return {"n": len(ids), "agree": same, "pct": 100.0 * same / len(ids) if ids else None}


def disagreements(candidate, ref_records, limit=10):
    out = []
    for rid, rec in ref_records.items():
        tok = candidate.get(rid)
        if tok is None or tok == rec["token"]:
            continue
        rank = rec["top5_ids"].index(tok) + 1 if tok in rec["top5_ids"] else None
        out.append({"id": rid, "reference": rec["token"], "fovea": tok, "rank_in_reference_top5": rank,
                    "reference_margin_over_rms": rec["margin"] / max(rec["logits_rms"], 1e-12)})
    return sorted(out, key=lambda d: -d["reference_margin_over_rms"])[:limit]


def rel_errors(a_ids, a, b_ids, b):
    import numpy as np
    index = {str(i): n for n, i in enumerate(b_ids)}
    errs = [float(np.linalg.norm(a[n] - b[index[str(i)]]) / max(np.linalg.norm(b[index[str(i)]]), 1e-30))
            for n, i in enumerate(a_ids) if str(i) in index]
    if not errs:
        return None
    return {"n": len(errs), "mean": sum(errs) / len(errs), "max": max(errs)}


def load_npz(path):
    import numpy as np
    if not os.path.exists(path):
        return None
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def load_fovea_logits(work, name):
    """{"ids", "logits"} from fovea run's dump (index + raw rows, memory-mapped), else from an .npz, else None."""
    import json
    import numpy as np
    stem = os.path.join(work, f"fovea_{name}_logits")
    if os.path.exists(stem + ".json") and os.path.exists(stem + ".f32"):
        with open(stem + ".json") as f:
            index = json.load(f)
        vocab, rows = int(index["vocab"]), index["rows"]
        table = np.memmap(stem + ".f32", dtype="<f4", mode="r").reshape(-1, vocab)
        ids = sorted(rows, key=rows.get)
        return {"ids": ids, "logits": np.asarray(table[[rows[i] for i in ids]], dtype=np.float32)}
    return load_npz(stem + ".npz")


def compare(work, runs):
    ref = common.read_json(os.path.join(work, "ref.json"), {})
    ref_records = ref.get("records", {})
    ref_tokens = {rid: rec["token"] for rid, rec in ref_records.items()}
    decisive = [rid for rid, rec in ref_records.items()
                if rec["margin"] > DECISIVE_MARGIN * max(rec["logits_rms"], 1e-12)]
    logits = load_npz(os.path.join(work, "ref_logits.npz"))
    f32_tokens = {}
    result = {"decisive_margin_over_rms": DECISIVE_MARGIN, "reference_requests": len(ref_records),
              "decisive_requests": len(decisive), "runs": {}}
    if ref_records:
        result["distinct_reference_tokens"] = len(set(ref_tokens.values()))
        result["reference_tokens_constant"] = len(set(ref_tokens.values())) == 1 and len(ref_tokens) > 1
    if logits is not None and len(logits["f32_ids"]):
        f32_tokens = {str(i): int(row.argmax()) for i, row in zip(logits["f32_ids"], logits["f32"])}
        result["transformers_bf16_vs_fp32"] = {
            **agreement(ref_tokens, f32_tokens, list(f32_tokens)),
            "logits_rel_err": rel_errors(logits["ids"], logits["bf16"], logits["f32_ids"], logits["f32"])}
    fovea = {name: first_tokens(common.read_jsonl(os.path.join(work, f"fovea_{name}.jsonl"))) for name in runs}
    for name, policy in runs.items():
        tokens = fovea[name]
        entry = {"policy": policy, "answered": len(tokens)}
        if policy == "official" and ref_records:
            entry["vs_reference"] = agreement(tokens, ref_tokens, list(ref_tokens))
            entry["vs_reference_decisive"] = agreement(tokens, ref_tokens, decisive)
            entry["disagreements"] = disagreements(tokens, ref_records)
            if f32_tokens:
                entry["vs_fp32"] = agreement(tokens, f32_tokens, list(f32_tokens))
            dump = load_fovea_logits(work, name)
            if dump is not None and logits is not None:
                # The dump must agree with the run's own tokens: a misread logits buffer shows up here first.
                rows_argmax = {str(i): int(row.argmax()) for i, row in zip(dump["ids"], dump["logits"])}
                entry["logits_argmax_is_token"] = agreement(rows_argmax, {str(k): v for k, v in tokens.items()},
                                                            list(rows_argmax))
                entry["logits_rel_err_vs_reference"] = rel_errors(dump["ids"], dump["logits"], logits["ids"],
                                                                  logits["bf16"])
                if len(logits["f32_ids"]):
                    entry["logits_rel_err_vs_fp32"] = rel_errors(dump["ids"], dump["logits"], logits["f32_ids"],
                                                                 logits["f32"])
        if name != "official" and fovea.get("official"):
            entry["vs_fovea_official"] = agreement(tokens, fovea["official"], list(fovea["official"]))
            # Against Fovea's own bf16 run: what this run's precision alone changes (no engine difference in it).
            dump, official = load_fovea_logits(work, name), load_fovea_logits(work, "official")
            if dump is not None and official is not None:
                entry["logits_rel_err_vs_fovea_official"] = rel_errors(dump["ids"], dump["logits"], official["ids"],
                                                                       official["logits"])
        result["runs"][name] = entry
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", required=True)
    p.add_argument("--runs", default="official:official,compact:compact",
                   help="name:policy pairs of the fovea runs to read (fovea_<name>.jsonl)")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    runs = dict(pair.split(":", 1) for pair in args.runs.split(",") if pair)
    result = compare(args.work, runs)
    common.write_json(args.out, result)
    for name, entry in result["runs"].items():
        ref = entry.get("vs_reference")
        common.log(f"compare {name}: answered {entry['answered']}"
                   + (f", agrees with transformers on {ref['agree']}/{ref['n']}" if ref else ""))
    if result.get("reference_tokens_constant"):
        common.log("compare: WARNING the reference's first token is the same for every request (degenerate logits)")


if __name__ == "__main__":
    main()
