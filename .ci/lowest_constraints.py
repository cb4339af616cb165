#!/usr/bin/env python3
"""Print pip constraints that pin every dependency of hf-variants (and of its dev extra's extras) to
the lower bound pyproject.toml declares, so CI can test the oldest end of the supported range:

    python3 .ci/lowest_constraints.py > lowest.txt && pip install -e ".[dev]" -c lowest.txt
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import tomllib

PROJECT = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
LOWER_BOUND = re.compile(r"^\s*([A-Za-z0-9_.\-\[\]]+?)\s*(?:\[[^\]]*\])?\s*(?:>=|==)\s*([^,;\s]+)")


def requirements() -> list[str]:
    extras = PROJECT["optional-dependencies"]
    listed = [*PROJECT["dependencies"], *extras["dev"]]
    # the dev extra pulls other extras of this package ("hf-variants[peft,...]")
    for requirement in extras["dev"]:
        if match := re.match(r"hf-variants\[([^\]]+)\]", requirement):
            for name in match.group(1).split(","):
                listed += extras[name.strip()]
    return listed


def main() -> None:
    pins = {}
    for requirement in requirements():
        if match := LOWER_BOUND.match(requirement):
            pins[match.group(1).lower()] = match.group(2)
    if "transformers" not in pins or "torch" not in pins:
        sys.exit("pyproject.toml: expected lower bounds for torch and transformers")
    for name, version in sorted(pins.items()):
        print(f"{name}=={version}")


if __name__ == "__main__":
    main()
