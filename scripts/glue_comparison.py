#!/usr/bin/env python
"""Fine-tune the pretrained checkpoints of ``scripts/pretrain_comparison.py`` — and, as a control, the
same architectures from random initialisation with the same budget — on GLUE tasks over several
seeds, and tabulate dev scores (docs/fine-tuning.md).

    python scripts/glue_comparison.py --pretrained_dir runs/pretrain-wikitext2 \\
        --glue_dir ../shared/data/glue --output_dir runs/glue-comparison

Every run is ``hf_variants.training.run_glue`` (the command is stored in each ``results.json``),
``--workers`` runs at a time with one CPU thread each; finished runs are skipped when the command is
repeated, so an interrupted grid continues (a run made with other settings in the same folder is an
error, not reused). Writes ``summary.json`` and ``summary.md`` (mean ± sample standard deviation over
seeds, and how many seeds pretraining beat the control on).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from hf_variants.experiments.glue_after_pretraining import finished_run
from hf_variants.glue import get_task

MODELS = ("bert", "mgk_bert", "macaron_bert", "transject", "node_transformer")


def run_one(argv: list[str]) -> dict:
    import torch

    torch.set_num_threads(1)
    from hf_variants.training import run_glue

    return run_glue.main(argv)


def job_argv(args: argparse.Namespace, model: str, task: str, seed: int, random_init: bool) -> tuple[Path, list[str]]:
    output_dir = args.output_dir / model / task / f"{'random' if random_init else 'pretrained'}-seed{seed}"
    argv = [
        "--model_name_or_path", str(args.pretrained_dir / model), "--task_name", task,
        "--glue_dir", str(args.glue_dir), "--do_train", "--do_eval",
        "--max_train_samples", str(args.max_train_samples), "--max_seq_length", str(args.max_seq_length),
        "--no_pad_to_max_length", "--per_device_train_batch_size", str(args.batch_size),
        "--per_device_eval_batch_size", "64", "--learning_rate", str(args.learning_rate),
        "--num_train_epochs", str(args.num_train_epochs), "--warmup_steps", "0.1", "--weight_decay", "0.01",
        "--seed", str(seed), "--save_strategy", "no", "--report_to", "none", "--disable_tqdm", "true",
        "--log_level", "warning", "--dataloader_pin_memory", "false", "--output_dir", str(output_dir),
    ]  # fmt: skip
    if args.max_eval_samples is not None:
        argv += ["--max_eval_samples", str(args.max_eval_samples)]
    if random_init:
        argv.append("--random_init")
    if model in args.overrides:
        argv += ["--config_overrides", args.overrides[model]]
    return output_dir, argv


def summarize(args: argparse.Namespace, runs: dict[tuple[str, str, str], list[dict]]) -> dict:
    """Mean ± sample std (``None`` below 2 scores) per (model, init, task) over the seeds whose score is
    defined: a correlation of constant predictions is NaN (``hf_variants.glue.metrics``), counted in
    ``undefined_seeds`` and stored as ``null``, never averaged in."""
    table: dict[str, dict] = {}
    for (model, init, task), results in sorted(runs.items()):
        metric = get_task(task).headline_metric
        scores = [100 * r["eval"]["validation"][metric] for r in results]
        defined = [score for score in scores if not math.isnan(score)]
        table.setdefault(f"{model}/{init}", {})[task] = {
            "metric": metric,
            "mean": statistics.mean(defined) if defined else None,
            "std": statistics.stdev(defined) if len(defined) > 1 else None,
            "undefined_seeds": len(scores) - len(defined),
            "seeds": [r["seed"] for r in results],
            "scores": [None if math.isnan(score) else score for score in scores],
            "train_seconds": statistics.mean(r["train"]["train_runtime"] for r in results),
        }
    return table


def score_cell(cell: dict | None) -> str:
    if cell is None:
        return "–"
    undefined = cell["undefined_seeds"]
    if cell["mean"] is None:
        return "undefined†"
    text = f"{cell['mean']:.1f}" + ("" if cell["std"] is None else f" ± {cell['std']:.1f}")
    return text + (f" ({undefined} undefined†)" if undefined else "")


def wins_cell(pretrained: dict | None, random: dict | None) -> str:
    """Seeds on which pretraining scored higher, out of the seeds where both scores are defined."""
    if pretrained is None or random is None:
        return "–"
    control = dict(zip(random["seeds"], random["scores"], strict=True))
    pairs = [(score, control[seed]) for seed, score in zip(pretrained["seeds"], pretrained["scores"], strict=True)]
    compared = [(score, other) for score, other in pairs if score is not None and other is not None]
    return f"{sum(score > other for score, other in compared)}/{len(compared)}" if compared else "–†"


def markdown(args: argparse.Namespace, table: dict) -> str:
    header = "| model | init | " + " | ".join(f"{t} ({get_task(t).headline_metric})" for t in args.tasks) + " |"
    lines = [header, "|---|---|" + "---:|" * len(args.tasks)]
    for model in args.models:
        for init in ("pretrained", "random"):
            row = table.get(f"{model}/{init}", {})
            lines.append(f"| {model} | {init} | " + " | ".join(score_cell(row.get(t)) for t in args.tasks) + " |")
    lines += ["", "Seeds on which pretraining beat random initialisation (paired by seed):", ""]
    lines.append("| model | " + " | ".join(args.tasks) + " |")
    lines.append("|---|" + "---:|" * len(args.tasks))
    for model in args.models:
        pretrained, random = table.get(f"{model}/pretrained", {}), table.get(f"{model}/random", {})
        lines.append(
            f"| {model} | " + " | ".join(wins_cell(pretrained.get(t), random.get(t)) for t in args.tasks) + " |"
        )
    if any(cell["undefined_seeds"] for row in table.values() for cell in row.values()):
        lines += ["", "† The model predicted one constant score for the whole dev set: its correlation is "
                  "undefined (NaN), and such seeds are left out of the mean and of the pairing."]  # fmt: skip
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pretrained_dir", type=Path, default=Path("runs/pretrain-wikitext2"))
    parser.add_argument("--glue_dir", type=Path, default=Path("../shared/data/glue"))
    parser.add_argument("--output_dir", type=Path, default=Path("runs/glue-comparison"))
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--tasks", nargs="+", default=["sst2", "cola", "mrpc", "rte", "stsb"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--max_train_samples", type=int, default=1000)
    parser.add_argument("--num_train_epochs", type=float, default=2)
    parser.add_argument("--max_eval_samples", type=int, help="The first N dev examples (default: all).")
    parser.add_argument("--max_seq_length", type=int, default=64)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--learning_rate", type=float, default=5e-4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--node_tolerance", type=float, default=1e-2, help="rtol = atol of the N-ODE solver while fine-tuning."
    )
    parser.add_argument(
        "--summarize_only", action="store_true", help="Tabulate the finished cells (every seed done), run nothing."
    )
    args = parser.parse_args(argv)
    args.overrides = {
        "node_transformer": f"rtol={args.node_tolerance},atol={args.node_tolerance}",
        "transject": "orthogonal_map=cayley",  # checkpoints trained with matrix_exp load exactly, then switch
    }
    return args


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    jobs = {}  # task by task, so that an interrupted grid leaves whole tasks finished
    for task in args.tasks:
        for model in args.models:
            for seed in args.seeds:
                for random_init in (False, True):
                    key = (model, "random" if random_init else "pretrained", task)
                    jobs.setdefault(key, []).append(job_argv(args, model, task, seed, random_init))
    pending = [(d, a) for runs in jobs.values() for d, a in runs if finished_run(d / "results.json", a) is None]
    print(f"{sum(len(v) for v in jobs.values())} runs, {len(pending)} to do.", flush=True)
    if args.summarize_only:
        pending = []
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        for done, ((output_dir, _), result) in enumerate(
            zip(pending, pool.map(run_one, [a for _, a in pending]), strict=True), 1
        ):
            (output_dir / "model.safetensors").unlink(missing_ok=True)  # keep the results, not 150 models
            score = result["eval"]["validation"][get_task(result["task"]).headline_metric]
            print(f"[{done}/{len(pending)}] {output_dir}: {score:.4f}", flush=True)

    found = {key: [finished_run(d / "results.json", a) for d, a in value] for key, value in jobs.items()}
    runs = {key: results for key, results in found.items() if None not in results}  # cells with every seed
    table = summarize(args, runs)
    settings = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != "summarize_only"}
    grid_argv = [a for a in argv if a != "--summarize_only"]  # the table is the grid's, however written
    summary = {"command": " ".join(["scripts/glue_comparison.py", *grid_argv]), "settings": settings,
               "results": table}  # fmt: skip
    (args.output_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    text = markdown(args, table)
    (args.output_dir / "summary.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
