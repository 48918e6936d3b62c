#!/usr/bin/env bash
# Run HERE before the peer device calls (issue 26): fetches the wheels of bench/gpu/peer_pins.txt from PyPI
# (checked against their sha256), installs each set (common, lmdeploy, vllm) into a staging folder for
# CPython 3.12 x86-64 (pip install --target, no deps: exactly the pinned files), drops what the benchmark
# cannot use, packs each set as one .tar.xz and cuts the three into byte ranges that fill the git-ignored
# carries .carry_peers/c1, c2, ... in order (bench/gpu/peers_stash.py: manifest + sha256 in every carry).
#   Dropped: LMDeploy's TurboMind extension (_turbomind*.so, 364 MB; it needs CUDA 12 libraries the GPU machine
#   lacks, so LMDeploy runs its PyTorch engine) and libxgrammar.a (a static library for building TurboMind);
#   vLLM's FlashAttention-2 (_vllm_fa2_C, 191 MB; Hopper runs FA3) and fused-MoE (_moe_C, 38 MB; dense model)
#   extensions; __pycache__ and console scripts everywhere.
#   bench/gpu/peers_carry.sh [--cache DIR] [--capacity BYTES]
# A carry's capacity: 64 MiB less the working tree that travels with every call (tracked + untracked files
# that git does not ignore, measured here) less 3 MiB (room for the tree to grow before the calls). Prints the device calls to make.
set -euo pipefail
cd "$(dirname "$0")/../.."
cache=${FOVEA_CACHE:-$HOME/.cache/fovea}/peers capacity="" out=.carry_peers
while [ $# -gt 0 ]; do
  case "$1" in
    --cache) cache=$2; shift 2 ;;
    --capacity) capacity=$2; shift 2 ;;
    *) echo "peers_carry.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
pins=bench/gpu/peer_pins.txt
git check-ignore -q "$out/c1" || { echo "peers_carry.sh: $out is not git-ignored (add /.carry_peers/ to .gitignore)" >&2; exit 1; }
mkdir -p "$cache"
platforms=()
for n in 5 17 24 26 27 28 31 34 35; do platforms+=(--platform "manylinux_2_${n}_x86_64"); done
platforms+=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64)
target_flags=(--no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${platforms[@]}")

# 1. the pinned wheels, each checked against its sha256
grep -v '^#' "$pins" | while read -r set file sha; do
  [ -n "$set" ] || continue
  if [ ! -f "$cache/$file" ] || [ "$(sha256sum "$cache/$file" | cut -d' ' -f1)" != "$sha" ]; then
    name=${file%%-*} rest=${file#*-}
    rm -f "$cache/$file"
    python3 -m pip download --quiet --disable-pip-version-check "${target_flags[@]}" --abi cp312 --abi abi3 \
      --abi none --platform any -d "$cache" "${name//_/-}==${rest%%-*}"
  fi
  [ -f "$cache/$file" ] || { echo "peers_carry.sh: pip did not fetch $file" >&2; exit 1; }
  got=$(sha256sum "$cache/$file" | cut -d' ' -f1)
  [ "$got" = "$sha" ] || { echo "peers_carry.sh: $file has sha256 $got, pinned $sha" >&2; exit 1; }
done

# 2. one staging tree per set, 3. trimmed, 4. packed; a packed set is kept in the cache under a key made of its
# pins and this recipe, so a second run (a new tree size, another checkout) only re-cuts the carries.
recipe=1
build=$out/build
rm -rf "$out"
mkdir -p "$build" "$cache/blobs"
blob_args=()
for set in common lmdeploy vllm; do
  wheels=$(awk -v s="$set" '$1 == s { print $2 }' "$pins")
  key=$( (echo "recipe $recipe"; awk -v s="$set" '$1 == s' "$pins") | sha256sum | cut -c1-16)
  blob=$cache/blobs/$set-$key.tar.xz
  if [ ! -s "$blob" ]; then
    stage=$build/$set
    # shellcheck disable=SC2046
    python3 -m pip install --quiet --disable-pip-version-check --no-compile --no-index --target "$stage" \
      "${target_flags[@]}" $(for w in $wheels; do echo "$cache/$w"; done)
    case $set in
      lmdeploy) rm -f "$stage"/lmdeploy/turbomind/_turbomind*.so "$stage"/lmdeploy/turbomind/lib64/libxgrammar.a ;;
      vllm) rm -f "$stage"/vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so "$stage"/vllm/_moe_C.abi3.so ;;
    esac
    find "$stage" -name __pycache__ -prune -exec rm -rf {} +
    rm -rf "$stage/bin"
    tar -C "$stage" --sort=name --owner=0 --group=0 --numeric-owner -cf - . | xz -T2 -9 > "$blob.tmp"
    mv "$blob.tmp" "$blob"
    echo "$set: $(du -sb "$stage" | cut -f1) bytes of files -> $(stat -c %s "$blob") bytes .tar.xz"
    rm -rf "$stage"
  fi
  blob_args+=(--blob "$set=$blob")
done

# 5. the carries
tree=$(git ls-files -z -co --exclude-standard | xargs -0 stat -c %s 2>/dev/null | awk '{ s += $1 } END { print s }')
[ -n "$capacity" ] || capacity=$(( 64 * 1048576 - tree - 3 * 1048576 ))
python3 bench/gpu/peers_stash.py pack --out "$out" --capacity "$capacity" "${blob_args[@]}" > "$out/manifest.json"
rm -rf "$build"
carries=$(ls -d "$out"/c* | wc -l)
for c in $(seq 1 "$carries"); do
  bytes=$(du -cb "$out/c$c" | tail -1 | cut -f1)
  echo "c$c: $bytes bytes + tree $tree = $(awk -v b=$(( bytes + tree )) 'BEGIN { printf "%.2f", b / 1048576 }') MiB (limit 64): $(ls "$out/c$c" | grep -c part) parts"
done
python3 - "$out/manifest.json" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
for blob in m["blobs"]:
    print(f"{blob['name']}: {blob['bytes']} bytes, sha256 {blob['sha256'][:16]}..., in " +
          ", ".join(sorted({p['carry'] for p in blob['parts']})))
EOF
echo "device calls, one warm machine, right after bench/gpu/run_all.sh (its model, images and reference):"
for c in $(seq 1 "$carries"); do
  echo "  run(command=\"bench/gpu/peers.sh --stash $out/c$c\", carry=[\"$out/c$c\"], timeout_s=600)"
done
