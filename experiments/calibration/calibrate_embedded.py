#!/usr/bin/env python
"""Choose the difficulty of the main job's embedded tasks: run ``hf-variants compare`` with the BERT control
alone at each level of a task's knob (and, for recall, each fine-tuning budget) and record its held-out and dev
accuracies, one small JSON per level, so that the chosen level is one at which the control lands clearly above
chance and, for the default task, below 95%.

    python experiments/calibration/calibrate_embedded.py --task attractor_number --levels 0 1 2 3 4 \\
        --output_dir outputs/calibration
    # writes outputs/calibration/records/attractors-<level>.json
    python experiments/calibration/calibrate_embedded.py --task recall --levels 2 3 --finetune_steps 1000 2000 \\
        --output_dir outputs/calibration
    # writes outputs/calibration/records/recall-<pairs>pairs-<steps>steps.json (--preset recall otherwise)

Finished levels are kept (resumable). The run folders and the small records go to --output_dir; the committed
records (experiments/calibration/records/*.jsonl) are those records packed: ``python tools/records.py pack
outputs/calibration/records experiments/calibration``.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from hf_variants.lab import compare, records

#: Each task's knob (its compare flag) and the extra flags its calibration runs with.
KNOBS = {"attractor_number": ("attractors", []), "recall": ("recall_pairs", ["--preset", "recall"])}


def record_name(task: str, level: int, steps: int | None) -> str:
    if task == "attractor_number":
        return f"attractors-{level}"
    return f"recall-{level}pairs" + (f"-{steps}steps" if steps is not None else "")


def calibrate(task: str, level: int, steps: int | None, output_dir: Path, seed: int) -> dict:
    """The BERT control's scores at ``level`` (one compare run without controls)."""
    knob, extra = KNOBS[task]
    name = record_name(task, level, steps)
    argv = [*extra, "--tasks", task, "--models", "bert_control", "--no_matched_controls", "--no_calibration_controls",
            f"--{knob}", str(level), *(["--finetune_steps", str(steps)] if steps is not None else []),
            "--seed", str(seed), "--output_dir", str(output_dir / name), "--disable_tqdm"]  # fmt: skip
    results = compare.main(argv)
    tuned = results["models"]["bert_control"]["fine_tuning"][task]
    dev = [run["value"] for run in tuned["runs"].values() if "value" in run]
    return {
        "command": f"hf-variants compare {' '.join(argv)}",
        knob: level,
        **({"finetune_steps": steps} if steps is not None else {}),
        "heldout_accuracy_by_learning_rate": tuned["heldout_scores_by_learning_rate"],
        "learning_rate": tuned["learning_rate"],
        "dev_accuracy_by_seed": {seed: run.get("value") for seed, run in tuned["runs"].items()},
        "dev_loss_by_seed": {seed: run.get("metrics", {}).get("loss") for seed, run in tuned["runs"].items()},
        "dev_accuracy_mean": statistics.fmean(dev) if dev else None,
        "statuses": {seed: run["status"] for seed, run in tuned["runs"].items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", choices=sorted(KNOBS), default="attractor_number")
    parser.add_argument("--levels", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--finetune_steps", type=int, nargs="+", default=[None],
                        help="Fine-tuning budgets to try at each level (default: the preset's).")  # fmt: skip
    parser.add_argument("--output_dir", type=Path, default=Path("outputs/calibration"))
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    for level in args.levels:
        for steps in args.finetune_steps:
            record = args.output_dir / "records" / f"{record_name(args.task, level, steps)}.json"
            if records.read_record(record) is not None:
                continue
            result = calibrate(args.task, level, steps, args.output_dir, args.seed)
            records.write_record(record, result, within=args.output_dir)
            print(f"{record.stem}: dev accuracy {result['dev_accuracy_mean']:.3f}", flush=True)


if __name__ == "__main__":
    main()
