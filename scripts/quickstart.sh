#!/usr/bin/env bash
# README command 1: install, build, make the demo model and demo images, run a batch job on them.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install_deps.sh
./scripts/build.sh
mkdir -p demo
./build/fovea make-demo-model --out demo/model
./build/fovea make-demo-images --out demo/images
./build/fovea run --model demo/model --images demo/images --prompt "Is there a bunk bed? Answer yes or no." \
  --output demo/results.jsonl
echo "results in demo/results.jsonl (random weights: the answers are meaningless)"
head -n 3 demo/results.jsonl
