#!/usr/bin/env bash
# Session 2026-12-07 (11) call 2, after call 1 passed the new binary's tests: 4 and 16 questions per photo with main
# (b7a278b) and this session's binary alternating, then a second end-to-end A/B round (bf16, FP8).
source "$(dirname "$0")/../../bench/gpu/call_common.sh"
call_begin s11call2 .carry/bin/bins11a.tar.xz
NEW=$B/fovea-new
call_questions_ab 2 "4:48 16:16"
call_ab 1 InternVL2-8B:none InternVL2-8B:fp8
save
