#!/usr/bin/env bash
# Run HERE before bench/gpu/python_vs_run.sh's device call: builds build-gpu-py/fovea and build-gpu-py/python
# (the fovea package, its module built for the GPU machine's Python 3.12 with the CUDA backend, sm_90a). Not
# FOVEA_STATIC (Debian's libpng.a/libz.a are not built for a shared module): the image libraries both link are
# copied into build-gpu-py/python/libs, which python_vs_run.sh puts on LD_LIBRARY_PATH. Then:
#   bench/gpu/prepare_carry.sh   (photos, tokenizers; it checks build-gpu/fovea, which this call does not need)
#   run(command="bench/gpu/python_vs_run.sh", carry=[".carry", "build-gpu-py/fovea", "build-gpu-py/python"])
set -euo pipefail
cd "$(dirname "$0")/../.."
py=${PYTHON312:-/root/.pyenv/versions/3.12.1/bin/python3}
"$py" -c 'import nanobind' 2>/dev/null || "$py" -m pip install -q nanobind
cmake -S . -B build-gpu-py -G Ninja -DCMAKE_BUILD_TYPE=Release -DFOVEA_TESTS=OFF -DFOVEA_STATIC=OFF -DFOVEA_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90a -DFOVEA_PYTHON=ON -DPython_EXECUTABLE="$py" >/dev/null
cmake --build build-gpu-py -j "${FOVEA_JOBS:-2}" --target fovea _fovea
rm -rf build-gpu-py/python/libs && mkdir -p build-gpu-py/python/libs
ldd build-gpu-py/fovea build-gpu-py/python/fovea/_fovea*.so | awk '/jpeg|png|webp|sharpyuv/ { print $3 }' | sort -u |
  while read -r lib; do cp -L "$lib" build-gpu-py/python/libs/; done
strip --strip-unneeded build-gpu-py/fovea build-gpu-py/python/fovea/_fovea*.so
du -sh build-gpu-py/fovea build-gpu-py/python .carry 2>/dev/null || true
echo 'device call: run(command="bench/gpu/python_vs_run.sh", carry=[".carry", "build-gpu-py/fovea", "build-gpu-py/python"], timeout_s=600)'
