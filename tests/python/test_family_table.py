"""The family table's data (tests/data/family/family.json): the committed stand-in configs are what
tools/family/family_table.py makes of it, each dense row's sizes add up to its model card's parameter count, and
the README table renders every row."""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(ROOT, "tools", "family", "family_table.py")


def test_stand_ins_are_current_and_sizes_match_the_cards():
    subprocess.run([sys.executable, SCRIPT, "--check"], check=True, cwd=ROOT, timeout=60)


def test_markdown_has_every_row():
    out = subprocess.run([sys.executable, SCRIPT, "--markdown"], check=True, cwd=ROOT, capture_output=True, text=True,
                         timeout=60).stdout
    with open(os.path.join(ROOT, "tests", "data", "family", "family.json")) as f:
        rows = json.load(f)["models"]
    lines = [line for line in out.splitlines() if line.startswith("| Intern")]
    assert len(lines) == len(rows)
    for row, line in zip(rows, lines):
        assert line.startswith(f"| {row['name']} |")
        assert ("supported, golden-tested" in line) == (row["status"] == "supported")


FOVEA_BIN = os.environ.get("FOVEA_BIN", "")


@pytest.mark.skipif(not os.path.exists(FOVEA_BIN), reason="FOVEA_BIN is not set to the fovea binary")
def test_fits_columns_are_the_planners_and_the_committed_table_is_current():
    subprocess.run([sys.executable, SCRIPT, "--check", "--fovea", FOVEA_BIN], check=True, cwd=ROOT, timeout=600)
    with open(os.path.join(ROOT, "tests", "data", "family", "family_table.md")) as f:
        lines = {line.split(" | ")[0][2:]: line for line in f.read().splitlines() if line.startswith("| Intern")}
    # By arithmetic: 78B in bf16 is ~157 GB of weights (> 141 GiB); in FP8 ~87 GB; 4-bit ~47 GB. 38B bf16 ~77 GB.
    assert "| no / yes / yes |" in lines["InternVL3-78B"]
    assert "| no / yes / yes |" in lines["InternVL2-Llama3-76B"]
    assert "| yes / yes / yes |" in lines["InternVL3-38B"]
    assert "| yes / yes / yes |" in lines["InternVL2-8B"]
    assert "| - | refused: Qwen3-MoE" in lines["InternVL3_5-241B-A28B"]  # the loader refuses it before any plan
    fits = subprocess.run([sys.executable, SCRIPT, "--markdown", "--fits"], check=True, cwd=ROOT, capture_output=True,
                          text=True, timeout=60).stdout
    assert fits.splitlines()[2:] == [line for line in lines.values()]  # what the README's block can print
