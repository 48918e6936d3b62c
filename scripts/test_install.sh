#!/usr/bin/env bash
# The public API is whole: installs the library component of an already built tree (headers, libfovea, the CMake
# package) into a temporary prefix, configures and builds examples/cpp against that prefix alone
# (find_package(Fovea), no source-tree include paths), and runs it on the demo model and a demo image.
# Nothing is compiled twice: the library is the build's own libfovea. ctest runs it as test_install.
# usage: scripts/test_install.sh [BUILD_DIR]   (default: build)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

[ -e "$build/lib/libfovea.so" ] || { echo "test_install: $build/lib/libfovea.so is not built (cmake --build $build)"; exit 1; }
cmake --install "$build" --prefix "$work/prefix" --component library >/dev/null
# A copy of the example, away from the source tree, so that nothing but the prefix can be found.
cp -r "$root/examples/cpp" "$work/example-src"
cmake -S "$work/example-src" -B "$work/example" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$work/prefix" \
  >"$work/configure.log" || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/example" >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }

"$build/fovea" make-demo-model --out "$work/model" >/dev/null
"$build/fovea" make-demo-images --out "$work/images" >/dev/null
mkdir "$work/one"
cp "$(find "$work/images" -type f | sort | head -n 1)" "$work/one/"
image="$(find "$work/one" -type f)"
prompt="What is in the picture?"
"$work/example/describe_image" "$work/model" "$image" "$prompt" --backend cpu --max-tokens 4 \
  >"$work/answer.txt" 2>"$work/run.log" || { cat "$work/run.log"; exit 1; }
cat "$work/run.log"
# The oracle: `fovea run` (the same engine through the CLI and the batch job) answers the same, greedy.
"$build/fovea" run --model "$work/model" --backend cpu --images "$work/one" --prompt "$prompt" --max-tokens 4 \
  --output "$work/cli.jsonl" --quiet >"$work/cli.log" 2>&1 || { cat "$work/cli.log"; exit 1; }
python3 - "$work/answer.txt" "$work/cli.jsonl" <<'PY'
import json, sys
example = open(sys.argv[1], encoding="utf-8").read()[:-1]  # the example ends its answer with one newline
cli = json.loads(open(sys.argv[2], encoding="utf-8").readline())["text"]
if example != cli:
    sys.exit(f"test_install: the example answered {example!r}, fovea run {cli!r}")
PY
echo "test_install: examples/cpp, built against the installed package alone, answers as fovea run does"
