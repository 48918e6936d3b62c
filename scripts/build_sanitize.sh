#!/usr/bin/env bash
# Configures and builds the ASan + UBSan + libFuzzer tree (clang, no CUDA) into build-sanitize/ (or
# $FOVEA_SANITIZE_DIR). Arguments: the targets to build (default: all). Used by scripts/fuzz.sh and
# scripts/test_sanitize.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${FOVEA_SANITIZE_DIR:-build-sanitize}
jobs=${FOVEA_JOBS:-$(nproc)}
cc=${FOVEA_FUZZ_CC:-clang-14}
cxx=${FOVEA_FUZZ_CXX:-clang++-14}
if [ ! -f "$dir/CMakeCache.txt" ]; then
  CC=$cc CXX=$cxx cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFOVEA_CUDA=OFF \
    -DFOVEA_SANITIZE=ON -DFOVEA_FUZZ=ON >/dev/null
fi
targets=()
for t in "$@"; do targets+=(-t "$t"); done
cmake --build "$dir" -j "$jobs" "${targets[@]}"
