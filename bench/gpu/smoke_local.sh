#!/usr/bin/env bash
# Local rehearsal of the GPU benchmark on a CPU (not part of CI: it needs torch + transformers): runs
# run_all.sh --tiny end to end — tiny random model, 6 requests, fovea on the CPU backend — and checks that every
# step succeeded and that the report holds the table and the agreement figures. Uses the real fovea binary when
# it has `run` and `tokenize` (FOVEA_BIN, default build/fovea), else bench/gpu/testing/fake_fovea.py
# (which answers with transformers, so agreement must be 100%).
set -euo pipefail
cd "$(dirname "$0")/../.."
shared=${SHARED:-../shared}
fovea=${FOVEA_BIN:-build/fovea}
# The help text is captured first: `fovea | grep -q` under pipefail fails whenever grep exits before fovea writes.
commands=$([ -x "$fovea" ] && "$fovea" 2>&1 || true)
if ! { grep -q '^  run ' <<<"$commands" && grep -q '^  tokenize ' <<<"$commands"; }; then
  echo "smoke: $fovea lacks run/tokenize; using the fake" >&2
  fovea=bench/gpu/testing/fake_fovea.py
fi
skip=""
[ "$fovea" != bench/gpu/testing/fake_fovea.py ] || skip="--skip fovea_bench"  # the fake has no `bench`
out=${SMOKE_OUT:-/tmp/fovea_bench_smoke}
rm -rf "$out"
OUT=$out/out WORK=$out/work FOVEA_BIN=$fovea PHOTOS=$shared/data/photos \
  TOKENIZER=$shared/data/tokenizers/internlm2/tokenizer.model \
  bench/gpu/run_all.sh --tiny --requests 6 --ref-requests 4 --batch 2 --fp32-requests 2 --budget 900 --name smoke $skip
python3 - "$out/out/report.json" "$fovea" <<'PY'
import json, sys
report, fovea = json.load(open(sys.argv[1])), sys.argv[2]
steps = report["steps"]
bad = {k: v["status"] for k, v in steps.items() if v["status"] != "ok"}
assert not bad, f"steps not ok: {bad}"
ref, cmp = report["ref"], report["compare"]
assert ref["e2e"]["requests"] == 4 and ref["forward_only"]["qpm"] > 0 and ref["vit"]["ms_per_tile"] > 0, ref.keys()
official = cmp["runs"]["official"]["vs_reference"]
assert official["n"] == 4, official
if fovea.endswith("fake_fovea.py"):
    assert official["agree"] == 4, f"the fake answers with transformers itself: {official}"
rows = {r["engine"]: r for r in report["derived"]["rows"]}
assert any(k.startswith("Fovea official") and v["qpm"] for k, v in rows.items()), rows
assert report["derived"]["floor_qpm_bf16"] > 0
if not fovea.endswith("fake_fovea.py"):
    assert report["bench_fovea"]["requests"] > 0, report.get("bench_fovea")  # run_all.sh sets its --count
    # Float32 on both sides at tiny shapes: the dumped logits must be close to transformers' (summation order).
    errs = {k: cmp["runs"]["official"].get(f"logits_rel_err_vs_{k}") for k in ("reference", "fp32")}
    assert errs["reference"] and errs["reference"]["n"] == 4 and errs["reference"]["max"] < 1e-2, errs
    assert errs["fp32"] and errs["fp32"]["n"] == 2 and errs["fp32"]["max"] < 1e-2, errs
    consistent = cmp["runs"]["official"]["logits_argmax_is_token"]
    assert consistent["n"] == 6 and consistent["agree"] == 6, consistent
    print(f"smoke: logits rel err vs transformers max {errs['reference']['max']:.2e}")
print(f"smoke: ok (official agreement {official['agree']}/{official['n']}, fovea = {fovea})")
PY
