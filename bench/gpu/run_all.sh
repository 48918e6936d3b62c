#!/usr/bin/env bash
# The whole GPU benchmark in one device call (bench/README.md): workload, GEMM peak, random model, Fovea
# (official and compact tiling), the transformers reference, the comparison, and one table printed last.
# Builds nothing: the fovea binary is built beforehand and carried (build-gpu/fovea). Every step runs under
# its own timeout, capped by what is left of the total budget, and a failing step does not stop the others.
#
#   bench/gpu/run_all.sh [--requests 200] [--ref-requests 64] [--batch 8] [--fp32-requests 16]
#                        [--variant internlm2|qwen2] [--template internvl2_5|internlm2-chat]
#                        [--std 0.02] [--skip STEP,...] [--budget 540] [--name h200] [--tiny] [--questions]
# Steps: env workload gemm model prompt fovea_official reference fovea_compact [fovea_fp8] fovea_bench
#        [gpu_tests] [fovea_questions] fovea_decode fovea_profile compare report. --questions adds
#        fovea_questions (questions.sh: K = 1, 4, 16 questions per image; questions.md/json in OUT).
# Env: OUT (results folder; the device sets it), WORK (scratch, default /tmp/fovea_bench), FOVEA_BIN,
#      FOVEA_GPU_TESTS (test binaries to run too, space-separated, e.g. the carried CUDA test_ops),
#      FOVEA_RUN_ARGS (extra `fovea run` options for every run), FOVEA_FP8_ARGS (when set: a third run,
#      "fp8", with these options), FOVEA_BENCH_ARGS (more `fovea bench` options), FOVEA_DUMP_LOGITS=0 (the
#      official run does not dump its first-token logits; compare.py then reports no logits error).
# Peers (issue 26): bench/gpu/peers.sh runs vLLM and LMDeploy in the calls after this one on the same warm
# machine (same WORK); its WORK/peers.json joins the report (report.py's peers table) when present.
set -uo pipefail
cd "$(dirname "$0")/../.."
here=bench/gpu
requests=200 ref_requests=64 batch=8 fp32_requests=16 variant=internlm2 skip="" budget=540 name=h200 tiny=0
# The prompt template is written into the model's config.json ("template"), which Fovea's -hf loader honours, so both
# engines build the same prompt. PERF.md's workload uses InternVL2-8B's internlm2-chat (81 text tokens).
template=internlm2-chat std=0.02 questions=0
command_line="bench/gpu/run_all.sh $*"
while [ $# -gt 0 ]; do
  case "$1" in
    --requests) requests=$2; shift 2 ;;
    --ref-requests) ref_requests=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --fp32-requests) fp32_requests=$2; shift 2 ;;
    --variant) variant=$2; shift 2 ;;
    --template) template=$2; shift 2 ;;
    --std) std=$2; shift 2 ;;  # init std of the random weights (if the first tokens come out degenerate)
    --skip) skip=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --tiny) tiny=1; shift ;;
    --questions) questions=1; shift ;;
    *) echo "run_all.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

OUT=${OUT:-$PWD/out/bench}
WORK=${WORK:-/tmp/fovea_bench}
FOVEA=${FOVEA_BIN:-build-gpu/fovea}
PHOTOS=${PHOTOS:-.carry/photos}
if [ "$variant" = qwen2 ]; then TOKENIZER=${TOKENIZER:-.carry/tokenizers/qwen2}
  [ "$template" = internlm2-chat ] && template=internvl2_5  # InternVL3 (Qwen2.5) uses internvl2_5
else
  for candidate in .carry/tokenizers/internlm2/tokenizer.model .carry/tokenizers/internlm2.model .carry/tokenizer.model; do
    [ -f "$candidate" ] && { TOKENIZER=${TOKENIZER:-$candidate}; break; }
  done
  TOKENIZER=${TOKENIZER:-.carry/tokenizers/internlm2/tokenizer.model}
fi
device=cuda backend=cuda model_flags="" ref_flags="" gemm_flags=""
if [ "$tiny" = 1 ]; then  # a CPU rehearsal of the same pipeline at tiny shapes, float32 end to end
  device=cpu backend=cpu model_flags="--tiny --device cpu --dtype f32" ref_flags="--dtype f32 --vit-tiles 4 --vit-reps 1"
  gemm_flags="--tiny --device cpu"
fi
export PYTHONUNBUFFERED=1
# No network there: never let the hub client try. No progress bars in the log.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_PROGRESS_BARS=1 TQDM_DISABLE=1
mkdir -p "$OUT" "$WORK"
# Results of an earlier run go; its workload and model stay, so `--skip model` on a warm machine reuses them.
rm -f "$WORK"/env.json "$WORK"/gemm.json "$WORK"/prompt.json "$WORK"/ref.json "$WORK"/ref_logits.npz \
  "$WORK"/fovea_* "$WORK"/compare.json "$WORK"/steps.json "$WORK"/gpu_tests.json \
  "$WORK"/bench_fovea.* "$WORK"/bench_decode.*
LOG=$OUT/log.txt
: > "$LOG"
start=$(date +%s)
reserve=25  # seconds kept for compare + report
steps_json=""

note() { echo "$(date +%H:%M:%S) run_all: $*" | tee -a "$LOG"; }

# step NAME TIMEOUT_S CMD... : runs CMD under min(TIMEOUT_S, budget left), logs, records status and time.
step() {
  local step_name=$1 limit=$2; shift 2
  local status t0 left rc
  if [[ ",$skip," == *",$step_name,"* ]]; then status=skipped; rc=0
  else
    left=$(( budget - ($(date +%s) - start) - reserve ))
    [ "$step_name" = compare ] || [ "$step_name" = report ] && left=$(( left + reserve ))
    [ "$left" -lt "$limit" ] && limit=$left
    if [ "$limit" -lt 5 ]; then status=no-time; rc=0
    else
      note "step $step_name (limit ${limit}s)"
      t0=$(date +%s)
      export STEP_DEADLINE=$(( t0 + limit ))
      timeout -k 10 "$limit" "$@" 2>&1 | tee -a "$LOG"
      rc=${PIPESTATUS[0]}
      case $rc in 0) status=ok ;; 124|137) status=timeout ;; *) status="failed($rc)" ;; esac
    fi
  fi
  local secs=$(( $(date +%s) - ${t0:-$(date +%s)} ))
  note "step $step_name: $status"
  steps_json="$steps_json\"$step_name\": {\"status\": \"$status\", \"seconds\": $secs},"
  printf '{%s}\n' "${steps_json%,}" > "$WORK/steps.json"
  return 0
}

fovea_step() {  # fovea_step NAME POLICY LIMIT EXTRA_ARGS [fovea_run.py options...]
  local run_name=$1 policy=$2 limit=$3 extra=$4; shift 4
  step "fovea_$run_name" "$limit" python3 $here/fovea_run.py --fovea "$FOVEA" --model "$WORK/model" \
    --tasks "$WORK/tasks.jsonl" --output "$WORK/fovea_$run_name.jsonl" --summary "$WORK/fovea_$run_name.json" \
    --log "$WORK/fovea_$run_name.log" --name "$run_name" --backend $backend --policy "$policy" \
    --extra-args "${FOVEA_RUN_ARGS:-} $extra" --timeout $(( limit - 15 )) "$@"
}

note "work $WORK, out $OUT, fovea $FOVEA, variant $variant, requests $requests, budget ${budget}s"
step env 30 python3 $here/env_info.py "$WORK/env.json" "$command_line" "$FOVEA"
step workload 60 python3 $here/workload.py --photos "$PHOTOS" --out "$WORK" --requests "$requests"
step gemm 60 python3 $here/gemm_peak.py --out "$WORK/gemm.json" $gemm_flags
step model 200 python3 $here/make_model.py --out "$WORK/model" --variant "$variant" --tokenizer "$TOKENIZER" \
  --template "$template" --std "$std" $model_flags
cp -f "$WORK/model/model.json" "$WORK/model.json" 2>/dev/null
step prompt 30 python3 $here/prompt_ids.py --fovea "$FOVEA" --tokenizer "$WORK/model" --variant "$variant" \
  --template "$template" --out "$WORK/prompt.json"
# The official run dumps its first-token logits (200 x vocab floats, ~74 MB) for compare.py's logits error;
# FOVEA_DUMP_LOGITS=0 turns that off.
dump_logits=()
[ "${FOVEA_DUMP_LOGITS:-1}" = 0 ] || dump_logits=(--dump-logits "$WORK/fovea_official_logits")
fovea_step official official 150 "" "${dump_logits[@]}"
step reference 240 python3 $here/reference.py --model "$WORK/model" --work "$WORK" --out "$WORK/ref.json" \
  --logits "$WORK/ref_logits.npz" --requests "$ref_requests" --batch "$batch" --device $device \
  --fp32-requests "$fp32_requests" $ref_flags
fovea_step compact compact 100 ""
runs="official:official,compact:compact"
if [ -n "${FOVEA_FP8_ARGS:-}" ]; then
  # Its logits too: compare.py then gives FP8's logits error against transformers bf16 and float32.
  fp8_logits=()
  [ "${FOVEA_DUMP_LOGITS:-1}" = 0 ] || fp8_logits=(--dump-logits "$WORK/fovea_fp8_logits")
  fovea_step fp8 official 120 "$FOVEA_FP8_ARGS" "${fp8_logits[@]}"
  runs="$runs,fp8:official"
fi
# fovea bench on the same images: Fovea's own stage times (ViT ms per tile, preprocessing ms per image).
step fovea_bench 120 "$FOVEA" bench --model "$WORK/model" --images "$WORK/images" --backend $backend \
  --count 96 --json "$WORK/bench_fovea.json" --svg "$WORK/bench_fovea.svg" ${FOVEA_BENCH_ARGS:-}
if [ -n "${FOVEA_GPU_TESTS:-}" ]; then
  step gpu_tests 120 python3 $here/gpu_tests.py --out "$WORK/gpu_tests.json" --timeout 90 $FOVEA_GPU_TESTS
fi
if [ "$questions" = 1 ]; then
  step fovea_questions 240 env FOVEA="$FOVEA" WORK="$WORK" OUT="$OUT" backend="$backend" bash $here/questions.sh
fi
# Long outputs (issue 6): 64 one-tile requests x 256 tokens decoding as one batch, EOS ignored; fovea bench times
# them with max_tokens 1 and 256 and reports (T256 - T1) / 255 as ms per decode step (CUDA graphs on).
decode_shape="--count 64 --max-tokens 256"; [ "$tiny" = 1 ] && decode_shape="--count 8 --max-tokens 16"
step fovea_decode 90 "$FOVEA" bench --model "$WORK/model" --images "$WORK/images" --backend $backend $decode_shape \
  --max-tiles 1 --warmup 0 --gemm-seconds 0.5 --json "$WORK/bench_decode.json" --svg "$WORK/bench_decode.svg" \
  ${FOVEA_BENCH_ARGS:-}
# Per-op GPU profile (FOVEA_PROFILE_OPS=1: each backend prints its op table to stderr when destroyed): the decode
# shape above op by op (no CUDA graphs, so every op is timed; one rep) and a short official-tiling run with
# max_tokens 1 (prefill). stderr goes to profile_decode.txt / profile_prefill.txt, copied to $OUT; the category
# tables are echoed into the log. On the CPU backend there is no table, just the two bench runs.
profile_runs() {
  local rc=0 status left
  rm -f "$WORK"/profile_*
  left=$(( STEP_DEADLINE - $(date +%s) ))
  FOVEA_PROFILE_OPS=1 timeout -k 5 $(( left * 2 / 3 )) "$FOVEA" bench --model "$WORK/model" --images "$WORK/images" \
    --backend $backend $decode_shape --max-tiles 1 --warmup 0 --decode-reps 1 --gemm-seconds 0 --no-cuda-graphs \
    --json "$WORK/profile_decode.json" --svg "$WORK/profile_decode.svg" ${FOVEA_BENCH_ARGS:-} \
    2> "$WORK/profile_decode.txt" || rc=$?
  left=$(( STEP_DEADLINE - $(date +%s) - 3 ))
  FOVEA_PROFILE_OPS=1 timeout -k 5 $(( left > 1 ? left : 1 )) "$FOVEA" bench --model "$WORK/model" \
    --images "$WORK/images" --backend $backend --count 16 --max-tokens 1 --warmup 0 --gemm-seconds 0 \
    --json "$WORK/profile_prefill.json" --svg "$WORK/profile_prefill.svg" ${FOVEA_BENCH_ARGS:-} \
    2> "$WORK/profile_prefill.txt" || { status=$?; [ "$rc" != 0 ] || rc=$status; }
  for run in decode prefill; do
    cp -f "$WORK/profile_$run.txt" "$OUT/" 2>/dev/null
    echo "profile_$run (last op table's categories):"
    awk '/^== fovea op profile/ { table = "" } { table = table $0 "\n" } END { printf "%s", table }' \
      "$WORK/profile_$run.txt" | sed -n '/^category/,$p'
  done
  return "$rc"
}
export -f profile_runs
step fovea_profile 60 env FOVEA="$FOVEA" WORK="$WORK" OUT="$OUT" backend="$backend" decode_shape="$decode_shape" \
  bash -c profile_runs
step compare 20 python3 $here/compare.py --work "$WORK" --runs "$runs" --out "$WORK/compare.json"
step report 20 python3 $here/report.py --work "$WORK" --out-dir "$OUT" --name "$name"
(cd "$WORK" && tar czf "$OUT/artifacts.tar.gz" --ignore-failed-read ./*.json ./*.jsonl ./*.log \
  model/config.json model/model.json 2>/dev/null)
note "done in $(( $(date +%s) - start ))s; results in $OUT (report.md, report.json, log.txt, artifacts.tar.gz)"
echo
cat "$OUT/report.md" 2>/dev/null || echo "no table: see $LOG"
