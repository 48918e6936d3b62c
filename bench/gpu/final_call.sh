#!/usr/bin/env bash
# The lead's one device call for a release: GPU test binaries, the whole-engine benchmark (run_all.sh), then the
# CPU-side benchmarks that want the GPU machine's idle cores (preprocessing thread scaling, tokenizer vs HF).
# Everything it needs is carried in .carry/: the binaries in .carry/bin (built here with FOVEA_STATIC=ON into
# build-gpu and copied by `bench/gpu/final_call.sh --stage`), photos and tokenizers.
#   device call: run(command="bench/gpu/final_call.sh", carry=[".carry"], timeout_s=600)
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=.carry/bin
if [ "${1:-}" = --stage ]; then  # HERE: copy the built binaries into .carry/bin
  mkdir -p "$BIN" && rm -f "$BIN"/*
  cp build-gpu/fovea build-gpu/tests/backend/test_ops build-gpu/tests/runtime/test_golden_forward \
    build-gpu/tests/runtime/test_runner build-gpu/fovea_preprocess_bench build-gpu/fovea_image_tool \
    build-gpu/bench_tokenizer "$BIN"/
  git rev-parse HEAD > .carry/COMMIT
  exit 0
fi
export FOVEA_BIN=$BIN/fovea
OUT=${OUT:-$PWD/out/final}
mkdir -p "$OUT"
budget=${BENCH_BUDGET:-380}
# The golden tests read tests/data from the source path they were built in.
mkdir -p /work && ln -sfn "$PWD" /work/main
{
  for t in $BIN/test_ops $BIN/test_golden_forward $BIN/test_runner; do
    [ -x "$t" ] || { echo "missing $t"; continue; }
    echo "=== $t"
    timeout 120 "$t"
    echo "=== $t rc $?"
  done
} > "$OUT/gpu_tests.txt" 2>&1
grep -E "^=== .* rc |PASSED|FAILED  \]" "$OUT/gpu_tests.txt" | grep -v "^\[  FAILED  \] .*, where" | head -40
# ViT + projector per tile at the InternVL2-8B shape, pixels on the device (issue 5's measurement).
FOVEA_VIT_PERF=1 timeout 90 $BIN/test_runner --gtest_filter='VitPerf.*' > "$OUT/vit_perf.txt" 2>&1
grep -E "per tile|FAILED|PASSED" "$OUT/vit_perf.txt"
bench/gpu/run_all.sh --name h200 --budget "$budget" ${RUN_ALL_ARGS:-}
# CPU_BENCHES=0 skips the preprocessing and tokenizer benchmarks (they do not depend on the GPU code).
[ "${CPU_BENCHES:-1}" = 0 ] && exit 0
echo "=== preprocessing (thread scaling)"
timeout 90 python3 bench/preprocess/bench_preprocess.py .carry/photos --build $BIN --images 40 --repeat 1 \
  --threads 1,2,4,8,16 --out "$OUT/preprocess.json" 2>&1 | tail -15
echo "=== tokenizer"
timeout 60 python3 bench/tokenizer/bench_tokenizer.py --build $BIN --shared .carry/shared --repeats 5 2>&1 | tail -8
