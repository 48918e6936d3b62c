#!/usr/bin/env bash
# README command 2: builds and runs every test (C++ through ctest, Python through pytest), prints how many cases
# ran, passed, failed and were skipped (and why), then the sanitizer + fuzzing step (scripts/test_sanitize.sh;
# FOVEA_SANITIZE_TESTS=0 leaves it out). GPU tests skip cleanly on machines without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install_deps.sh --test
./scripts/build.sh
status=0
# The shipping binary reads only the FOVEA_* variables the README documents.
python3 scripts/check_env_vars.py build/fovea || status=1
# No product file includes or links a module of a higher layer (the order is in the script and docs/design.md).
python3 scripts/check_layers.py || status=1
results="$PWD/build/test-results"
rm -rf "$results" && mkdir -p "$results"
(cd build && GTEST_OUTPUT="xml:$results/" ctest --output-on-failure -j "$(nproc)" --timeout 900) || status=1
if ls tests/python/test_*.py >/dev/null 2>&1; then
  # build/python: the fovea package as scripts/build.sh builds it (also for Ray's worker processes).
  FOVEA_BIN="$PWD/build/fovea" PYTHONPATH="$PWD/build/python${PYTHONPATH:+:$PYTHONPATH}" \
    python3 -m pytest -q -rs --junitxml="$results/pytest.xml" tests/python || status=1
fi
python3 scripts/test_summary.py "$results" "tests" || true
if [ "${FOVEA_SANITIZE_TESTS:-1}" != 0 ]; then
  ./scripts/test_sanitize.sh || status=1
fi
exit $status
