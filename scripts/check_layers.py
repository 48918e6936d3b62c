#!/usr/bin/env python3
"""No product file reaches up: the layers of Fovea, lowest first, and the check that holds the code to them.

A module (a folder of src/, the public headers include/fovea, the Python binding python/*.cc) may include headers
of, and link, modules of lower layers and its own, never one of its own layer or above. Checked: every #include
"x/..." of src/, include/ and python/ (tests, bench and tools are not product), and the fovea_* libraries each
CMakeLists.txt links. docs/design.md states the same order.

usage: scripts/check_layers.py   (exit 1 on a violation, naming the file and line)
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent

# Lowest first. One line, one layer; the modules of a layer do not use each other.
LAYERS = [
    ["fovea"],                        # include/fovea: the public API (standard headers only)
    ["core"],                         # errors, tensors, threads, hashing
    ["image", "tokenizer", "fetch"],  # image decoding + tiling, tokenizers, HTTP/S3 downloads
    ["backend"],                      # CPU reference and CUDA ops
    ["model"],                        # configs, weight maps, chat templates, checkpoints
    ["runtime"],                      # the InternVL runner: vision + language model steps on a backend
    ["engine"],                       # scheduler, KV blocks, caches, data-parallel dispatch; InferenceService
    ["media"],                        # images from paths, URLs, data URIs
    ["requests"],                     # request fields shared by the front ends
    ["openai"],                       # the OpenAI protocol types and parsing
    ["jobs", "server"],               # batch jobs (fovea run, bench) | the HTTP server (fovea serve)
    ["quantize", "python"],           # checkpoint quantization | the Python module (not the server: same layer)
    ["cli"],                          # the fovea binary
]
LEVEL = {module: level for level, layer in enumerate(LAYERS) for module in layer}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/[^"]+"', re.M)
LINKED = re.compile(r"\b(?:fovea_)?([a-z_]+)\b")


def module_of(path):
    rel = path.relative_to(ROOT).parts
    if rel[0] == "include":
        return "fovea"
    if rel[0] == "python":
        return "python"
    return rel[1]  # src/<module>/...


def product_files():
    for pattern in ("src/*/**/*", "include/fovea/*.h", "python/*.cc", "python/*.h"):
        for path in sorted(ROOT.glob(pattern)):
            if path.is_file() and path.suffix in (".h", ".cc", ".cu", ".cuh"):
                yield path


def may_use(user, used):
    return used == user or LEVEL[used] < LEVEL[user]


def include_violations():
    for path in product_files():
        user = module_of(path)
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in INCLUDE.finditer(text):
            used = match.group(1)
            if used not in LEVEL or may_use(user, used):
                continue
            line = text.count("\n", 0, match.start()) + 1
            yield f"{path.relative_to(ROOT)}:{line}: {user} (layer {LEVEL[user]}) includes {used} (layer {LEVEL[used]})"


def link_lists(text):
    """The words of every target_link_libraries(...) and foreach(...) list, comments dropped."""
    text = re.sub(r"#[^\n]*", "", text)
    for call in re.finditer(r"\b(target_link_libraries|foreach)\s*\(([^)]*)\)", text):
        words = call.group(2).split()
        yield call.start(), words[1:]  # the target, or the loop variable, is not a dependency


def link_violations():
    cmake_files = [(p, p.parent.name) for p in sorted(ROOT.glob("src/*/CMakeLists.txt"))]
    cmake_files.append((ROOT / "python" / "CMakeLists.txt", "python"))
    for path, user in cmake_files:
        if not path.exists() or user not in LEVEL:
            continue
        text = path.read_text(encoding="utf-8")
        for start, words in link_lists(text):
            for word in words:
                m = LINKED.fullmatch(word)
                used = m.group(1) if m else None
                if used not in LEVEL or used == "fovea" or may_use(user, used):
                    continue
                yield f"{path.relative_to(ROOT)}: {user} (layer {LEVEL[user]}) links fovea_{used} (layer {LEVEL[used]})"


def main():
    modules = {p.name for p in (ROOT / "src").iterdir() if p.is_dir()}
    unplaced = sorted(modules - set(LEVEL))
    problems = [f"src/{m}: a module with no layer in scripts/check_layers.py" for m in unplaced]
    problems += list(include_violations()) + list(link_violations())
    for problem in problems:
        print(problem)
    if problems:
        return 1
    print("check_layers: " + " < ".join("/".join(layer) for layer in LAYERS) + ": no file reaches up")
    return 0


if __name__ == "__main__":
    sys.exit(main())
