#!/usr/bin/env bash
# CI's sanitizer step (scripts/test.sh calls it), clang CPU builds of only the targets needed, one folder each:
#  1. ASan + UBSan (build-sanitize/): the engine, server, batch-job (the Python stream's core, JobStream,
#     included), model, tokenizer, fetch / S3 / credential, image and quantize tests;
#  2. ThreadSanitizer (build-tsan/): the tests whose threads meet: the engine's (fake runner; and the CPU model
#     with its thread pool through an engine failure and its retries), the data-parallel dispatcher's, the
#     request pump and prefetcher of the batch jobs, the JobStream behind the Python generate()/stream() (pump
#     thread, prefetcher, result queue, cancel, restarts: test_job_stream; Python itself is not instrumented, so
#     python/batch.cc keeps only the GIL and the conversion), the HTTP server's, the fetch limiter's and the
#     credential refresh; two at a time;
#  3. every libFuzzer target for FOVEA_FUZZ_SECONDS (default 15) on its committed seeds, two at a time.
# Exits non-zero on any test failure, sanitizer report or fuzzer crash (the crashing input is kept in
# build-sanitize/fuzz-artifacts/). FOVEA_TSAN_TESTS=0 leaves step 2 out.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${FOVEA_SANITIZE_DIR:-build-sanitize}
seconds=${FOVEA_FUZZ_SECONDS:-15}
tests=(test_engine_hash test_engine_parts test_scheduler test_engine test_engine_demo test_server test_openai test_media test_jobs test_job_stream
       test_model_load test_safetensors test_tokenizer test_byte_level_bpe
       test_fetch test_image test_w4_quantize test_quantized_config test_row_sampler)
tsan_dir=${FOVEA_TSAN_DIR:-build-tsan}
tsan_tests=(test_engine test_engine_failure_demo test_data_parallel test_jobs test_job_stream test_server test_fetch)
mapfile -t fuzzers < <(ls tests/fuzz/corpus)
start=$(date +%s)
FOVEA_SANITIZER=address ./scripts/build_sanitize.sh "${tests[@]}" "${fuzzers[@]}"
echo "sanitize: build took $(( $(date +%s) - start )) s"
status=0
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
rm -rf "$dir/test-results" && mkdir -p "$dir/test-results"
regex="^($(IFS='|'; echo "${tests[*]}"))\$"
(cd "$dir" && GTEST_OUTPUT="xml:$PWD/test-results/" ctest --output-on-failure -j "$(nproc)" --timeout 1200 \
  -R "$regex") || status=1
python3 scripts/test_summary.py "$dir/test-results" "sanitizer tests (ASan + UBSan)" || true
echo "sanitize: tests done at $(( $(date +%s) - start )) s"

if [ "${FOVEA_TSAN_TESTS:-1}" != 0 ]; then
  FOVEA_SANITIZER=thread ./scripts/build_sanitize.sh "${tsan_tests[@]}"
  echo "sanitize: ThreadSanitizer build done at $(( $(date +%s) - start )) s"
  rm -rf "$tsan_dir/test-results" && mkdir -p "$tsan_dir/test-results"
  tsan_regex="^($(IFS='|'; echo "${tsan_tests[*]}"))\$"
  # A report fails its test (exit code 66); history_size=4 keeps the other thread's stack in long runs.
  (cd "$tsan_dir" && TSAN_OPTIONS="halt_on_error=0 exitcode=66 history_size=4 second_deadlock_stack=1" \
    GTEST_OUTPUT="xml:$PWD/test-results/" ctest --output-on-failure -j 2 --timeout 1200 -R "$tsan_regex") || status=1
  python3 scripts/test_summary.py "$tsan_dir/test-results" "sanitizer tests (ThreadSanitizer)" || true
  echo "sanitize: ThreadSanitizer tests done at $(( $(date +%s) - start )) s"
fi

# Each fuzzer briefly; a summary line each (executions, coverage edges, result).
mkdir -p "$dir/fuzz-logs"
run_one() {
  local target=$1 log="$dir/fuzz-logs/$1.log"
  # Built above, all at once: two fuzzers run side by side, and must not both build in $dir.
  if FOVEA_SANITIZE_DIR=$dir FOVEA_FUZZ_BUILD=0 ./scripts/fuzz.sh "$target" "$seconds" >"$log" 2>&1; then
    result=ok
  else
    result=FAILED
  fi
  local execs cov
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || echo "?")
  printf '  %-22s %-6s %10s execs %6s edges\n' "$target" "$result" "$execs" "$cov"
  if [ "$result" = FAILED ]; then tail -40 "$log" | sed 's/^/    /'; return 1; fi
}
export -f run_one
export dir seconds
echo "fuzzers, ${seconds} s each under ASan + UBSan:"
printf '%s\n' "${fuzzers[@]}" | xargs -P 2 -I{} bash -c 'run_one {}' || status=1
echo "sanitize: all done in $(( $(date +%s) - start )) s"
exit $status
