#!/usr/bin/env bash
# Installs what Fovea needs from Debian 12's registry (the product's dependencies) and, with --test, the Python
# tools the tests use from PyPI. Safe to run again.
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config nlohmann-json3-dev libjpeg62-turbo-dev libturbojpeg0-dev
      libpng-dev libwebp-dev libgif-dev zlib1g-dev libgtest-dev python3 python3-pip)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if [ "${1:-}" = "--test" ]; then
  # Test-only references: Pillow (pixel oracle), numpy, the openai client, pytest. Small wheels, no torch.
  python3 -m pip install -q --disable-pip-version-check pillow numpy openai pytest 2>&1 | grep -v "WARNING: Running pip as" || true
fi
