#!/usr/bin/env bash
# One device call (~4 minutes with the machine's start) after a change to the CUDA ops or to --batch-invariant:
#   1. test_ops, every case (CUDA against the CPU reference; InvariantOpsTest: rows alone = rows in a batch with
#      the switch on; the W4A16 kernels at SmolLM2's shapes), raw gtest XML kept;
#   2. what --batch-invariant costs: fovea bench on the listing-photo workload (96 requests, official tiling,
#      random InternVL2-8B weights), --quantization fp8 (the default recipe) without and with it; then the
#      speed of fp8-channel-act128 (the recipe that met the fidelity target on the CPU) on the same workload.
# Prepare HERE: cmake --build build-gpu --target fovea test_ops; bench/gpu/invariance_cost.sh --stage; then
#   run(command="bench/gpu/invariance_cost.sh", carry=[".carry/final", ".carry/photos", ".carry/tokenizers"])
set -uo pipefail
cd "$(dirname "$0")/../.."
if [ "${1:-}" = --stage ]; then  # binaries stripped and xz-compressed (a call carries <= 64 MiB)
  mkdir -p .carry/final
  for bin in build-gpu/fovea build-gpu/tests/backend/test_ops; do
    strip --strip-unneeded -o ".carry/final/$(basename $bin)" "$bin" && xz -T2 -6 -f ".carry/final/$(basename $bin)"
  done
  git rev-parse HEAD > .carry/final/commit.txt
  du -sh .carry/final .carry/photos .carry/tokenizers
  exit 0
fi
source bench/gpu/device_common.sh
device_dirs invariance_cost
BIN=/tmp/fovea_invariance_bin
mkdir -p "$BIN"
for name in fovea test_ops; do
  python3 -c 'import lzma, sys; open(sys.argv[2], "wb").write(lzma.open(sys.argv[1]).read())' \
    ".carry/final/$name.xz" "$BIN/$name" && chmod +x "$BIN/$name"
done
echo "commit $(cat .carry/final/commit.txt)"
start_model_and_workload
timeout 100 "$BIN/test_ops" --gtest_output="xml:$out/test_ops.xml" > "$logs/test_ops.log" 2>&1
echo "test_ops rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$logs/test_ops.log" | tr '\n' ' ')"
grep -E "^\[  FAILED  \]|Failure|differ from" "$logs/test_ops.log" | head -12
wait $prep
for variant in fp8 fp8-invariant fp8-channel-act128; do
  extra=(--quantization fp8)
  [ $variant = fp8-invariant ] && extra+=(--batch-invariant)
  [ $variant = fp8-channel-act128 ] && extra=(--quantization fp8-channel-act128)
  timeout 90 "$BIN/fovea" bench --model "$WORK/model" --images "$WORK/images" --backend cuda --count 96 \
    --gemm-seconds 0.5 "${extra[@]}" --json "$logs/bench_$variant.json" > "$logs/bench_$variant.log" 2>&1
  echo "bench $variant rc=$? $(python3 -c "import json; d=json.load(open('$logs/bench_$variant.json')); s=d['stages']; print('%.1f QPM, floor %.1f QPM (%.3f), llm %.1f ms/req, vit %.1f ms/req' % (d['qpm'], d['flop_floor_qpm'], d['fraction_of_floor'], s['llm']['ms_per_request'], s['vit']['ms_per_request']))" 2>/dev/null)"
  grep -m3 -i "error\|batch-invariant" "$logs/bench_$variant.log"
done
tar czf "$out/logs.tar.gz" -C "$out" logs && rm -rf "$logs"
