# Sourced by a session's device-call script (bash): the stages such a call strings together, each writing under
# $R and ending by rewriting one archive in $OUT (the device returns a few files per call, and a call cut short
# still returns what it has). A call script is then its plan alone:
#
#   source bench/gpu/call_common.sh
#   call_begin s7call1 .carry/bin/bins7.tar.xz       # R=/tmp/s7call1, $OUT/s7call1.tgz, binaries unpacked in $B
#   call_family_h200 fovea-base                       # only on a card of more than 100 GB
#   call_test_new && call_perf "attention family" new
#   call_ab 2 InternVL3_5-8B:fp8 InternVL2-8B:fp8
#   call_family internvl3_5-8b-fp8,internvl2-8b
#   call_vit_ab 2 "base:none new:none"                # Fovea's ViT alone, binaries alternating
#   call_vit_alone $B/fovea-new none,fp8-all; call_vit_fp8_fidelity $B/fovea-new
#
# Binaries in the tarball: fovea-base / fovea-new, test_ops-base / test_ops-new, test_golden_forward-new.
# DEADLINE (seconds since the script began, default 550) bounds every stage: `left` says what remains.

call_begin() {  # call_begin NAME TARBALL
  cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
  CALL=$1
  R=/tmp/$CALL
  rm -rf "$R" && mkdir -p "$R"
  B=.carry/bin
  tar xJf "$2" -C "$B" || echo "could not unpack $2"
  nvidia-smi --query-gpu=name,memory.total,driver_version,power.limit --format=csv,noheader | tee "$R/gpu.txt"
  GPU_MIB=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
  NEW=""
}
save() { tar czf "$OUT/$CALL.tgz" -C "$R" . ; }
left() { echo $(( ${DEADLINE:-550} - SECONDS )); }

# The family rows that need more than 80 GB (issue 22), with BIN (under $B); the archive is rewritten every 30 s
# meanwhile, so rows that finished come back even if the call is cut.
call_family_h200() {  # call_family_h200 BIN [KEYS] [BUDGET]
  [ "${GPU_MIB:-0}" -gt 100000 ] || return 0
  ( while sleep 30; do save; done ) & local saver=$!
  OUT=$R/family_h200 WORK=/tmp/fovea_family FOVEA_BIN=$PWD/$B/$1 bench/gpu/family.sh \
    --only "${2:-internvl3-38b,internvl3-78b-fp8}" --budget "${3:-280}" > "$R/family_h200_stdout.txt" 2>&1
  echo "family (H200) rc=$? at ${SECONDS}s"
  kill $saver
  tail -n 14 "$R/family_h200/family.md" 2>/dev/null | head -6
  save
}

# test_ops and the CUDA goldens of the new binaries; NEW=$B/fovea-new only if both pass.
call_test_new() {
  timeout -k 5 150 "$B/test_ops-new" > "$R/test_ops.txt" 2>&1
  local ops_rc=$?
  echo "test_ops rc=$ops_rc $(grep -E '^\[  (PASSED|FAILED) ' "$R/test_ops.txt" | tr '\n' ' ')"
  grep -E "^\[  FAILED" "$R/test_ops.txt" | head -5
  timeout -k 5 120 "$B/test_golden_forward-new" > "$R/test_golden_forward.txt" 2>&1
  local gold_rc=$?
  echo "goldens rc=$gold_rc $(grep -E '^\[  (PASSED|FAILED) ' "$R/test_golden_forward.txt" | tr '\n' ' ')"
  grep -E "^\[  FAILED" "$R/test_golden_forward.txt" | head -5
  save
  [ $ops_rc = 0 ] && [ $gold_rc = 0 ] && NEW=$B/fovea-new
  [ -n "$NEW" ]
}

# Op microbenchmarks (test_ops' OpsPerf with FOVEA_OPS_PERF=MODE) of each variant's test_ops.
call_perf() {  # call_perf "MODE ..." "VARIANT ..."
  local mode v
  for mode in $1; do
    for v in $2; do
      [ "$v" = new ] && [ -z "$NEW" ] && continue
      FOVEA_OPS_PERF=$mode timeout -k 5 90 "$B/test_ops-$v" --gtest_filter='OpsPerf.*' > "$R/perf_$mode-$v.txt" 2>&1
      echo "perf $mode $v rc=$?"
      grep -E "paged prefill|paged chunk|qk_norm_rope|rope|vit attention|attention" "$R/perf_$mode-$v.txt" | head -6
    done
  done
  save
}

# End-to-end A/B of fovea-base against the new binary (bench/gpu/binary_ab.sh), if it passed and time allows.
call_ab() {  # call_ab REPS MODEL:QUANT ...
  local reps=$1
  shift
  if [ -z "$NEW" ] || [ "$(left)" -le 250 ]; then
    echo "ab skipped (new binary ${NEW:-failed its tests}, $(left) s left)"
    return 0
  fi
  OUT=$R/ab WORK=/tmp/fovea_ab timeout -k 5 $(( $(left) - 100 )) bash bench/gpu/binary_ab.sh "$B/fovea-base" "$NEW" \
    "$reps" "$@" > "$R/ab.txt" 2>&1
  echo "ab rc=$? at ${SECONDS}s"
  grep -E "QPM|failed|rc=" "$R/ab.txt"
  save
}

# Family rows (bench/gpu/family.sh, fraction of this machine's floor) with the new binary if it passed, else base.
call_family() {  # call_family KEYS
  local bin=${NEW:-$B/fovea-base}
  if [ "$(left)" -le 90 ]; then
    echo "family skipped ($(left) s left)"
    return 0
  fi
  OUT=$R/family WORK=/tmp/fovea_family FOVEA_BIN=$PWD/$bin bench/gpu/family.sh --only "$1" \
    --budget $(( $(left) - 10 )) > "$R/family_stdout.txt" 2>&1
  echo "family rc=$? at ${SECONDS}s ($bin)"
  tail -n 16 "$R/family/family.md" 2>/dev/null | head -8
  save
}

# The ViT + projector alone in Fovea only (`fovea bench --vit-alone 32`, a burst after a warm-up, then held 4 s)
# for each VARIANT:QUANT (binary $B/fovea-VARIANT, --quantization QUANT), REPS rounds alternating them.
call_vit_ab() {  # call_vit_ab REPS "base:none new:none ..."
  local rep run v q
  python3 bench/gpu/family_models.py --row InternVL2-8B --out /tmp/fovea_vit/model --tokenizers .carry/tokenizers \
    > /dev/null
  for rep in $(seq 1 "$1"); do
    for run in $2; do
      v=${run%%:*} q=${run##*:}
      [ "$v" = new ] && [ -z "$NEW" ] && continue
      [ "$(left)" -gt 40 ] || { echo "vit ab stopped ($(left) s left)"; save; return 0; }
      timeout -k 5 60 "$B/fovea-$v" bench --model /tmp/fovea_vit/model --images .carry/photos --backend cuda \
        --load-format dummy --kv-blocks 1024 --vit-alone 32 --vit-reps 3 --vit-hold 4 --quantization "$q" \
        --json "$R/vit_$v-$q-$rep.json" > "$R/vit_$v-$q-$rep.txt" 2>&1
      echo "$v $q vit alone rc=$?: $(grep -h 'ms per tile' "$R/vit_$v-$q-$rep.txt" | tr '\n' ' ')"
    done
  done
  save
}

# The ViT + projector alone (bench/gpu/vit_alone.py: the same tiles through Fovea and transformers, alternating
# rounds) with BIN at each of QUANTS (e.g. none,fp8-all: the FP8 ViT), then one op profile of BIN per QUANT.
call_vit_alone() {  # call_vit_alone BIN QUANTS
  local bin=$1 q
  [ "$(left)" -gt 90 ] || { echo "vit alone skipped ($(left) s left)"; return 0; }
  python3 bench/gpu/family_models.py --row InternVL2-8B --out /tmp/fovea_vit/model --tokenizers .carry/tokenizers \
    > /dev/null
  timeout -k 5 $(( $(left) - 60 )) python3 bench/gpu/vit_alone.py --fovea "$bin" --model-dir /tmp/fovea_vit/model \
    --images .carry/photos --tiles 32 --reps 3 --hold 6 --rounds 2 --quantizations "$2" \
    --out "$R/vit_alone.json" > "$R/vit_alone.log" 2>&1
  echo "vit alone rc=$? at ${SECONDS}s"
  grep -E "^(ms_per_tile|held_ms_per_tile):" "$R/vit_alone.log"
  for q in ${2//,/ }; do
    FOVEA_PROFILE_OPS=1 timeout -k 5 60 "$bin" bench --model /tmp/fovea_vit/model --images .carry/photos \
      --backend cuda --load-format dummy --kv-blocks 1024 --vit-alone 32 --vit-reps 3 --quantization "$q" \
      --json "$R/vit_profile_$q.json" 2> "$R/vit_profile_$q.txt" > /dev/null
    echo "vit profile $q rc=$?"
  done
  save
}

# The FP8 ViT's fidelity against transformers bf16 / float32 (bench/gpu/vit_fp8_fidelity.sh) with BIN.
call_vit_fp8_fidelity() {  # call_vit_fp8_fidelity BIN [REQUESTS]
  [ "$(left)" -gt 150 ] || { echo "vit fp8 fidelity skipped ($(left) s left)"; return 0; }
  OUT=$R/vit_fp8_fidelity WORK=/tmp/fovea_vitfp8 FOVEA_BIN=$PWD/$1 timeout -k 5 $(( $(left) - 40 )) \
    bash bench/gpu/vit_fp8_fidelity.sh --requests "${2:-64}" > "$R/vit_fp8_fidelity.txt" 2>&1
  echo "vit fp8 fidelity rc=$? at ${SECONDS}s"
  tail -n 5 "$R/vit_fp8_fidelity.txt"
  save
}

# Several questions per photo (`fovea bench --questions K`: an image's K questions submitted together, one new token
# each, prefix cache on) with fovea-base and the new binary alternating, on binary_ab.sh's model and images (made
# here when no call_ab ran before). RUNS: K:PHOTOS pairs; each line prints QPM per question and the prompt tokens
# computed / needed.
call_questions_ab() {  # call_questions_ab REPS "4:48 16:16"
  local rep run v bin k n model=/tmp/fovea_ab/models/InternVL2-8B images=/tmp/fovea_ab/images
  if [ ! -d "$model" ] || [ ! -d "$images" ]; then  # as binary_ab.sh makes them
    python3 bench/gpu/workload.py --photos .carry/photos --out /tmp/fovea_ab --requests 200 > "$R/questions_setup.log" 2>&1
    python3 bench/gpu/family_models.py --row InternVL2-8B --out "$model" --tokenizers .carry/tokenizers \
      >> "$R/questions_setup.log" 2>&1
  fi
  mkdir -p "$R/questions"
  for rep in $(seq 1 "$1"); do
    for run in $2; do
      k=${run%%:*} n=${run##*:}
      for v in base new; do
        bin=$B/fovea-base
        if [ "$v" = new ]; then [ -n "$NEW" ] || continue; bin=$NEW; fi
        [ "$(left)" -gt 45 ] || { echo "questions ab stopped ($(left) s left)"; save; return 0; }
        local tag=k$k-$v-$rep
        timeout -k 5 60 "$bin" bench --model "$model" --images "$images" --backend cuda --load-format dummy \
          --count "$n" --questions "$k" --max-tokens 1 --warmup 2 --gemm-seconds 0 \
          --json "$R/questions/$tag.json" > "$R/questions/$tag.txt" 2>&1
        python3 -c "import json,sys; d=json.load(open(sys.argv[1])); q=d.get('questions',{}); \
print(sys.argv[2], round(d['qpm'],1), 'QPM per question, prompt tokens computed', q.get('prompt_tokens_computed'), \
'of', q.get('prompt_tokens_needed'))" "$R/questions/$tag.json" "$tag" 2>/dev/null || echo "$tag failed"
      done
    done
  done
  save
}
