#!/usr/bin/env bash
# Configures and builds into build/ (or $FOVEA_BUILD_DIR). Extra arguments go to cmake's configure step.
# The Python module (build/python/fovea) comes out of the same configure when python3 has nanobind.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${FOVEA_BUILD_DIR:-build}
jobs=${FOVEA_JOBS:-$(nproc)}
python=()
if python3 -c 'import nanobind' 2>/dev/null; then python=(-DFOVEA_PYTHON=ON -DPython_EXECUTABLE="$(python3 -c 'import sys; print(sys.executable)')"); fi
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "${python[@]}" "$@" >/dev/null
cmake --build "$dir" -j "$jobs"
