#!/usr/bin/env python3
"""Every FOVEA_* environment variable the shipping binary can read is documented in the README.

Lists the FOVEA_[A-Z0-9_]* strings in the binary (as `strings fovea | grep -o 'FOVEA_...'` would) and checks each
against the README's "Environment variables" section; a variable there that the binary no longer names is
reported too (stale documentation). Experiments and test hooks stay out of the binary (issue 23): a new variable
needs a line in that section, or it belongs in a test build or a workbench.

usage: scripts/check_env_vars.py BINARY [README.md]   (exit 1 on a mismatch)
"""
import pathlib
import re
import sys

NAME = re.compile(rb"FOVEA_[A-Z0-9_]+")
SECTION = "## Environment variables"


def binary_names(path):
    return {m.decode() for m in NAME.findall(pathlib.Path(path).read_bytes())}


def documented_names(readme):
    text = pathlib.Path(readme).read_text(encoding="utf-8")
    start = text.find(SECTION)
    if start < 0:
        sys.exit(f"{readme}: no '{SECTION}' section")
    end = text.find("\n## ", start + len(SECTION))
    section = text[start:end if end >= 0 else len(text)]
    # The documented variables open the section's table rows: "| `FOVEA_X` | ...".
    return set(re.findall(r"^\| `(FOVEA_[A-Z0-9_]+)`", section, flags=re.M))


def main(argv):
    if len(argv) not in (2, 3):
        sys.exit(__doc__)
    binary = argv[1]
    readme = argv[2] if len(argv) == 3 else pathlib.Path(__file__).resolve().parent.parent / "README.md"
    found, documented = binary_names(binary), documented_names(readme)
    status = 0
    for name in sorted(found - documented):
        print(f"{binary} reads {name}, which the README's '{SECTION}' does not list")
        status = 1
    # CPU-only builds lack the CUDA backend's variables: documented-but-absent is only a note there.
    for name in sorted(documented - found):
        print(f"note: {name} is documented but not in {binary} (a CUDA-only variable in a CPU build, or stale)")
    if status == 0:
        print(f"check_env_vars: {len(found)} FOVEA_* variables in {binary}, all documented: {' '.join(sorted(found))}")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
