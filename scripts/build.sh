#!/usr/bin/env bash
# Configures and builds into build/ (or $FOVEA_BUILD_DIR). Extra arguments go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${FOVEA_BUILD_DIR:-build}
jobs=${FOVEA_JOBS:-$(nproc)}
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$dir" -j "$jobs"
