#!/usr/bin/env bash
# One device call (the one-H200 kind): the listing-photo workload through `fovea run` on today's single-engine
# path and through the data-parallel dispatcher with one GPU (--gpus 0), A B A, so a drift of the machine shows.
# Also checks that both give the same answers token for token. Builds nothing: run bench/gpu/prepare_carry.sh
# --build here first (the binary and the photos/tokenizer travel in .carry and build-gpu).
#   bench/gpu/data_parallel_check.sh [--requests 200] [--skip-model]
# --skip-model reuses $WORK/model (run_all.sh's, same WORK) on a warm machine: three runs then fit one device call.
# Writes $OUT/data_parallel.json {"default": [qpm, qpm], "gpus0": qpm, "ratio": gpus0 / mean(default), ...}.
set -uo pipefail
cd "$(dirname "$0")/../.."
here=bench/gpu
requests=200 skip_model=0
while [ $# -gt 0 ]; do
  case "$1" in
    --requests) requests=$2; shift 2 ;;
    --skip-model) skip_model=1; shift ;;
    *) echo "data_parallel_check.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
OUT=${OUT:-$PWD/out/dp}
WORK=${WORK:-/tmp/fovea_bench}
FOVEA=${FOVEA_BIN:-build-gpu/fovea}
TOKENIZER=${TOKENIZER:-.carry/tokenizers/internlm2/tokenizer.model}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_PROGRESS_BARS=1 TQDM_DISABLE=1
mkdir -p "$OUT" "$WORK"
python3 $here/workload.py --photos "${PHOTOS:-.carry/photos}" --out "$WORK" --requests "$requests" || exit 1
if [ "$skip_model" = 0 ] || [ ! -f "$WORK/model/config.json" ]; then
  python3 $here/make_model.py --out "$WORK/model" --variant internlm2 --tokenizer "$TOKENIZER" \
    --template internlm2-chat || exit 1
fi
run() {  # run NAME EXTRA_ARGS
  rm -f "$WORK/dp_$1.jsonl"
  python3 $here/fovea_run.py --fovea "$FOVEA" --model "$WORK/model" --tasks "$WORK/tasks.jsonl" \
    --output "$WORK/dp_$1.jsonl" --summary "$OUT/dp_$1.json" --log "$OUT/dp_$1.log" --name "$1" \
    --backend cuda --policy official --extra-args "$2" --timeout 140
}
run default_a ""
run gpus0 "--gpus 0"
run default_b ""
python3 - "$OUT" "$WORK" <<'PY'
import json, sys
out, work = sys.argv[1], sys.argv[2]
s = {n: json.load(open(f"{out}/dp_{n}.json")) for n in ("default_a", "gpus0", "default_b")}
def records(n):
    return {r["id"]: (r.get("tokens"), r.get("error")) for r in map(json.loads, open(f"{work}/dp_{n}.jsonl"))}
a, g = records("default_a"), records("gpus0")
same = sum(1 for k in a if k in g and a[k] == g[k])
qpm = {n: s[n].get("qpm_steady") or 0.0 for n in s}  # 0: that run failed (see its log)
base = (qpm["default_a"] + qpm["default_b"]) / 2
result = {"default": [qpm["default_a"], qpm["default_b"]], "gpus0": qpm["gpus0"],
          "ratio": qpm["gpus0"] / base if base else None, "same_tokens": same, "requests": len(a),
          "gpus0_log_engines": [l for l in open(f"{out}/dp_gpus0.log") if "engines" in l][-1:]}
json.dump(result, open(f"{out}/data_parallel.json", "w"), indent=1)
print(json.dumps(result, indent=1))
PY
