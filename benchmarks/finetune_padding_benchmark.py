#!/usr/bin/env python
"""Fine-tuning with and without padding waste: ``hf-variants finetune``'s defaults (each batch padded to its longest
example, examples of similar length batched together) against padding every example to ``--max_seq_length``, and
dynamic padding alone, on SST-2 with the same model, data, steps and seeds.

    python benchmarks/finetune_padding_benchmark.py --data_dir $DATA --output_dir runs/padding-benchmark

For each seed the three settings run one after another (their order rotated from seed to seed, so drift of the
machine hits all alike), each one ``run_glue.run`` call from the same randomly initialised BERT control and
tokenizer. It records per run the positions the model computed (``num_input_tokens_seen`` counting every input
position, padding included), the training wall time and the dev accuracy; then each setting's positions and time as
ratios to the padded setting, and the seed-paired difference of its dev accuracy (the same verdict rule as every
comparison, against a ±2-point margin). Writes ``padding_benchmark.json`` and ``padding_benchmark.md`` into
``--output_dir``. ``--tiny`` is a seconds-long run of the same code on a few examples (the tests run it).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

#: The settings compared: name → (pad every example to max_seq_length, the Trainer's sampling strategy).
SETTINGS = {
    "padded to max_seq_length": (True, "random"),
    "dynamic padding": (False, "random"),
    "dynamic padding + length-grouped batches (default)": (False, "group_by_length"),
}
PADDED, DEFAULT = "padded to max_seq_length", "dynamic padding + length-grouped batches (default)"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_dir", type=Path, default=os.environ.get("HF_VARIANTS_DATA"),
                        help="Folder with glue/SST-2 (default: $HF_VARIANTS_DATA).")  # fmt: skip
    parser.add_argument("--output_dir", type=Path, required=True, help="Where the JSON, table and runs go.")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--train_examples", type=int, default=3000)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--tiny", action="store_true", help="A few examples and steps: a test of the code path.")
    args = parser.parse_args(argv)
    if args.data_dir is None:
        parser.error("argument --data_dir: required without $HF_VARIANTS_DATA")
    if not (args.data_dir / "glue" / "SST-2" / "train.tsv").is_file():
        parser.error(f"argument --data_dir: {args.data_dir} has no glue/SST-2/train.tsv")
    if args.tiny:
        args.seeds, args.steps, args.train_examples = args.seeds[:2], 3, 64
    return args


def prepare_model(args: argparse.Namespace, folder: Path) -> Path:
    """A randomly initialised BERT control (hidden 128, 2 layers) with a WordPiece tokenizer trained on the
    training sentences, saved once: every run starts from the same weights."""
    import csv

    from hf_variants.bert_control import BertControlConfig, BertControlForSequenceClassification
    from hf_variants.tokenization import train_wordpiece_tokenizer

    with open(args.data_dir / "glue" / "SST-2" / "train.tsv", encoding="utf-8", newline="") as handle:
        sentences = [row["sentence"] for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)]
    tokenizer = train_wordpiece_tokenizer(sentences[: args.train_examples], 2000, 2, lowercase=True,
                                          model_max_length=512)  # fmt: skip
    config = BertControlConfig(vocab_size=len(tokenizer), hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                               intermediate_size=512, max_position_embeddings=512, num_labels=2)  # fmt: skip
    model = BertControlForSequenceClassification(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def fine_tune(args: argparse.Namespace, model: Path, setting: str, seed: int) -> dict:
    from transformers import TrainingArguments

    from hf_variants.settings.finetuning import DataTrainingArguments, ModelArguments, RunArguments
    from hf_variants.training import run_glue

    pad, strategy = SETTINGS[setting]
    output = args.output_dir / "runs" / f"{'padded' if pad else strategy}-seed{seed}"
    results = run_glue.run(
        ModelArguments(model_name_or_path=str(model)),
        DataTrainingArguments(task_name="sst2", glue_dir=str(args.data_dir / "glue"),
                              max_seq_length=args.max_seq_length, pad_to_max_length=pad,
                              max_train_samples=args.train_examples, max_eval_samples=64 if args.tiny else None),
        TrainingArguments(output_dir=str(output), do_train=True, do_eval=True,
                          max_steps=args.steps, per_device_train_batch_size=32, per_device_eval_batch_size=64,
                          learning_rate=1e-3, warmup_steps=0.1, seed=seed, train_sampling_strategy=strategy,
                          include_num_input_tokens_seen="all", save_strategy="no", report_to=[],
                          disable_tqdm=True, logging_steps=max(args.steps // 4, 1)),
        RunArguments(overwrite_output_dir=True, print_logs=False),
    )  # fmt: skip
    return {"setting": setting, "seed": seed, "positions": results["train"]["num_input_tokens_seen"],
            "train_seconds": results["train"]["train_runtime"],
            "dev_accuracy": results["eval"]["validation"]["accuracy"]}  # fmt: skip


def summary(runs: list[dict]) -> dict:
    """Per setting: positions and time as ratios to the padded setting (medians over seeds), and the seed-paired
    dev-accuracy difference against it with its verdict."""
    import statistics

    from hf_variants.lab import verdicts
    from hf_variants.lab.statistics import paired_difference_if_any

    by = {setting: {run["seed"]: run for run in runs if run["setting"] == setting} for setting in SETTINGS}
    padded = by[PADDED]
    rows = {}
    for setting, seeds in by.items():
        difference = paired_difference_if_any({s: r["dev_accuracy"] for s, r in seeds.items()},
                                              {s: r["dev_accuracy"] for s, r in padded.items()})  # fmt: skip
        verdict = verdicts.verdict(difference, 0.02) if setting != PADDED else None
        rows[setting] = {
            "positions": statistics.median(r["positions"] for r in seeds.values()),
            "train_seconds": statistics.median(r["train_seconds"] for r in seeds.values()),
            "fewer_positions_than_padded": statistics.median(padded[s]["positions"] / r["positions"]
                                                             for s, r in seeds.items()),
            "speedup_over_padded": statistics.median(padded[s]["train_seconds"] / r["train_seconds"]
                                                     for s, r in seeds.items()),
            "dev_accuracy": statistics.mean(r["dev_accuracy"] for r in seeds.values()),
            "dev_accuracy_vs_padded": None if verdict is None else verdict.text,
        }  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    model = prepare_model(args, args.output_dir / "model")
    runs = []
    names = list(SETTINGS)
    for index, seed in enumerate(args.seeds):
        for setting in names[index % len(names):] + names[: index % len(names)]:  # the order rotated per seed
            runs.append(fine_tune(args, model, setting, seed))
    settings = {k: v for k, v in vars(args).items() if k not in ("data_dir", "output_dir")}
    result = {"settings": settings, "runs": runs, "summary": summary(runs)}
    (args.output_dir / "padding_benchmark.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result["summary"], indent=1))
    print(f"{args.output_dir / 'padding_benchmark.json'}: tools/render_tables.py renders it as the pages' table")
    return result


if __name__ == "__main__":
    main()
