#!/usr/bin/env python
"""How long a user waits before anything happens: ``import hf_variants`` and ``hf-variants --help``
against ``import torch`` and transformers, timed in fresh interpreters, interleaved round by round
(so a change of machine load hits every command alike), as medians of wall and CPU time.

    python benchmarks/startup_benchmark.py --rounds 7 --output OUT/startup.json

Targets: ``hf-variants --help`` ≤ 1.2 × ``import torch``; ``import hf_variants`` (lazy) ≤ 0.1 × ``import
torch``; a model class (``from hf_variants import MgkBertForMaskedLM``) ≤ 1.3 × ``from transformers import
PreTrainedModel``. The JSON records the machine's load average next to the numbers; docs/benchmarks.md's
table is rendered from it (``tools/render_tables.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

PYTHON = sys.executable
CLI = str(Path(sys.executable).with_name("hf-variants"))
COMMANDS = {
    "import torch": [PYTHON, "-c", "import torch"],
    "import transformers": [PYTHON, "-c", "import transformers"],
    "from transformers import PreTrainedModel": [PYTHON, "-c", "from transformers import PreTrainedModel"],
    "import hf_variants": [PYTHON, "-c", "import hf_variants"],
    "from hf_variants import MgkBertForMaskedLM": [PYTHON, "-c", "from hf_variants import MgkBertForMaskedLM"],
    "hf-variants --help": [CLI, "--help"],
    "hf-variants pretrain --help": [CLI, "pretrain", "--help"],
    "hf-variants compare --help": [CLI, "compare", "--help"],
    "hf-variants finetune --help": [CLI, "finetune", "--help"],
}
TARGETS = {  # (command, reference, largest ratio of median CPU and wall times)
    "hf-variants --help": ("import torch", 1.2),
    "import hf_variants": ("import torch", 0.1),
    "from hf_variants import MgkBertForMaskedLM": ("from transformers import PreTrainedModel", 1.3),
}


def timed(command: list[str]) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one run of ``command`` in a new process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/")
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7, help="Interleaved rounds (the first is a warm-up).")
    parser.add_argument("--output", type=Path, default=Path("outputs/startup.json"))
    args = parser.parse_args()
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in COMMANDS}
    load_before = os.getloadavg()
    for round_index in range(args.rounds):
        for name, command in COMMANDS.items():
            sample = timed(command)
            if round_index > 0:  # the first round fills the disk cache
                samples[name].append(sample)
    medians = {
        name: {
            "wall_seconds": statistics.median(wall for wall, _ in runs),
            "cpu_seconds": statistics.median(cpu for _, cpu in runs),
        }
        for name, runs in samples.items()
    }
    targets = {
        name: {
            "reference": reference,
            "cpu_ratio": medians[name]["cpu_seconds"] / medians[reference]["cpu_seconds"],
            "wall_ratio": medians[name]["wall_seconds"] / medians[reference]["wall_seconds"],
            "target": limit,
        }
        for name, (reference, limit) in TARGETS.items()
    }
    for entry in targets.values():
        entry["met"] = entry["cpu_ratio"] <= entry["target"] and entry["wall_ratio"] <= entry["target"]
    record = {
        "command": f"python benchmarks/startup_benchmark.py --rounds {args.rounds} --output {args.output}",
        "rounds_measured": args.rounds - 1,
        "medians": medians,
        "targets": targets,
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_average_before": load_before, "load_average_after": os.getloadavg()},
    }  # fmt: skip
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps({name: round(m["wall_seconds"], 3) for name, m in medians.items()}, indent=2))
    print(json.dumps(targets, indent=2))


if __name__ == "__main__":
    main()
