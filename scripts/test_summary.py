"""Prints what the test run did case by case, not only which binaries passed: per suite (gtest binaries from
their GTEST_OUTPUT XML files, pytest from its JUnit XML) the cases run, passed, failed and skipped, then each
skipped case with its reason. Usage: python3 scripts/test_summary.py RESULTS_DIR [TITLE]
"""
import glob
import os
import sys
import xml.etree.ElementTree as ET


def cases(path):
    """(name, outcome, message) for every test case of one XML file (gtest or JUnit)."""
    out = []
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}.{case.get('name', '')}"
        skipped = case.find("skipped")
        failure = case.find("failure")
        error = case.find("error")
        if skipped is not None or case.get("result") == "skipped" or case.get("status") == "notrun":
            message = skipped.get("message", "") if skipped is not None else ""
            out.append((name, "skipped", (message or (skipped.text or "") if skipped is not None else "").strip()))
        elif failure is not None or error is not None:
            out.append((name, "failed", ""))
        else:
            out.append((name, "passed", ""))
    return out


def main():
    results = sys.argv[1]
    title = sys.argv[2] if len(sys.argv) > 2 else "tests"
    files = sorted(glob.glob(os.path.join(results, "*.xml")))
    if not files:
        print(f"{title}: no result files in {results}")
        return
    totals = {"passed": 0, "failed": 0, "skipped": 0}
    skipped = []
    print(f"{title}: cases per suite (run = passed + failed + skipped)")
    for path in files:
        try:
            found = cases(path)
        except ET.ParseError as e:
            print(f"  {os.path.basename(path)}: unreadable ({e})")
            continue
        counts = {k: sum(1 for _, o, _ in found if o == k) for k in totals}
        for k in totals:
            totals[k] += counts[k]
        skipped += [(os.path.basename(path)[:-4], n, m) for n, o, m in found if o == "skipped"]
        print(f"  {os.path.basename(path)[:-4]:32s} {len(found):5d} run {counts['passed']:5d} passed "
              f"{counts['failed']:3d} failed {counts['skipped']:3d} skipped")
    run = sum(totals.values())
    print(f"  {'TOTAL':32s} {run:5d} run {totals['passed']:5d} passed {totals['failed']:3d} failed "
          f"{totals['skipped']:3d} skipped")
    # Skips grouped by suite and reason (gtest writes "file:line" then the GTEST_SKIP() text; show the text).
    groups = {}
    for suite, name, message in skipped:
        lines = [l for l in message.splitlines() if l.strip()]
        groups.setdefault((suite, lines[-1][:160] if lines else "(no reason given)"), []).append(name)
    for (suite, reason), names in groups.items():
        print(f"  skipped {len(names):3d} in {suite} ({names[0]}{', ...' if len(names) > 1 else ''}): {reason}")

if __name__ == "__main__":
    main()
