"""Arguments of ``hf-variants compare`` (the main job: ``hf_variants.lab.compare``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .checks import underscored
from .formatting import ArgumentParser, HelpFormatter

#: The environment variable naming a local data folder (wikitext-2/ and glue/), read without --data_dir.
DATA_ENV = "HF_VARIANTS_DATA"
#: The BERT control from this package's core first (the baseline), then the four variants. ``bert``
#: (``transformers``' own BertForMaskedLM) can be added as an external reference.
DEFAULT_MODELS = ("bert_control", "macaron_bert", "mgk_bert", "transject", "node_transformer")

DESCRIPTION = """\
The main job: pretrain every chosen model and its matched control (the same model with only its idea
turned off) at one size with MLM, fine-tune each with several seeds at a learning rate chosen on
held-out training data, give each variant-vs-control verdict as a seed-paired interval,
reload everything through the Auto classes, measure, and write a report folder (report.md,
results.json, PNG figures).

Data: the package's embedded synthetic language and its tasks (attractor_number by default;
subject_number, agreement), unless asked for otherwise: --data_dir (wikitext-2/ and glue/ in the GLUE
TSV layout), else the HF_VARIANTS_DATA environment variable (a folder of the same layout), else
--from_hub. The Hub is never tried unless asked for.

Two calibration models are added (--no_calibration_controls leaves them out): the BERT control without
token mixing (the positive control, which must come out below) and under other seeds (the negative
control, which must hold 0); the report's first line says whether the budget can be trusted.

--preset picks the budget: 'minutes' (the default: minutes on a 2-core CPU, every variant against its
control over 3 fine-tuning seeds) or 'full' (the larger, slower comparison for real data:
2 layers, 200 MLM steps, 600 fine-tuning steps, three learning rates). Any flag below overrides its
preset's value.
"""

#: The budgets of ``--preset``: flag name → value. Flags set on the command line override them.
PRESETS: dict[str, dict[str, object]] = {
    "minutes": {
        "num_layers": 1, "max_seq_length": 32, "pretrain_steps": 100, "finetune_steps": 200,
        "finetune_learning_rates": [1e-3, 3e-3], "num_seeds": 3,
    },
    "full": {
        "num_layers": 2, "max_seq_length": 64, "pretrain_steps": 200, "finetune_steps": 600,
        "finetune_learning_rates": [3e-4, 1e-3, 3e-3], "num_seeds": 3,
    },
}  # fmt: skip
DEFAULT_PRESET = "minutes"


def build_parser(prog: str = "hf-variants compare") -> argparse.ArgumentParser:
    parser = ArgumentParser(prog=prog, description=DESCRIPTION, formatter_class=HelpFormatter)
    parser.add_argument(
        "--preset", choices=sorted(PRESETS), default=DEFAULT_PRESET,
        help="The budget: 'minutes' (default; " + ", ".join(f"{k}={v}" for k, v in PRESETS["minutes"].items())
        + ") or 'full' (" + ", ".join(f"{k}={v}" for k, v in PRESETS["full"].items()) + ").",
    )  # fmt: skip
    parser.add_argument(
        "--models",
        nargs="+",
        default=list(DEFAULT_MODELS),
        help="Model types, each optionally with config fields: e.g. macaron_bert:attention_type=mgk or "
        "node_transformer:attention_type=mlk. Default: the BERT control and the four variants; add 'bert' for "
        "transformers' BertForMaskedLM as an external reference.",
    )
    parser.add_argument(
        "--no_matched_controls",
        action="store_true",
        help="Do not add each variant's matched control (the same model with only its idea turned off, at the "
        "same sizes) after it.",
    )
    parser.add_argument(
        "--no_calibration_controls",
        action="store_true",
        help="Do not add the two models that show what the comparison can detect: the BERT control without token "
        "mixing (positive control: it must come out below) and under other seeds (negative control: it must hold 0).",
    )
    parser.add_argument("--output_dir", type=Path, default=Path("outputs/compare"), help="The report folder.")
    parser.add_argument(
        "--overwrite_output_dir",
        action="store_true",
        help="Replace another comparison in --output_dir (its files and every model's runs); without it a folder "
        "holding another comparison is refused, and one holding this comparison continues it.",
    )
    parser.add_argument("--data_dir", type=Path, help="Folder with wikitext-2/ and glue/ (GLUE TSV layout).")
    parser.add_argument(
        "--tasks", nargs="+",
        help="GLUE tasks (default sst2 with --data_dir, $HF_VARIANTS_DATA or --from_hub) or embedded tasks: "
        "attractor_number (default), subject_number, agreement.",
    )  # fmt: skip
    parser.add_argument(
        "--from_hub", action="store_true",
        help="Take WikiText-2 and the GLUE tasks from the Hub (never tried otherwise; an error when it does not "
        "answer).",
    )
    parser.add_argument(
        "--attractors", type=int,
        help="Difficulty of the embedded attractor_number task: the most phrases, each with a noun of either "
        "number, between the subject and its verb (default: the level calibrated in docs/main-job.md).",
    )
    parser.add_argument("--tokenizer", help="Use this tokenizer (path or Hub name) instead of training one.")
    parser.add_argument("--vocab_size", type=int, help="Of the trained tokenizer (default 8000; 200 synthetic).")
    parser.add_argument("--hidden_size", type=int, default=128, help="Hidden size of every model.")
    parser.add_argument("--num_layers", type=int, help="Layers (blocks) of every model.")
    parser.add_argument("--head_size", type=int, default=32, help="Width of one attention head.")
    parser.add_argument("--node_tolerance", type=float, default=1e-3, help="rtol = atol of the N-ODE solver.")
    parser.add_argument("--max_seq_length", type=int, help="Tokens per example.")
    parser.add_argument("--pretrain_steps", type=int, help="MLM steps per model.")
    parser.add_argument("--pretrain_seconds", type=float, help="Also stop pretraining after this much time.")
    parser.add_argument("--pretrain_batch_size", type=int, default=16, help="MLM examples per step.")
    parser.add_argument("--pretrain_learning_rate", type=float, default=1e-3, help="MLM learning rate.")
    parser.add_argument("--max_pretrain_eval_samples", type=int, default=256, help="MLM validation examples.")
    parser.add_argument("--finetune_steps", type=int, help="Fine-tuning steps per run.")
    parser.add_argument("--finetune_batch_size", type=int, default=32, help="Fine-tuning examples per step.")
    parser.add_argument(
        "--finetune_learning_rates",
        "--finetune_learning_rate",
        type=float,
        nargs="+",
        help="Fine-tuning learning rates; with more than one, each model's is chosen per task by its score on a "
        "held-out tenth of the training split (the dev set is seen only by the final runs).",
    )
    parser.add_argument(
        "--num_seeds", type=int,
        help="Fine-tuning runs per model and task at the chosen learning rate, with seeds --seed, --seed + 1, …; "
        "each variant-vs-control verdict is the paired interval over them.",
    )
    parser.add_argument("--heldout_fraction", type=float, default=0.1,
                        help="Share of the training split held out for choosing the learning rate.")  # fmt: skip
    parser.add_argument("--analysis_sentences", type=int, default=32, help="Dev sentences the analysis reads.")
    parser.add_argument("--seed", type=int, default=42, help="Seed of data, initialisation and masks.")
    parser.add_argument(
        "--workers", type=int, default=2,
        help="Runs trained side by side (each on its share of the CPU threads); 1 runs them one after another "
        "in this process.",
    )
    parser.add_argument("--disable_tqdm", action="store_true", help="No progress bars.")
    return parser


def parse_args(argv: list[str] | None = None, prog: str = "hf-variants compare") -> argparse.Namespace:
    """The arguments, with every flag the command line left unset taken from ``--preset``."""
    parser = build_parser(prog)
    args = parser.parse_args(underscored(sys.argv[1:] if argv is None else argv))
    for name, value in PRESETS[args.preset].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    for name in ("num_layers", "max_seq_length", "pretrain_steps", "finetune_steps", "num_seeds", "workers"):
        if getattr(args, name) < 1:
            parser.error(f"argument --{name}: must be at least 1, got {getattr(args, name)}.")
    if args.attractors is not None and args.attractors < 0:
        parser.error(f"argument --attractors: must be at least 0, got {args.attractors}.")
    rates = args.finetune_learning_rates
    if len(set(rates)) != len(rates) or min(rates) <= 0:
        parser.error(f"argument --finetune_learning_rates: needs distinct positive rates, got {rates}.")
    return args
