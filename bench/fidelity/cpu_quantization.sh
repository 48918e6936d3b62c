#!/usr/bin/env bash
# Quantization fidelity on the CPU, trained weights (the SmolLM2 checkpoint of `fovea make-demo-model --llm
# smollm2`), against transformers float32 on the instrument's first COUNT tasks: the FP8 recipes through the CPU's
# scalar reference of the CUDA path (E4M3 weights and activations, float32 elsewhere), and 4-bit round-to-nearest
# against calibrated AWQ and GPTQ (`fovea quantize`, calibration: 64 other prompts of the same kinds, seed 99) at
# groups 64 and 32 (128 does not divide SmolLM2's 576-wide hidden size; AWQ / GPTQ layouts need K % group == 0).
# Resumes: a mode whose logits exist is not run again.
#   PYTHON=/path/to/python-with-torch bench/fidelity/cpu_quantization.sh FOVEA MODEL WORK [COUNT] [GROUPS]
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=$1 model=$2 work=$3 count=${4:-120} groups=${5:-"64 32"}
fid="python3 bench/fidelity/fidelity.py"
mkdir -p "$work"
[ -f "$work/tasks.json" ] || $fid tasks --out "$work" --count 520 --limit "$count"
[ -f "$work/calib/tasks.jsonl" ] || $fid tasks --out "$work/calib" --count 64 --seed 99
[ -f "$work/ref-float32.logits.npy" ] ||
  OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} "${PYTHON:-python3}" bench/fidelity/fidelity.py reference --model "$model" \
    --work "$work" --batch 16
run() {  # run MODE NAME MODEL
  [ -f "$work/$2.logits.npy" ] || $fid fovea --bin "$bin" --model "$3" --work "$work" --mode "$1" --name "$2"
  echo "$(date +%T) $2 done"
}
modes=""
for mode in cpu fp8-tensor-cpu fp8-cpu fp8-block-cpu; do
  run $mode $mode "$model"
  modes="$modes${modes:+,}$mode"
done
for group in $groups; do
  for method in rtn awq gptq; do
    q=$work/q-$method-g$group
    calib=()
    [ $method = rtn ] || calib=(--calib "$work/calib/tasks.jsonl" --samples 32)
    [ -f "$q/config.json" ] || "$bin" quantize --model "$model" --out "$q" --method $method --group $group "${calib[@]}" \
      2>&1 | tail -1
    run w4-cpu w4-$method-g$group-cpu "$q"
    modes="$modes,w4-$method-g$group-cpu"
  done
done
$fid compare --work "$work" --modes "$modes" --out "$work/results"
