"""The README's generated tables (performance, fidelity, model family) are what scripts/readme_tables.py makes of
the recorded runs' JSON and the family data; a README edited by hand, or data changed without --write, fails."""
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(ROOT, "scripts", "readme_tables.py")
README = os.path.join(ROOT, "README.md")


def check(readme):
    return subprocess.run([sys.executable, SCRIPT, "--check", "--readme", str(readme)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def block(text, name):
    match = re.search(rf"<!-- BEGIN generated: {name} -->\n(.*?)<!-- END -->", text, re.S)
    assert match, f"README.md has no generated block '{name}'"
    return match.group(1)


def test_readme_blocks_are_current():
    result = check(README)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_hand_edited_figure_is_caught(tmp_path):
    text = open(README, encoding="utf-8").read()
    perf = block(text, "perf")
    row = next(line for line in perf.splitlines() if line.startswith("| Fovea, official tiling |"))
    qpm = row.split("|")[2].strip()
    edited = text.replace(row, row.replace(f"| {qpm} |", "| 999.9 |", 1))
    assert edited != text
    copy = tmp_path / "README.md"
    copy.write_text(edited, encoding="utf-8")
    result = check(copy)
    assert result.returncode == 1
    assert "out of date: perf" in result.stdout


def test_a_missing_block_is_caught(tmp_path):
    text = open(README, encoding="utf-8").read()
    copy = tmp_path / "README.md"
    copy.write_text(text.replace("<!-- BEGIN generated: fidelity -->", "<!-- fidelity table -->"), encoding="utf-8")
    result = check(copy)
    assert result.returncode == 1
    assert "no generated block for fidelity" in result.stdout


def test_blocks_state_date_commit_command_and_the_recorded_figures():
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    try:
        import readme_tables
    finally:
        sys.path.pop(0)
    text = open(README, encoding="utf-8").read()
    run = json.load(open(os.path.join(ROOT, readme_tables.PERF_RUN), encoding="utf-8"))
    perf = block(text, "perf")
    assert run["env"]["date"] in perf and run["env"]["commit"][:7] in perf and run["env"]["command"] in perf
    # Every recorded row appears once with its QPM, whatever the row is called.
    for row in run["derived"]["rows"]:
        assert perf.count(f"| {row['qpm']:,.1f} |") >= 1
    # A Fovea row is named by the options its command ran with: the last --policy wins, as in the CLI.
    assert readme_tables.fovea_label({"command": ["fovea", "run", "--policy", "official", "--quantization", "fp8",
                                                   "--policy", "compact"]}) == "Fovea, compact tiling, fp8"
    assert readme_tables.fovea_label({"command": ["fovea", "run", "--input", "t.jsonl"]}) == "Fovea, official tiling"
    fidelity_run = json.load(open(os.path.join(ROOT, readme_tables.FIDELITY_RUN), encoding="utf-8"))
    fidelity = block(text, "fidelity")
    assert f"{100 * fidelity_run['modes']['cuda']['top1_agree']:.2f}%" in fidelity


def test_a_run_with_peers_puts_their_table_under_the_perf_table(tmp_path, monkeypatch):
    """When the recorded run carries peers.json (bench/gpu/peers.sh in the same run), the perf block shows the
    side-by-side table with the peers' versions; a run without them shows none."""
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
    import readme_tables
    from test_peers_report import run_data
    recorded = json.loads(open(os.path.join(ROOT, readme_tables.PERF_RUN), encoding="utf-8").read())
    recorded.pop("peers", None)
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps(recorded), encoding="utf-8")
    monkeypatch.setattr(readme_tables, "ROOT", tmp_path)
    monkeypatch.setattr(readme_tables, "PERF_RUN", "plain.json")
    assert "LMDeploy" not in readme_tables.perf_block()
    recorded["peers"] = run_data()["peers"]
    (tmp_path / "with_peers.json").write_text(json.dumps(recorded), encoding="utf-8")
    monkeypatch.setattr(readme_tables, "PERF_RUN", "with_peers.json")
    text = readme_tables.perf_block()
    assert "(LMDeploy 0.18.0, vLLM 0.20.0; `bench/gpu/peers.sh`, in the calls that followed on the same GPU machine)" in text
    assert "| 4 questions per photo: QPM per question |" in text
    assert "| vllm/fp8 | timeout: Killed / late |" in text
