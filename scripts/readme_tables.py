#!/usr/bin/env python3
"""The README's generated tables, from recorded runs: performance, fidelity and the model family.

    python3 scripts/readme_tables.py            # prints every generated block
    python3 scripts/readme_tables.py --write    # replaces the blocks in README.md
    python3 scripts/readme_tables.py --check    # exit 1 when README.md differs from what the sources give (CI)

README.md marks each block as <!-- BEGIN generated: NAME --> ... <!-- END -->; only the lines between the markers
are rewritten. The sources are the recorded runs named below (their JSON in bench/results/) and
tools/family/family_table.py. A new recorded run becomes the README's by changing PERF_RUN / FIDELITY_RUN here
and running --write; the history stays in bench/results/.
"""
import argparse
import json
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
sys.path.insert(0, str(ROOT / "bench" / "gpu"))
import peers_report  # noqa: E402  the side-by-side table of the peers, as the run's own report renders it
# The latest end-to-end run of the instrument (bench/gpu/run_all.sh): its JSON carries date, commit and command.
PERF_RUN = "bench/results/2026-12-06-h100-peers.json"
# The latest trained-weights fidelity run (bench/fidelity/gpu_fidelity.sh); meta.json beside it says when and how.
FIDELITY_RUN = "bench/results/2026-12-07-smollm2-fidelity-h100/fidelity.json"

BLOCK = re.compile(r"(<!-- BEGIN generated: ([a-z0-9_-]+) -->\n)(.*?)(<!-- END -->)", re.S)


def load(path):
    return json.loads((ROOT / path).read_text(encoding="utf-8"))


def fmt(value, digits=1):
    return "" if value is None else f"{value:,.{digits}f}"


def ratio(value):
    return "" if value is None else f"{value:.2f}"


def source_line(date, commit, command, path):
    return f"Run of {date}, commit `{commit[:7]}`, command `{command}`; JSON: [`{path}`]({path})."


def fovea_label(run):
    """A Fovea row's name from the command it ran: the last --policy wins, as on the command line."""
    args = run["command"]
    options = {}
    for i, arg in enumerate(args[:-1]):
        if arg.startswith("--"):
            options[arg] = args[i + 1]
    label = f"Fovea, {options.get('--policy', 'official')} tiling"
    if options.get("--quantization", "none") != "none":
        label += f", {options['--quantization']}"
    return label


def perf_block():
    run = load(PERF_RUN)
    env, gemm, derived = run["env"], run["gemm"], run["derived"]
    lines = [source_line(env["date"], env["commit"], env["command"], PERF_RUN),
             f"GPU: {env['gpu']}; torch {env['torch']}, transformers {env['transformers']}. "
             f"Workload: {len(run['workload']['requests'])} listing photos, one question each, one new token, "
             f"random-weight {run['model']['variant']} model ({run['model']['params'] / 1e9:.2f} B parameters).",
             "",
             "| engine | QPM | × transformers end-to-end | × bf16 floor (sustained) | GPU memory, whole device (GB) | requests |",
             "|---|---|---|---|---|---|"]
    floor = derived["floor_qpm_bf16_sustained"]
    sustained = gemm["bf16_sustained"]
    lines.append(f"| FLOP floor, bf16 GEMMs held {sustained['seconds']:.0f} s "
                 f"({gemm['bf16_sustained_tflops']:.0f} TFLOP/s, SM {sustained['clocks']['sm_clock_mhz']:.0f} MHz) "
                 f"| {fmt(floor)} | | 1.00 | | |")
    by_engine = {f"Fovea {name}": fovea_label(fovea_run) for name, fovea_run in run["fovea"].items()}
    for row in derived["rows"]:
        name = by_engine.get(row["engine"], row["engine"])
        requests = f"{row['requests']}/{row['of']}" if "of" in row else str(row["requests"])
        lines.append(f"| {name} | {fmt(row['qpm'])} | {ratio(row['x_transformers_e2e'])} | "
                     f"{ratio(row['qpm'] / floor)} | {fmt(row.get('gpu_mem_gb'))} | {requests} |")
    # The peers (bench/gpu/peers.sh) in the same run: the report's own tables, under a README-level heading.
    if run.get("peers"):
        versions = ", ".join(f"{label} {run['peers'].get('versions', {}).get(engine, '?')}"
                             for engine, label in peers_report.PEERS)
        lines += peers_report.render_lines(
            run, heading=f"**Beside the engines users would pick instead** ({versions}; `bench/gpu/peers.sh`, "
                         "in the calls that followed on the same GPU machine)")
    return "\n".join(lines) + "\n"


FIDELITY_MODES = [  # (mode in the JSON, README name)
    ("ref-bfloat16", "transformers bf16"),
    ("cuda", "Fovea CUDA bf16"),
    ("fp8-tensor", "Fovea `--quantization fp8-tensor`"),
    ("fp8", "Fovea `--quantization fp8` (per channel × per token, default)"),
    ("fp8-block", "Fovea `--quantization fp8-block`"),
    ("fp8-channel-act128", "Fovea `--quantization fp8-channel-act128`"),
    ("w4-rtn-g64", "Fovea 4-bit round-to-nearest, group 64"),
    ("w4-rtn-g32", "Fovea 4-bit round-to-nearest, group 32"),
]


def fidelity_block():
    run = load(FIDELITY_RUN)
    meta = load(str(pathlib.PurePosixPath(FIDELITY_RUN).parent / "meta.json"))
    lines = [source_line(meta["date"], meta["commit"], meta["command"], FIDELITY_RUN),
             f"{meta['what']}",
             "",
             "| mode | mean KL | p99 KL | first token = reference | 16-token answers = reference |",
             "|---|---|---|---|---|"]
    for mode, name in FIDELITY_MODES:
        m = run["modes"].get(mode)
        if m is None:
            continue
        lines.append(f"| {name} | {m['kl_mean']:.3g} | {m['kl_p99']:.3g} | {100 * m['top1_agree']:.2f}% | "
                     f"{m['seq16_same']}/{m['tasks']} |")
    return "\n".join(lines) + "\n"


def family_block():
    table = subprocess.run([sys.executable, str(ROOT / "tools/family/family_table.py"), "--markdown", "--fits"],
                           check=True, capture_output=True, text=True).stdout
    return ("Generated from `tests/data/family/family.json` by `tools/family/family_table.py --markdown --fits`; "
            "`test_family` loads a tiny stand-in of every row or checks its refusal.\n\n" + table)


BLOCKS = {"perf": perf_block, "fidelity": fidelity_block, "family": family_block}


def render(text):
    """README text with every generated block replaced by what its source gives now."""
    def replace(match):
        name = match.group(2)
        if name not in BLOCKS:
            sys.exit(f"README.md: unknown generated block '{name}' (known: {', '.join(BLOCKS)})")
        return match.group(1) + BLOCKS[name]() + match.group(4)
    return BLOCK.sub(replace, text)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="rewrite the generated blocks of the README")
    parser.add_argument("--check", action="store_true", help="exit 1 when the README's blocks are out of date")
    parser.add_argument("--readme", default=str(README), help="the README to check or write (default: README.md)")
    args = parser.parse_args(argv)
    if not (args.write or args.check):
        for name, make in BLOCKS.items():
            print(f"<!-- BEGIN generated: {name} -->\n{make()}<!-- END -->\n")
        return 0
    readme = pathlib.Path(args.readme)
    text = readme.read_text(encoding="utf-8")
    names = [m.group(2) for m in BLOCK.finditer(text)]
    missing = [name for name in BLOCKS if name not in names]
    if missing:
        print(f"{readme}: no generated block for {', '.join(missing)}")
        return 1
    fresh = render(text)
    if args.write:
        readme.write_text(fresh, encoding="utf-8")
        return 0
    if fresh != text:
        stale = [m.group(2) for m, f in zip(BLOCK.finditer(text), BLOCK.finditer(fresh)) if m.group(3) != f.group(3)]
        print(f"{readme}: generated blocks out of date: {', '.join(stale)} (run scripts/readme_tables.py --write)")
        return 1
    print(f"{readme}: generated blocks up to date ({', '.join(names)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
