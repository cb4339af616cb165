#!/usr/bin/env python
"""The pretraining budget at which pretraining helps: one BERT-control MLM run on WikiText-2 with a
checkpoint every --checkpoint_every steps; each budget in --budgets and random initialisation fine-tuned on
GLUE tasks (rate chosen on a held-out slice of the training split, then --seeds on dev), paired by seed
(``glue_study.py``).

    python experiments/glue_after_pretraining/pretraining_budget.py --data_dir $DATA \\
        --output_dir outputs/pretraining_budget --work_dir runs/pretraining-budget

Resumable: the pretraining run resumes from its newest checkpoint, and a fine-tuning run whose result file
exists (made with the same settings) is skipped. It commits nothing.
Large files (checkpoints, fine-tuned models) stay in --work_dir; the small result files go to --output_dir.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from glue_study import (
    PRETRAINING_SIZES,
    ModelToTune,
    budget_table,
    chance_scores,
    checkpoint_record,
    export_checkpoint_model,
    fine_tune,
    mlm_settings,
    pretrain,
    smallest_helpful_budget,
    wikitext_tokenizer,
)
from workspace import add_study_arguments, study_setup

from hf_variants.storage.files import write_json
from hf_variants.training import run_mlm


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output_dir", type=Path, default=Path("outputs/pretraining_budget"))
    parser.add_argument("--work_dir", type=Path, default=Path("runs/pretraining-budget"))
    parser.add_argument("--budgets", type=int, nargs="+", default=[500, 1500, 3000])
    parser.add_argument("--checkpoint_every", type=int, default=500)
    add_study_arguments(parser)
    args = parser.parse_args(argv)
    if any(budget % args.checkpoint_every for budget in args.budgets):
        parser.error(f"every --budgets value must be a multiple of --checkpoint_every ({args.checkpoint_every}).")
    protocol = study_setup(args)

    tokenizer = wikitext_tokenizer(args.data_dir, args.work_dir / "tokenizer")
    run = args.work_dir / "mlm"
    settings = mlm_settings("bert_control", PRETRAINING_SIZES, args.data_dir, tokenizer, max(args.budgets),
                            args.checkpoint_every, run)  # fmt: skip
    final = pretrain(settings)
    budgets = {b: checkpoint_record(run / f"checkpoint-{b}", b) for b in args.budgets}
    record = {"arguments": run_mlm.requested_arguments(settings), "final": final,
              "budgets": {str(b): info for b, info in budgets.items()}}  # fmt: skip
    args.output_dir.mkdir(parents=True, exist_ok=True)
    write_json(args.output_dir / "pretraining.json", record, within=args.output_dir)

    models = {"step0": ModelToTune(run, random_init=True)}
    for budget in args.budgets:
        folder = args.work_dir / "models" / f"step{budget}"
        if not (folder / "config.json").is_file():
            export_checkpoint_model(run / f"checkpoint-{budget}", run, folder)
        models[f"step{budget}"] = ModelToTune(folder)
    found = fine_tune(
        protocol, models, args.data_dir / "glue", args.work_dir / "glue", args.output_dir / "runs", args.workers,
    )  # fmt: skip

    chance = chance_scores(protocol.tasks, args.data_dir / "glue")
    write_json(args.output_dir / "chance.json", chance, within=args.output_dir)
    cells = {(int(name.removeprefix("step")), task): cell for (name, task), cell in found.items()}
    print(budget_table(cells, budgets, chance))
    print(json.dumps({"smallest_helpful_budget": smallest_helpful_budget(cells)}))
    print("To keep these records: python tools/records.py pack OUTPUT_DIR experiments/<study>; then the pages: "
          "python tools/render_tables.py")


if __name__ == "__main__":
    main()
