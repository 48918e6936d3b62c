#!/usr/bin/env bash
# The multi-question workload (issue 17), run by run_all.sh's fovea_questions step (`run_all.sh --questions`):
# the same N listing photos asked K = 1, 4 and 16 distinct questions (`fovea bench --questions K`: one request
# per question, an image's questions submitted together, first token only), then the 16 questions of the first
# NREF photos again with the prefix cache off, i.e. every question computed alone, for the first-token check.
# questions_report.py then gives QPM per question against K = 1 (targets: K = 4 >= 3.4x, K = 16 >= 10x), prompt
# tokens computed against needed, and first-token agreement with the questions asked alone.
# Env: FOVEA, WORK (holding model/ and images/ from run_all.sh's model and workload steps), OUT, backend,
#      QUESTIONS_IMAGES (N, default 64), QUESTIONS_REF_IMAGES (NREF, default 16), FOVEA_BENCH_ARGS.
set -uo pipefail
cd "$(dirname "$0")/../.."
images=${QUESTIONS_IMAGES:-64} nref=${QUESTIONS_REF_IMAGES:-16} rc=0
rm -f "$WORK"/questions_*
bench() {  # bench NAME COUNT K [more options]
  local name=$1 count=$2 k=$3; shift 3
  "$FOVEA" bench --model "$WORK/model" --images "$WORK/images" --backend "$backend" --count "$count" \
    --questions "$k" --max-tokens 1 --warmup 2 --gemm-seconds 0.5 --json "$WORK/questions_$name.json" \
    --svg "$WORK/questions_$name.svg" --first-tokens "$WORK/questions_$name.tokens.jsonl" "$@" \
    ${FOVEA_BENCH_ARGS:-} || rc=$?
}
for k in 1 4 16; do bench "k$k" "$images" "$k"; done
bench alone "$nref" 16 --no-prefix-cache
python3 bench/gpu/questions_report.py --work "$WORK" --out "$OUT" || rc=$?
exit "$rc"
