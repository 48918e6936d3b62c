#!/usr/bin/env bash
# Issue 15's GPU check in one device call: the listing-photo workload (as run_all.sh makes it: same photos, same
# random InternVL2-8B-shaped model) through the Python API and through `fovea run`, QPM of both and their ratio.
# Builds nothing: carry the CUDA binary and the Python module built for the device's Python (3.12), e.g.
#   /root/.pyenv/versions/3.12.1/bin/python3 -m pip install nanobind
#   cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DFOVEA_STATIC=ON -DFOVEA_TESTS=OFF \
#     -DCMAKE_CUDA_ARCHITECTURES=90a -DFOVEA_PYTHON=ON -DPython_EXECUTABLE=/root/.pyenv/versions/3.12.1/bin/python3
#   cmake --build build-gpu -j2 --target fovea _fovea && bench/gpu/prepare_carry.sh
#   run(command="bench/gpu/python_vs_run.sh", carry=[".carry", "build-gpu/fovea", "build-gpu/python"])
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
FOVEA=${FOVEA_BIN:-build-gpu/fovea}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_PROGRESS_BARS=1
export PYTHONPATH=$PWD/build-gpu/python${PYTHONPATH:+:$PYTHONPATH}
mkdir -p "$OUT" "$WORK"
python3 -c 'import fovea' || { echo "python_vs_run.sh: build-gpu/python/fovea does not import here" >&2; exit 1; }
[ "$(wc -l < "$WORK/tasks.jsonl" 2>/dev/null || echo 0)" = "$requests" ] ||
  python3 bench/gpu/workload.py --photos "${PHOTOS:-.carry/photos}" --out "$WORK" --requests "$requests" || exit 1
[ -f "$WORK/model/config.json" ] ||
  python3 bench/gpu/make_model.py --out "$WORK/model" --variant internlm2 --template internlm2-chat --std 0.02 \
    --tokenizer "${TOKENIZER:-.carry/tokenizers/internlm2/tokenizer.model}" || exit 1
python3 bench/gpu/python_vs_run.py --fovea "$FOVEA" --model "$WORK/model" --tasks "$WORK/tasks.jsonl" \
  --work "$WORK" --out "$OUT/python_vs_run.json" --repeats "$repeats" 2>&1 | tee "$OUT/python_vs_run.log"
exit "${PIPESTATUS[0]}"
