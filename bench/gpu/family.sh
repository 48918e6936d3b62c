#!/usr/bin/env bash
# The InternVL family with dummy weights on one H200, in one device call (issue 22): InternVL2-8B-shaped bf16
# (the baseline, against the last recorded `fovea bench`), InternVL3-78B FP8, InternVL2.5-26B, InternVL3-38B,
# InternVL3.5-8B bf16 and FP8 on the listing-photo workload; per model QPM, ViT tiles/s, the fraction of the
# sustained FLOP floor, GPU peak memory and the memory plan (bench/gpu/family.py). Builds nothing: the binary is
# carried (bench/gpu/prepare_carry.sh --build).
#
#   device: run(command="bench/gpu/family.sh", carry=[".carry", "build-gpu/fovea"], timeout_s=600)
#   here:   python3 bench/gpu/family_report.py --from-json FILES_AT/family.json --name family-h200
#           (writes bench/results/<date>-family-h200.md and .json)
#   CPU rehearsal: FOVEA_BIN=build-cpu/fovea PHOTOS=../shared/data/photos TOKENIZERS=../shared/data/tokenizers \
#                  bench/gpu/family.sh --tiny
# Options (family.py): --budget S (540), --only KEY,... , --tiny. Env: OUT (results: family.json, family.md,
# log.txt, artifacts.tar.gz), WORK (scratch, /tmp/fovea_family), FOVEA_BIN, PHOTOS, TOKENIZERS.
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TQDM_DISABLE=1
OUT=${OUT:-$PWD/out/family}
WORK=${WORK:-/tmp/fovea_family}
export OUT WORK
mkdir -p "$OUT" "$WORK"
# family.py keeps its own budget (540 s by default); this outer limit only stops a hang before the call's 600 s.
timeout -k 10 580 python3 bench/gpu/family.py "$@" 2>&1 | tee "$OUT/log.txt"
rc=${PIPESTATUS[0]}
(cd "$WORK" && tar czf "$OUT/artifacts.tar.gz" --ignore-failed-read ./*.json ./*.log ./*.txt models/*/config.json \
  2>/dev/null)
exit "$rc"
