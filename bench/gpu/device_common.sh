# Sourced by the bench/gpu/*_device.sh scripts (bash).

# device_dirs NAME: BIN (binaries, .carry/bin), out ($OUT or out-NAME) and logs ($out/logs), WORK (/tmp/fovea_NAME)
# for model and workload; /work/main points here (the golden tests read tests/data from their build path).
device_dirs() {
  BIN=${BIN:-.carry/bin}
  out=${OUT:-out-$1}
  logs=$out/logs
  WORK=${WORK:-/tmp/fovea_$1}
  mkdir -p "$logs" "$WORK" /work && ln -sfn "$PWD" /work/main
}

# Needs WORK and logs set (device_dirs).
# Makes the 96-request listing-photo workload and a random InternVL2-8B-shaped model (internlm2) in $WORK, in the
# background (CPU only, while the GPU checks run); sets prep to its pid: `wait $prep` before using them.
start_model_and_workload() {
  ( python3 bench/gpu/workload.py --photos .carry/photos --out "$WORK" --requests 96 > "$logs/workload.log" 2>&1
    python3 bench/gpu/make_model.py --out "$WORK/model" --variant internlm2 \
      --tokenizer .carry/tokenizers/internlm2/tokenizer.model --template internlm2-chat --std 0.02 \
      > "$logs/model.log" 2>&1 ) &
  prep=$!
}

# decode_bench NAME MODEL [fovea bench args ...]: the decode benchmark (64 sequences x 256 tokens, 1 tile, CUDA
# graphs; ms per step = (T256 - T1) / 255) on $WORK/images, logs in $logs/decode_NAME.{json,log}, one summary
# line. Environment settings for the run: export them in a subshell around the call.
decode_bench() {
  local name=$1 model=$2; shift 2
  timeout 120 "$BIN/fovea" bench --model "$model" --images "$WORK/images" --backend cuda --count 64 \
    --max-tokens 256 --max-tiles 1 --warmup 0 --gemm-seconds 0.3 --json "$logs/decode_$name.json" "$@" \
    > "$logs/decode_$name.log" 2>&1
  echo "decode $name rc=$? $(python3 -c "import json; d=json.load(open('$logs/decode_$name.json'))['decode']; print('%.3f ms/step (runner %.3f)' % (d['ms_per_step'], d.get('llm_ms_per_step') or 0))" 2>/dev/null)"
}
