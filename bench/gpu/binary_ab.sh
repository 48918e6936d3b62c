#!/usr/bin/env bash
# A/B of two fovea binaries on dummy weights of the family's 8B shapes, in one device call: the listing-photo
# workload (workload.py), every request computed in full, the two binaries alternating so drift hits both; then an
# FP8 prefill op profile of each binary. Everything goes into one archive, rewritten after every stage (the
# device returns only a few files per call, and a call cut short still returns what it has).
#
#   bench/gpu/binary_ab.sh BASE_BIN NEW_BIN [REPS] [MODEL:QUANT ...]
#     default runs: InternVL3_5-8B:fp8 InternVL3_5-8B:none InternVL2-8B:fp8 (QUANT none = bf16), 2 reps
#   device: run(command="bench/gpu/binary_ab.sh .carry/bin/fovea-base .carry/bin/fovea-new", carry=[".carry/photos",
#               ".carry/tokenizers", ".carry/bin"])  ->  $OUT/binary_ab.tgz; each run prints "TAG QPM ms/tile"
# Env: OUT, WORK (/tmp/fovea_ab), PHOTOS (.carry/photos), TOKENIZERS (.carry/tokenizers).
set -uo pipefail
cd "$(dirname "$0")/../.."
base=$1 new=$2 reps=${3:-2}
shift $(( $# >= 3 ? 3 : $# ))
runs=("$@")
[ ${#runs[@]} -gt 0 ] || runs=(InternVL3_5-8B:fp8 InternVL3_5-8B:none InternVL2-8B:fp8)
OUT=${OUT:-$PWD/out/binary_ab} W=${WORK:-/tmp/fovea_ab}
R=$W/results
rm -rf "$R" && mkdir -p "$R/ab" "$OUT"
save() { tar czf "$OUT/binary_ab.tgz" -C "$R" . ; }
nvidia-smi --query-gpu=name,memory.total,driver_version,power.limit --format=csv,noheader | tee "$R/gpu.txt"
python3 bench/gpu/workload.py --photos "${PHOTOS:-.carry/photos}" --out "$W" --requests 200 > "$R/workload.log" 2>&1
for model in $(printf '%s\n' "${runs[@]}" | cut -d: -f1 | sort -u); do
  python3 bench/gpu/family_models.py --row "$model" --out "$W/models/$model" \
    --tokenizers "${TOKENIZERS:-.carry/tokenizers}" >> "$R/workload.log" 2>&1
done
ab() {  # ab MODEL QUANT REP TAG BIN
  local tag=$1-$2-$4-$3 extra=()
  [ "$2" = none ] || extra=(--quantization "$2")
  timeout -k 5 90 "$5" bench --model "$W/models/$1" --images "$W/images" --count 96 --backend cuda \
    --load-format dummy --gemm-seconds 0 --no-prefix-cache --vision-cache-tiles 1 "${extra[@]}" \
    --json "$R/ab/$tag.json" > "$R/ab/$tag.log" 2>&1
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); v=d['stages']['vit']['total_ms']; \
n=d['tiles_per_request']*(d['requests']-d.get('failed',0)); print(sys.argv[2], round(d['qpm'],1), 'QPM', \
round(v/n,3), 'ms/tile')" "$R/ab/$tag.json" "$tag" 2>/dev/null || echo "$tag failed"
}
for rep in $(seq 1 "$reps"); do
  for run in "${runs[@]}"; do
    ab "${run%%:*}" "${run##*:}" "$rep" base "$base"
    ab "${run%%:*}" "${run##*:}" "$rep" new "$new"
  done
  save
  if [ "$rep" = 1 ]; then
    model=${runs[0]%%:*}
    for which in base new; do
      bin=$base; [ $which = new ] && bin=$new
      FOVEA_PROFILE_OPS=1 timeout -k 5 60 "$bin" bench --model "$W/models/$model" --images "$W/images" --count 32 \
        --max-tokens 1 --warmup 2 --gemm-seconds 0 --load-format dummy --no-prefix-cache --vision-cache-tiles 1 \
        --quantization fp8 --json "$R/profile_fp8-$which.json" 2> "$R/profile_fp8-$which.txt"
      echo "profile fp8 ($model, $which) rc=$?"
    done
    save
  fi
done
