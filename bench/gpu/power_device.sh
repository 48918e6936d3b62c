#!/usr/bin/env bash
# One device call (~5 minutes): how the H200's clocks and power behave under the engine, and the FP8 path.
#   - nvidia-smi samples clocks, power and throttle reasons every 200 ms for the whole call (smi.csv), with a
#     phase file (phases.txt: start time and name of each step) to cut it;
#   - torch: a sustained 8192x4096x28672 GEMM for 12 s (burst vs sustained rate, gemm_sustained.py);
#   - test_ops (all, LinearFp8 included) and OpsPerf's bf16/fp8 GEMM rows;
#   - fovea bench (official, 96 requests): default; --quantization fp8; decode 64 x 256 in bf16 and fp8.
# (Its tuning step, every large-M shape timed through FOVEA_GEMM_TUNE_MAX_ROWS, went with that switch; the last
# tree with it: commit fb2dff3.)
# Binaries from .carry/bin; carry .carry. Summary table last; logs in $OUT/logs.tar.gz.
set -uo pipefail
source "$(dirname "$0")/device_common.sh"
device_dirs power
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
  --format=csv,noheader,nounits -lms 200 > "$logs/smi.csv" 2>/dev/null &
smi=$!
phase() { echo "$(date +%s.%N) $1" >> "$logs/phases.txt"; }
start_model_and_workload
phase test_ops
timeout 100 "$BIN/test_ops" > "$logs/test_ops.log" 2>&1
echo "test_ops rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$logs/test_ops.log" | tr '\n' ' ')"
grep -E "^\[  FAILED  \]|LinearFp8" "$logs/test_ops.log" | grep -v ", where" | head -8
phase ops_perf
FOVEA_OPS_PERF=1 timeout 90 "$BIN/test_ops" --gtest_filter='OpsPerf.*' > "$logs/perf.log" 2>&1
grep -E "llm (fp8 )?(wqkv|wo|w13|w2)|vit linear" "$logs/perf.log"
phase torch_sustained
timeout 40 python3 bench/gpu/gemm_sustained.py --seconds 12 --out "$logs/torch_sustained.json" > "$logs/torch_sustained.log" 2>&1
echo "torch sustained gate_up: $(python3 -c "import json; d=json.load(open('$logs/torch_sustained.json')); w=d['windows_tflops']; print('first %.0f, last %.0f, min %.0f TFLOP/s' % (w[0], w[-1], min(w)))" 2>/dev/null)"
wait $prep
bench() {  # name, then env assignments and extra arguments for fovea bench
  local name=$1; shift
  phase "bench_$name"
  env "$@" timeout 120 "$BIN/fovea" bench --model "$WORK/model" --images "$WORK/images" --backend cuda --count 96 \
    --gemm-seconds 2 ${EXTRA:-} --json "$logs/bench_$name.json" > "$logs/bench_$name.log" 2>&1
  echo "bench $name rc=$? $(python3 -c "import json; d=json.load(open('$logs/bench_$name.json')); s=d['stages']; print('%.1f QPM, gemm peak %.0f, llm %.1f vit %.1f ms/req' % (d['qpm'], d['gemm_peak']['tflops'], s['llm']['ms_per_request'], s['vit']['ms_per_request']))" 2>/dev/null)"
}
bench default FOVEA_X=0
EXTRA="--quantization fp8" bench fp8 FOVEA_X=0
bench default_again FOVEA_X=0
for q in none fp8; do
  phase "decode_$q"
  timeout 80 "$BIN/fovea" bench --model "$WORK/model" --images "$WORK/images" --backend cuda --count 64 --max-tokens 256 \
    --max-tiles 1 --warmup 0 --gemm-seconds 0.5 --quantization $q --json "$logs/decode_$q.json" > "$logs/decode_$q.log" 2>&1
  echo "decode $q rc=$? $(python3 -c "import json; d=json.load(open('$logs/decode_$q.json'))['decode']; print(d.get('ms_per_step'))" 2>/dev/null) ms/step"
done
phase end
kill $smi 2>/dev/null; sleep 0.3
python3 - "$logs/smi.csv" "$logs/phases.txt" <<'PY'
import sys, datetime
phases = [(float(l.split()[0]), l.split()[1]) for l in open(sys.argv[2])]
rows = []
for line in open(sys.argv[1]):
    f = [x.strip() for x in line.split(",")]
    try:
        t = datetime.datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
        rows.append((t, float(f[1]), float(f[3]), float(f[4]), f[5]))
    except (ValueError, IndexError):
        pass
print("phase              samples  sm MHz (median, min)  power W (median, max)  busy reasons")
for (t0, name), (t1, _) in zip(phases, phases[1:]):
    r = [x for x in rows if t0 <= x[0] < t1 and x[2] > 200]
    if not r:
        continue
    clk = sorted(x[1] for x in r); pw = sorted(x[2] for x in r)
    reasons = {}
    for x in r:
        reasons[x[4]] = reasons.get(x[4], 0) + 1
    top = ", ".join(f"{k}:{v}" for k, v in sorted(reasons.items(), key=lambda kv: -kv[1])[:3])
    print(f"{name:18s} {len(r):7d}  {clk[len(clk)//2]:6.0f} {clk[0]:6.0f}          {pw[len(pw)//2]:6.0f} {pw[-1]:6.0f}        {top}")
PY
tar czf "$out/logs.tar.gz" -C "$out" logs && rm -rf "$logs"
