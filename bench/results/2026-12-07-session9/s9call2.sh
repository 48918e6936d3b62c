#!/usr/bin/env bash
# Session 2026-12-07 (9) call 2: main (161d51e) against two changes, on bench/gpu/call_common.sh's stages.
# Binaries (.carry/bin/bins9b.tar.xz): fovea-base / test_ops-base = main; fovea-att = dense attention taking the
# class token apart (p.lead); fovea-new / test_ops-new / test_golden_forward-new = that and the ViT's layer scales
# folded into proj / fc2, which add into the residual stream in their GEMMs' epilogues (linear_residual). On an
# H200, issue 22's rows that need more than 80 GB come first (main's binary).
source "$(dirname "$0")/../../bench/gpu/call_common.sh"
call_begin s9call2 .carry/bin/bins9b.tar.xz
call_family_h200 fovea-base internvl3-38b,internvl3-78b-fp8 250
call_test_new
call_perf "attention" "base new"
call_vit_ab 2 "base:none att:none new:none base:fp8-all att:fp8-all new:fp8-all"
[ -n "$NEW" ] && call_vit_alone "$NEW" none,fp8-all
call_ab 1 InternVL2-8B:none InternVL2-8B:fp8-all
