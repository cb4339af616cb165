#!/usr/bin/env python
"""GLUE after pretraining: each variant and its matched control pretrained with MLM on WikiText-2 at one
budget (same tokenizer, data order, masks, schedule and seed), then fine-tuned on GLUE tasks with the rate
chosen on a held-out slice of the training split and --seeds on dev; differences variant − control paired
by seed (``glue_study.py``).

    python experiments/glue_after_pretraining/glue_after_pretraining.py --data_dir $DATA --steps 3000 \\
        --output_dir outputs/glue_after_pretraining --work_dir runs/glue-after-pretraining

--steps is the budget at which pretraining beats random initialisation for the BERT control
(``pretraining_budget.py`` beside this script measures it). Resumable like the budget study: pretraining resumes from
its newest checkpoint, recorded fine-tuning runs are skipped; it commits nothing.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from glue_study import (
    PRETRAINING_SIZES,
    ModelToTune,
    chance_scores,
    fine_tune,
    mlm_settings,
    pair_overrides,
    pair_table,
    pretrain,
    wikitext_tokenizer,
)
from workspace import add_study_arguments, study_setup

from hf_variants.lab import records
from hf_variants.lab.spec import spec_folder
from hf_variants.lab.tables import PAIRS
from hf_variants.storage.files import write_json

#: Every model at the budget study's size, with 2 heads of 64 and the grid's N-ODE solver tolerance.
SIZES = f"{PRETRAINING_SIZES},head_dim=64,rtol=1e-3,atol=1e-3"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output_dir", type=Path, default=Path("outputs/glue_after_pretraining"))
    parser.add_argument("--work_dir", type=Path, default=Path("runs/glue-after-pretraining"))
    parser.add_argument("--steps", type=int, default=3000, help="pretraining steps of 32 x 128 tokens")
    parser.add_argument("--pairs", nargs="+", default=list(PAIRS))
    add_study_arguments(parser)
    args = parser.parse_args(argv)
    protocol = study_setup(args)

    chance = chance_scores(protocol.tasks, args.data_dir / "glue")
    args.output_dir.mkdir(parents=True, exist_ok=True)
    write_json(args.output_dir / "chance.json", chance, within=args.output_dir)
    tokenizer = wikitext_tokenizer(args.data_dir, args.work_dir / "tokenizer")
    perplexity, cells = {}, {}
    for spec in args.pairs:  # pair by pair, so that an interrupted study leaves whole pairs
        models = {}
        for role in ("variant", "control"):
            name = f"{spec_folder(spec)}/{role}"
            model_type, overrides = pair_overrides(spec, SIZES, control=role == "control")
            settings = mlm_settings(model_type, overrides, args.data_dir, tokenizer, args.steps, 500,
                                    args.work_dir / "mlm" / name)  # fmt: skip
            results = pretrain(settings)
            record = args.output_dir / name / "pretraining.json"
            records.write_record(record, results, within=args.output_dir)
            perplexity[name] = results["perplexity"]
            models[name] = ModelToTune(args.work_dir / "mlm" / name)
        cells.update(fine_tune(
            protocol, models, args.data_dir / "glue", args.work_dir / "glue", args.output_dir, args.workers,
        ))  # fmt: skip
        print(pair_table(cells, args.pairs, protocol.tasks, perplexity, chance), flush=True)
    print("To keep these records: python tools/records.py pack OUTPUT_DIR experiments/<study>; then the pages: "
          "python tools/render_tables.py")


if __name__ == "__main__":
    main()
