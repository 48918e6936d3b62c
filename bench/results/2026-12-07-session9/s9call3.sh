#!/usr/bin/env bash
# Session 2026-12-07 (9) call 3: main (161d51e) against the kept form of the two changes, on
# bench/gpu/call_common.sh's stages. Binaries (.carry/bin/bins9c.tar.xz): fovea-base / test_ops-base = main;
# fovea-new / test_ops-new / test_golden_forward-new = dense attention taking only the class token's key apart
# (its rows stay in whole row tiles: call 2's separate kernel for them lost) + the ViT's layer scales folded into
# proj / fc2, which add into the residual stream in their GEMMs' epilogues (linear_residual). Then, as time
# allows, the attention op alone, the ViT against transformers and the new binary's fidelity.
source "$(dirname "$0")/../../bench/gpu/call_common.sh"
call_begin s9call3 .carry/bin/bins9c.tar.xz
call_family_h200 fovea-base internvl3-38b,internvl3-78b-fp8 250
call_test_new
call_vit_ab 1 "base:none new:none base:fp8-all new:fp8-all"
call_ab 1 InternVL2-8B:none InternVL2-8B:fp8-all
call_perf "attention" "base new"
[ -n "$NEW" ] && [ "$(left)" -gt 200 ] && call_vit_alone "$NEW" none,fp8-all
[ -n "$NEW" ] && call_vit_fp8_fidelity "$NEW" 64
