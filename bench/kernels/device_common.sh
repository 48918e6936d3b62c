# Sourced by the bench/kernels/*_device.sh scripts (bash). Needs WORK and logs set.
# Makes the 96-request listing-photo workload and a random InternVL2-8B-shaped model (internlm2) in $WORK, in the
# background (CPU only, while the GPU checks run); sets prep to its pid: `wait $prep` before using them.
start_model_and_workload() {
  ( python3 bench/gpu/workload.py --photos .carry/photos --out "$WORK" --requests 96 > "$logs/workload.log" 2>&1
    python3 bench/gpu/make_model.py --out "$WORK/model" --variant internlm2 \
      --tokenizer .carry/tokenizers/internlm2/tokenizer.model --template internlm2-chat --std 0.02 \
      > "$logs/model.log" 2>&1 ) &
  prep=$!
}
