#!/usr/bin/env bash
# Run HERE before the device call: puts what the GPU machine needs into the git-ignored .carry/ (the photos, the
# tokenizers, the commit being measured) and checks the carried binary. Prints the device call to make.
#   bench/gpu/prepare_carry.sh [--build]    (--build: configures and builds build-gpu/fovea first, -j2)
set -euo pipefail
cd "$(dirname "$0")/../.."
shared=${SHARED:-../shared}
if [ "${1:-}" = --build ]; then
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DFOVEA_STATIC=ON -DFOVEA_TESTS=OFF \
    -DCMAKE_CUDA_ARCHITECTURES=90a >/dev/null
  cmake --build build-gpu -j2 --target fovea
fi
# What is already there (the lead may have put it there) is kept; only what is missing is copied.
copy_once() {  # copy_once SOURCE DEST_DIR
  mkdir -p "$2"
  [ -n "$(ls -A "$2" 2>/dev/null)" ] || cp -r "$1"/. "$2"/
}
copy_once "$shared/data/photos" .carry/photos
copy_once "$shared/data/tokenizers/internlm2" .carry/tokenizers/internlm2
copy_once "$shared/data/tokenizers/qwen2" .carry/tokenizers/qwen2
commit=$(git rev-parse HEAD)
[ -z "$(git status --porcelain --untracked-files=no -- src CMakeLists.txt bench)" ] || commit="$commit (+ uncommitted changes)"
rm -f .carry/COMMIT && echo "$commit" > .carry/COMMIT
if [ ! -x build-gpu/fovea ]; then
  echo "prepare_carry: build-gpu/fovea is missing (run with --build)" >&2
  exit 1
fi
missing=$(ldd build-gpu/fovea | grep -v -E 'libc\.so|libm\.so|ld-linux|linux-vdso|libpthread|libdl|librt|libcuda|libcublas' || true)
[ -z "$missing" ] || { echo "prepare_carry: build-gpu/fovea also links these (absent on the GPU machine?):"; echo "$missing"; }
echo "carry: $(du -sh .carry | cut -f1) in .carry, $(du -sh build-gpu/fovea | cut -f1) binary; commit $commit"
echo 'device call: run(command="bench/gpu/run_all.sh --name h200", carry=[".carry", "build-gpu/fovea"], timeout_s=600)'
echo 'afterwards:  python3 bench/gpu/report.py --from-json FILES_AT/report.json --results-dir bench/results --name h200'
