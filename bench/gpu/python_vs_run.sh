#!/usr/bin/env bash
# Issue 15's GPU check in one device call: the listing-photo workload (as run_all.sh makes it: same photos, same
# random InternVL2-8B-shaped model) through the Python API and through `fovea run`, QPM of both and their ratio.
# Builds nothing: bench/gpu/build_python_module.sh builds build-gpu-py/fovea and build-gpu-py/python (the
# module for the device's Python 3.12) beforehand, bench/gpu/prepare_carry.sh puts the photos into .carry:
#   run(command="bench/gpu/python_vs_run.sh", carry=[".carry", "build-gpu-py/fovea", "build-gpu-py/python"])
#   bench/gpu/python_vs_run.sh [--requests 300] [--repeats 2]
set -uo pipefail
cd "$(dirname "$0")/../.."
requests=300 repeats=2
while [ $# -gt 0 ]; do
  case "$1" in
    --requests) requests=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    *) echo "python_vs_run.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
OUT=${OUT:-$PWD/out/python}
WORK=${WORK:-/tmp/fovea_bench}
FOVEA=${FOVEA_BIN:-build-gpu-py/fovea}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_PROGRESS_BARS=1
export PYTHONPATH=$PWD/build-gpu-py/python${PYTHONPATH:+:$PYTHONPATH}
export LD_LIBRARY_PATH=$PWD/build-gpu-py/python/libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p "$OUT" "$WORK"
python3 -c 'import fovea' || { echo "python_vs_run.sh: build-gpu-py/python/fovea does not import here" >&2; exit 1; }
[ "$(wc -l < "$WORK/tasks.jsonl" 2>/dev/null || echo 0)" = "$requests" ] ||
  python3 bench/gpu/workload.py --photos "${PHOTOS:-.carry/photos}" --out "$WORK" --requests "$requests" || exit 1
[ -f "$WORK/model/config.json" ] ||
  python3 bench/gpu/make_model.py --out "$WORK/model" --variant internlm2 --template internlm2-chat --std 0.02 \
    --tokenizer "${TOKENIZER:-.carry/tokenizers/internlm2/tokenizer.model}" || exit 1
python3 bench/gpu/python_vs_run.py --fovea "$FOVEA" --model "$WORK/model" --tasks "$WORK/tasks.jsonl" \
  --work "$WORK" --out "$OUT/python_vs_run.json" --repeats "$repeats" 2>&1 | tee "$OUT/python_vs_run.log"
exit "${PIPESTATUS[0]}"
