#!/usr/bin/env bash
# Session 2026-12-07 (7) call 1: session 6's staged A/B (it never started there) plus the
# register-resident SwiGLU -> FP8 kernel, on the shared stages of
# bench/gpu/call_common.sh. Binaries (.carry/bin/bins7.tar.xz): fovea-base / test_ops-base = main's C++;
# *-new = branch s6-kernels (one-warp-per-head rope / q-k norm / KV write; ping-pong turns in the head-dim-128
# prefill attention; silu_mul_fp8 with its row in registers). On an H200 the family rows that need more than 80 GB come first (issue 22).
source "$(dirname "$0")/../../bench/gpu/call_common.sh"
call_begin s7call1 .carry/bin/bins7.tar.xz
call_family_h200 fovea-base
call_test_new
call_perf "attention family" "base new"
call_ab 2 InternVL3_5-8B:fp8 InternVL2-8B:fp8
call_family internvl3_5-8b-fp8,internvl2-8b
