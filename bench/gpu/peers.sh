#!/usr/bin/env bash
# The peers in the instrument (issue 26), on the GPU machine, in the calls that follow bench/gpu/run_all.sh on the
# same warm machine (its WORK holds the model, the photos' tasks, Fovea's prompt ids and the reference tokens):
#   bench/gpu/peers.sh [--stash .carry_peers/cN] [--engines lmdeploy,vllm] [--precisions bf16,fp8]
#                      [--vllm-eager] [--no-run] [--budget 560] [--photos 200] [--k-photos 64] [--k16-photos 32]
# Copies the carry's parts into /tmp/peers/stash; every package set whose parts are then all there is joined,
# checked against its sha256 and unpacked (bench/gpu/peers_stash.py). Then runs, each under the time left,
# the engines named by --engines, or (without it) those this carry completed: LMDeploy after c1, vLLM after
# the last carry (bench/gpu/peers.py: bf16 one, 4 and 16 questions per photo, then FP8). Without --stash, the
# engines unpacked by earlier calls (--engines required). Results accumulate in
# WORK/peers.json and go to OUT/peers.json; `bench/gpu/report.py --work WORK --out-dir OUT` merges them into
# the report's table (run_all.sh's report step when WORK/peers.json is there; this script at its end).
# Env: OUT (the device sets it), WORK (default /tmp/fovea_bench), PEERS_ROOT (default /tmp/peers).
set -uo pipefail
cd "$(dirname "$0")/../.."
start=$(date +%s)
stash="" engines="" run=1 budget=560 peer_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --stash) stash=$2; shift 2 ;;
    --engines) engines=$2; shift 2 ;;
    --vllm-eager) peer_args+=(--vllm-eager); shift ;;
    --no-run) run=0; shift ;;
    --budget) budget=$2; shift 2 ;;
    --photos|--k-photos|--k16-photos|--precisions) peer_args+=("$1" "$2"); shift 2 ;;
    *) echo "peers.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
OUT=${OUT:-$PWD/out/peers}
WORK=${WORK:-/tmp/fovea_bench}
ROOT=${PEERS_ROOT:-/tmp/peers}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_PROGRESS_BARS=1 TQDM_DISABLE=1
mkdir -p "$OUT" "$WORK" "$ROOT"
note() { echo "$(date +%H:%M:%S) peers.sh: $*"; }
state=$WORK/peers_stash.json
if [ -n "$stash" ]; then
  [ -f "$stash/peers_manifest.json" ] || { note "$stash holds no peers_manifest.json (carry it: carry=[\"$stash\"])"; exit 2; }
  note "unpacking $stash into $ROOT"
  timeout -k 5 240 python3 bench/gpu/peers_stash.py unpack --stash "$stash" --root "$ROOT" > "$state.tmp" \
    && mv "$state.tmp" "$state" || { note "unpacking failed"; cat "$state.tmp"; exit 1; }
  cat "$state"
fi
[ -f "$state" ] || { note "nothing unpacked yet: give --stash"; exit 2; }
[ -n "$stash" ] || [ -n "$engines" ] || { note "without --stash, name the engines (--engines)"; exit 2; }
if [ -z "$engines" ]; then  # the engines this carry completed
  engines=$(python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))
print(",".join(e for e in s["ready"] if set(s["unpacked_now"]) & {p.rsplit("/", 1)[-1] for p in s["paths"][e]}))' "$state")
fi
if [ "$run" = 0 ] || [ -z "$engines" ]; then
  note "no engine to run now (ready: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ready"])' "$state"))"
  exit 0
fi
# The checkpoint of run_all.sh's model step; a folder made before make_model.py wrote the peers' files gets them.
if [ ! -f "$WORK/model/config.json" ] || [ ! -f "$WORK/tasks.jsonl" ] || [ ! -f "$WORK/prompt.json" ]; then
  note "$WORK lacks the model, tasks.jsonl or prompt.json: run bench/gpu/run_all.sh first on this warm machine"
  exit 1
fi
if [ ! -f "$WORK/model/preprocessor_config.json" ] || [ ! -s "$WORK/model/tokenizer.json" ]; then  # -s: not empty
  if ! why=$(timeout -k 5 120 python3 bench/gpu/peer_files.py --model "$WORK/model" 2>&1); then
    note "peer files failed: $(tail -n 1 <<< "$why")"  # recorded in peers.json for each engine, none run
    python3 bench/gpu/peers.py --engines "$engines" --work "$WORK" --out "$OUT" --paths-json "$state" \
      --peer-files-error "$(tail -n 5 <<< "$why")" "${peer_args[@]}"
    exit 1
  fi
fi
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader 2>/dev/null
left=$(( budget - ($(date +%s) - start) ))
note "running $engines (${left}s left)"
python3 bench/gpu/peers.py --engines "$engines" --work "$WORK" --out "$OUT" --paths-json "$state" \
  --deadline $(( start + budget )) "${peer_args[@]}"
rc=$?
cp -f "$WORK"/peers_*.log "$OUT"/ 2>/dev/null
# The report with the peers' table (report.md/json in OUT), when run_all.sh's results are in WORK.
if [ -f "$WORK/steps.json" ]; then
  timeout -k 5 60 python3 bench/gpu/report.py --work "$WORK" --out-dir "$OUT" > /dev/null \
    && sed -n '/^## Peers/,$p' "$OUT/report.md"
fi
exit $rc
