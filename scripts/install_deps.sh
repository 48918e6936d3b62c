#!/usr/bin/env bash
# Installs what Fovea needs from Debian 12's registry (the product's dependencies) and, with --test, the Python
# tools the tests use from PyPI. Safe to run again.
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config nlohmann-json3-dev libjpeg62-turbo-dev libturbojpeg0-dev
      libpng-dev libwebp-dev libgif-dev zlib1g-dev libgtest-dev python3 python3-pip
      libcurl4-openssl-dev)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The sanitizer + fuzzing build (scripts/test_sanitize.sh) uses clang; test-only, from Debian too.
if [ "${1:-}" = "--test" ] && ! dpkg -s clang-14 libclang-rt-14-dev >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends clang-14 libclang-rt-14-dev
fi
if [ "${1:-}" = "--test" ]; then
  # Test-only references: Pillow (pixel oracle), numpy, the openai client, pytest, sentencepiece (the tokenizer
  # oracle; 1.4 MB), moto (a local S3 that checks SigV4 signatures) with boto3 to fill it; nanobind +
  # scikit-build-core build the Python module (scripts/build.sh), Ray Data runs its Predictor's test. No torch: CPU
  # torch + transformers would add ~800 MB to every CI run.
  # Debian's own python3 is "externally managed" (PEP 668): there pip needs --break-system-packages.
  wheels=(pillow numpy openai pytest sentencepiece "moto[server]" boto3 nanobind scikit-build-core "ray[data]")
  if ! python3 -c 'import PIL, numpy, openai, pytest, sentencepiece, moto.server, boto3, nanobind, scikit_build_core, ray.data' 2>/dev/null; then
    export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
    python3 -m pip install -q "${wheels[@]}" 2>/dev/null ||
      python3 -m pip install -q --break-system-packages "${wheels[@]}"
  fi
fi
