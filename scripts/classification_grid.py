#!/usr/bin/env python
"""Run a study file on the lab's grid driver (``hf_variants.lab.study``, ``hf_variants.lab.grid``): every variant
against its matched control per task, the learning rate chosen per model and task on a held-out slice of the
training split, several seeds on the test split; with ``[conditions]``, once per condition (e.g. from scratch and
self-pretrained).

    python scripts/classification_grid.py --study classification_from_scratch --data_dir $DATA \\
        --output_dir outputs/classification_grid
    python scripts/classification_grid.py --study never_from_scratch --tasks ag_news --data_dir $DATA \\
        --output_dir outputs/never_from_scratch --work_dir outputs/never_from_scratch_models

--study is the name of a study the package ships (hf_variants/lab/studies/) or a .toml file of your own
(docs/extending.md, "A new study"); --tasks, --pairs, --seeds and --learning_rates narrow or replace its fields.
--roles runs only the variants' or the controls' cells of the same grid (the rest later, by the command without it).
Resumable: the same command skips every finished run (a grid with other settings in the same folder is refused).
Each run trains on the fine-tuning engine (the Trainer); a self-pretraining grid's pretraining on the pretraining
engine, its models under --work_dir (large; only the small result files go to --output_dir). The grid committed
in docs/experiments/classification was made with the grid's own loop at commit ed7beb1, so it is a record that
this command does not resume (run it with another --output_dir). The grid writes records into --output_dir and
commits nothing: keep the records you mean to (``git add``) and re-render the pages from them.
``--memory_limit_gib`` caps the process's address space
(``hf_variants.training.memory``): a run that would need more (an N-ODE run's grows with its solver's steps) is
recorded as ``out_of_memory`` with the cap in its record, instead of being killed and started again on resume;
it is a setting of the machine, not of the grid, so it is not in the grid's fingerprint.
``python scripts/render_tables.py`` turns the results into the tables of docs/results.md and docs/experiments/.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from workspace import add_data_argument

from hf_variants.lab.grid import ROLES
from hf_variants.lab.study import load_study, run_study
from hf_variants.training.memory import limit_address_space


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--study", default="classification_from_scratch", help="a shipped study's name or a .toml")
    parser.add_argument("--tasks", nargs="+", help="only these of the study's tasks")
    parser.add_argument("--conditions", nargs="+", help="only these of the study's conditions")
    parser.add_argument("--roles", nargs="+", choices=ROLES,
                        help="only these roles' cells (e.g. the controls, cheap, before a slow variant)")  # fmt: skip
    add_data_argument(parser)
    parser.add_argument("--output_dir", type=Path, default=Path("outputs/classification_grid"))
    parser.add_argument("--work_dir", type=Path, default=Path("outputs/grid_models"),
                        help="pretrained models of a self-pretraining grid")  # fmt: skip
    parser.add_argument("--pairs", nargs="+", help="replace the study's pairs")
    parser.add_argument("--learning_rates", type=float, nargs="+", help="replace the study's learning rates")
    parser.add_argument("--seeds", type=int, nargs="+", help="replace the study's seeds")
    parser.add_argument("--memory_limit_gib", type=float,
                        help="cap the address space: a run that needs more is recorded as out_of_memory, not killed")
    args = parser.parse_args(argv)
    if args.memory_limit_gib is not None:
        try:
            limit_address_space(args.memory_limit_gib)
        except ValueError as error:
            parser.error(f"argument --memory_limit_gib: {error}")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    try:
        study = load_study(args.study)
    except (ValueError, FileNotFoundError) as error:
        parser.error(f"argument --study: {error}")
    replaced = {name: tuple(value) for name in ("pairs", "learning_rates", "seeds") if (value := getattr(args, name))}
    try:
        run_study(study, args.data_dir, args.output_dir, args.work_dir, tasks=args.tasks, conditions=args.conditions,
                  roles=args.roles, replace=replaced)  # fmt: skip
    except ValueError as error:
        parser.error(str(error))


if __name__ == "__main__":
    main()
