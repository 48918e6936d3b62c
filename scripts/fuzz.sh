#!/usr/bin/env bash
# Runs one libFuzzer target for SECONDS on its committed seeds (tests/fuzz/corpus/TARGET) under ASan + UBSan.
# New interesting inputs go to build-sanitize/fuzz-corpus/TARGET (not the committed seeds); a crash is written to
# build-sanitize/fuzz-artifacts/ and the script exits non-zero. Extra arguments go to libFuzzer.
# FOVEA_FUZZ_BUILD=0 skips building the target (the caller built it: scripts/test_sanitize.sh runs two fuzzers at
# once, and two builds in one build folder at once would race on it).
# Usage: scripts/fuzz.sh TARGET SECONDS [libFuzzer flags...]   (targets: ls tests/fuzz/corpus)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n 2,7p "$0"; exit 2; }
target=$1 seconds=$2
shift 2
[ -d "tests/fuzz/corpus/$target" ] || { echo "fuzz.sh: no target $target (see tests/fuzz/corpus)" >&2; exit 2; }
dir=${FOVEA_SANITIZE_DIR:-build-sanitize}
if [ "${FOVEA_FUZZ_BUILD:-1}" != 0 ]; then FOVEA_SANITIZER=address ./scripts/build_sanitize.sh "$target" >/dev/null; fi
mkdir -p "$dir/fuzz-corpus/$target" "$dir/fuzz-artifacts"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
exec "$dir/fuzz/$target" -max_total_time="$seconds" -timeout=60 -rss_limit_mb=2560 -max_len=1048576 \
  -print_final_stats=1 -artifact_prefix="$dir/fuzz-artifacts/$target-" "$@" \
  "$dir/fuzz-corpus/$target" "tests/fuzz/corpus/$target"
