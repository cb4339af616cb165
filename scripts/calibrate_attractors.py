#!/usr/bin/env python
"""Choose the difficulty of the main job's embedded task: run ``hf-variants compare`` with the BERT
control alone at each ``--attractors`` level (the default budget otherwise) and record its held-out and
dev accuracies, one small JSON per level, so that the default level is one at which the control lands
clearly above chance and below 95%.

    python scripts/calibrate_attractors.py --levels 0 1 2 3 4 --output_dir outputs/calibration
    # writes docs/compare/calibration/attractors-<level>.json (finished levels are kept: resumable)

The run folders go to --output_dir; only the small records are committed.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from hf_variants.lab import compare, data_sources, records

RECORDS = Path(__file__).resolve().parents[1] / "docs" / "compare" / "calibration"


def calibrate(level: int, output_dir: Path, seed: int) -> dict:
    """The BERT control's scores at ``level`` (one compare run without controls)."""
    argv = ["--models", "bert_control", "--no_matched_controls", "--no_calibration_controls",
            "--attractors", str(level), "--seed", str(seed), "--output_dir", str(output_dir / f"attractors-{level}"),
            "--disable_tqdm"]  # fmt: skip
    results = compare.main(argv)
    tuned = results["models"]["bert_control"]["fine_tuning"][data_sources.SYNTHETIC_TASK]
    dev = [run["value"] for run in tuned["runs"].values() if "value" in run]
    return {
        "command": f"hf-variants compare {' '.join(argv)}",
        "attractors": level,
        "heldout_accuracy_by_learning_rate": tuned["heldout_scores_by_learning_rate"],
        "learning_rate": tuned["learning_rate"],
        "dev_accuracy_by_seed": {seed: run.get("value") for seed, run in tuned["runs"].items()},
        "dev_accuracy_mean": statistics.fmean(dev) if dev else None,
        "statuses": {seed: run["status"] for seed, run in tuned["runs"].items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levels", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--output_dir", type=Path, default=Path("outputs/calibration"))
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    for level in args.levels:
        record = RECORDS / f"attractors-{level}.json"
        if records.read_record(record) is not None:
            continue
        result = calibrate(level, args.output_dir, args.seed)
        records.write_record(record, result)
        print(f"attractors={level}: dev accuracy {result['dev_accuracy_mean']:.3f}", flush=True)


if __name__ == "__main__":
    main()
