#!/usr/bin/env bash
# Session 2026-12-07 (8) call 5 (only on an H200): issue 22's family rows that need more than 80 GB (InternVL3-38B
# bf16, InternVL3-78B FP8) with the committed binary, on bench/gpu/call_common.sh's stages.
# Binaries (.carry/bin/bins8c.tar.xz): fovea-new = the committed tree's C++.
source "$(dirname "$0")/../../bench/gpu/call_common.sh"
call_begin s8call5 .carry/bin/bins8c.tar.xz
call_family_h200 fovea-new internvl3-38b,internvl3-78b-fp8 $(( $(left) - 30 ))
