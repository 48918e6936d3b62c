# Sourced by the bench/kernels/*_device.sh scripts (bash).

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
