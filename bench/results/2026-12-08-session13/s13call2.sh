#!/usr/bin/env bash
# Session 2026-12-08 (13) call 2 (warm machine right after call 1): one more end-to-end A/B round of call 1's
# binaries, then 4 and 16 questions per photo with both. NEW as call 1 settled it: $1 = new or silu.
source "$(dirname "$0")/../../bench/gpu/call_common.sh"
call_begin s13call2 .carry/bin/bins13b.tar.xz
NEW=$B/fovea-${1:-new}
call_ab 1 InternVL2-8B:none InternVL2-8B:fp8
call_questions_ab 1 "4:48 16:16"
save
