#!/usr/bin/env bash
# README command 2: builds and runs every test (C++ through ctest, Python through pytest). GPU tests skip
# cleanly on machines without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install_deps.sh --test
./scripts/build.sh
status=0
(cd build && ctest --output-on-failure -j "$(nproc)" --timeout 900) || status=1
if ls tests/python/test_*.py >/dev/null 2>&1; then
  # build/python: the fovea package as scripts/build.sh builds it (also for Ray's worker processes).
  FOVEA_BIN="$PWD/build/fovea" PYTHONPATH="$PWD/build/python${PYTHONPATH:+:$PYTHONPATH}" \
    python3 -m pytest -q tests/python || status=1
fi
exit $status
