#!/usr/bin/env bash
# Configures and builds a sanitizer tree (clang, no CUDA). FOVEA_SANITIZER picks which:
#   address (default): ASan + UBSan + the libFuzzer targets, in build-sanitize/ (or $FOVEA_SANITIZE_DIR)
#   thread:            ThreadSanitizer, in build-tsan/ (or $FOVEA_TSAN_DIR)
# Each sanitizer has a folder of its own (their runtimes cannot share a binary). Arguments: the targets to build
# (default: all). Used by scripts/fuzz.sh and scripts/test_sanitize.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${FOVEA_JOBS:-$(nproc)}
cc=${FOVEA_FUZZ_CC:-clang-14}
cxx=${FOVEA_FUZZ_CXX:-clang++-14}
case "${FOVEA_SANITIZER:-address}" in
  address) dir=${FOVEA_SANITIZE_DIR:-build-sanitize}; flags=(-DFOVEA_SANITIZE=ON -DFOVEA_FUZZ=ON) ;;
  thread) dir=${FOVEA_TSAN_DIR:-build-tsan}; flags=(-DFOVEA_TSAN=ON) ;;
  *) echo "FOVEA_SANITIZER must be address or thread" >&2; exit 2 ;;
esac
if [ ! -f "$dir/CMakeCache.txt" ]; then
  # -O1 with line tables: about half the compile time of -O2 -g, still fast enough to fuzz, and sanitizer
  # reports keep file:line. ("Sanitize" is no CMake build type, so none of Release's -O3 is added.)
  CC=$cc CXX=$cxx cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Sanitize -DFOVEA_CUDA=OFF \
    -DCMAKE_C_FLAGS="-O1 -gline-tables-only" -DCMAKE_CXX_FLAGS="-O1 -gline-tables-only" \
    "${flags[@]}" >/dev/null
fi
targets=()
for t in "$@"; do targets+=(-t "$t"); done
cmake --build "$dir" -j "$jobs" "${targets[@]}"
