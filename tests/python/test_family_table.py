"""The family table's data (tests/data/family/family.json): the committed stand-in configs are what
tools/family/family_table.py makes of it, each dense row's sizes add up to its model card's parameter count, and
the README table renders every row."""
import json
import os
import subprocess
import sys

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
