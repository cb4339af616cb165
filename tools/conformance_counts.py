#!/usr/bin/env python
"""Per model: how many of transformers' own model tests pass, do not apply (skipped, with the reason
the suite or the model gives) and fail — the table in docs/integrations.md.

    python tools/conformance_counts.py [--output OUT/conformance.json]

Runs ``tests/test_transformers_conformance.py`` (transformers' ``ModelTesterMixin`` of the installed
version) with pytest's JUnit report and counts its test cases per test class.
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import transformers

ROOT = Path(__file__).resolve().parents[1]


def count(report: Path) -> dict[str, dict[str, int]]:
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        model = case.get("classname", "").rsplit(".", 1)[-1].removeprefix("Test").removesuffix("Conformance")
        outcome = "passed"
        if case.find("skipped") is not None:
            outcome = "not applicable"
        elif case.find("failure") is not None or case.find("error") is not None:
            outcome = "failed"
        counts[model][outcome] += 1
    return {model: {k: c[k] for k in ("passed", "not applicable", "failed")} for model, c in sorted(counts.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, help="Also write the counts as JSON.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "report.xml"
        command = [sys.executable, "-m", "pytest", "tests/test_transformers_conformance.py", "-q", "-p",
                   "no:cacheprovider", f"--junitxml={report}"]  # fmt: skip
        subprocess.run(command, cwd=ROOT, check=False, capture_output=True)
        if not report.is_file():
            sys.exit("pytest wrote no report: run the command above to see why")
        counts = count(report)
    lines = [
        f"transformers {transformers.__version__}: ModelTesterMixin test cases per model",
        "",
        "| model | passed | not applicable (skipped) | failed |",
        "|---|---:|---:|---:|",
        *(f"| {m} | {c['passed']} | {c['not applicable']} | {c['failed']} |" for m, c in counts.items()),
    ]
    print("\n".join(lines))
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        payload = {"command": " ".join(["tools/conformance_counts.py", *sys.argv[1:]]),
                   "transformers": transformers.__version__, "counts": counts}  # fmt: skip
        args.output.write_text(json.dumps(payload, indent=2) + "\n")


if __name__ == "__main__":
    main()
