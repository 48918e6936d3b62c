#!/usr/bin/env bash
# Session 2026-12-07 (7), an H200 call (needs_h200), issue 22 with main's binary (fovea-base of bins7.tar.xz):
# first the rows that need more than 80 GB (InternVL3-38B bf16, InternVL3-78B FP8), then, in what DEADLINE leaves,
# the rest of family.sh's default table on the same H200 (InternVL2.5-26B bf16, InternVL3.5-8B bf16 and FP8,
# InternVL2-8B). The archive is rewritten every 30 s, so rows that finished come back even if the call is cut.
source "$(dirname "$0")/../../bench/gpu/call_common.sh"
call_begin s7h200 .carry/bin/bins7.tar.xz
if [ "${GPU_MIB:-0}" -le 100000 ]; then echo "not an H200 (${GPU_MIB} MiB): nothing run"; save; exit 0; fi
( while sleep 30; do save; done ) & saver=$!
OUT=$R/family_big WORK=/tmp/fovea_family FOVEA_BIN=$PWD/$B/fovea-base bench/gpu/family.sh \
  --only ${BIG:-internvl3-38b,internvl3-78b-fp8} --budget ${BIG_BUDGET:-300} > "$R/family_big_stdout.txt" 2>&1
echo "family (38B, 78B FP8) rc=$? at ${SECONDS}s"
sed -n '/^| model | weights/,/^$/p' "$R/family_big/family.md" 2>/dev/null
save
if [ "$(left)" -gt 120 ]; then
  OUT=$R/family_rest WORK=/tmp/fovea_family FOVEA_BIN=$PWD/$B/fovea-base bench/gpu/family.sh \
    --only internvl2_5-26b,internvl3_5-8b,internvl3_5-8b-fp8,internvl2-8b --budget $(( $(left) - 15 )) \
    > "$R/family_rest_stdout.txt" 2>&1
  echo "family (the rest) rc=$? at ${SECONDS}s"
  sed -n '/^| model | weights/,/^$/p' "$R/family_rest/family.md" 2>/dev/null
fi
kill $saver
save
