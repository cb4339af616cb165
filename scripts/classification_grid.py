#!/usr/bin/env python
"""From-scratch sequence classification (IMDb, AG News, ListOps — the MGK/LRA and TransJect papers'
tasks): every variant against its matched control, learning rate chosen per model and task on a
held-out slice of the training split, several seeds (``hf_variants.lab.grid``).

    python scripts/classification_grid.py --tasks ag_news listops imdb --data_dir ../shared/data \\
        --output_dir outputs/classification_grid --git_commit

Resumable: the same command skips every finished run (a grid with other settings in the same folder is
refused). Each run trains on the fine-tuning engine (the Trainer); the grid committed in
docs/experiments/classification was made with the grid's own loop at commit ed7beb1, so it is a record
that this command does not resume (run it with another --output_dir). ``--git_commit`` commits each
finished cell's result files as it goes, so a grid can span sessions. ``python scripts/render_tables.py``
turns the results into the tables of docs/results.md and docs/experiments/.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import torch
from workspace import DATA_DIR, git_commit_cell

from hf_variants.lab.grid import Grid, GridSettings
from hf_variants.lab.tables import PAIRS

#: One size for every model (the matched control has the same): 2 layers, hidden 64, 2 heads of 32.
SIZES = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "head_dim": 32,
    "intermediate_size": 128,
    "rtol": 1e-3,  # N-ODE solver (the paper: 1e-5); fields of unselected ideas are ignored
    "atol": 1e-3,
}
#: Per task: sequence length (tokens), training steps of 32, and a subsample where the files are big.
TASK_BUDGETS = {
    "ag_news": {"max_length": 128, "steps": 300},
    "listops": {"max_length": 256, "steps": 300},
    "imdb": {"max_length": 256, "steps": 300, "max_train": 6000, "max_test": 2000},
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", default=list(TASK_BUDGETS), choices=list(TASK_BUDGETS))
    parser.add_argument("--data_dir", type=Path, default=DATA_DIR)
    parser.add_argument("--output_dir", type=Path, default=Path("outputs/classification_grid"))
    parser.add_argument("--pairs", nargs="+", default=list(PAIRS))
    parser.add_argument("--learning_rates", type=float, nargs="+", default=[3e-4, 1e-3, 3e-3])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--steps", type=int, help="training steps for every task (default: per task)")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--sizes", default="", help="key=value,... overriding the model sizes")
    parser.add_argument("--max_train", type=int, help="subsample the training split (default: per task)")
    parser.add_argument("--max_test", type=int, help="subsample the test split (default: per task)")
    parser.add_argument("--git_commit", action="store_true", help="commit each finished cell's result files")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    torch.set_num_threads(max(1, torch.get_num_threads()))
    from hf_variants.core.overrides import parse_overrides

    sizes = {**SIZES, **parse_overrides(args.sizes)}
    for task in args.tasks:
        budget = TASK_BUDGETS[task]
        settings = GridSettings(
            task=task,
            pairs=tuple(args.pairs),
            sizes=sizes,
            learning_rates=tuple(args.learning_rates),
            seeds=tuple(args.seeds),
            steps=args.steps or budget["steps"],
            batch_size=args.batch_size,
            max_length=budget["max_length"],
            max_train=args.max_train or budget.get("max_train"),
            max_test=args.max_test or budget.get("max_test"),
        )
        callback = git_commit_cell(Path.cwd()) if args.git_commit else None
        Grid(settings, args.data_dir, args.output_dir).run(on_cell_done=callback)


if __name__ == "__main__":
    main()
