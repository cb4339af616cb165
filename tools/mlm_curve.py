#!/usr/bin/env python
"""An MLM learning curve beside what word frequencies alone reach: reads the ``metrics.csv`` of one or more
``hf-variants pretrain --eval_steps N --report_to csv`` runs (or the training history of runs that reported to no
tracker, as the grid's self-pretraining: ``--runs $WORK/self_pretrained/sst2/*/*/pretrained-train-seed1``) and the
unigram entropy of their corpus under their tokenizer (the validation loss of a model that predicts every masked
token by its frequency), and writes one small JSON record::

    python tools/mlm_curve.py --runs runs/curve-lr1e-3 runs/curve-lr3e-3 --train_file corpus.txt \\
        --tokenizer tokenizer/ --output OUT/mlm_curve.json

Each run's ``run_fingerprint.json`` must name the given corpus and tokenizer by content, and one length.
"""

from __future__ import annotations

import argparse
import csv
import math
from collections import Counter
from pathlib import Path

from transformers import AutoTokenizer

from hf_variants.lab import records
from hf_variants.storage.record_schema import load_json
from hf_variants.storage.run_identity import describe_files, tokenizer_sha256


def unigram_entropy(tokenizer, lines: list[str], max_length: int) -> float:
    """The entropy (nats) of the corpus's token frequencies, as the pretraining tokenizes it (special tokens out)."""
    counts: Counter[int] = Counter()
    for line in lines:
        counts.update(
            tokenizer(line, truncation=True, max_length=max_length - 2, add_special_tokens=False)["input_ids"]
        )
    total = sum(counts.values())
    return -sum(count / total * math.log(count / total) for count in counts.values())


def curve(run: Path, points: int = 20) -> dict:
    """The run's losses by step: from its ``metrics.csv`` (``--report_to csv``, evaluated every ``--eval_steps``),
    else (a run that reported to no tracker, as the grid's self-pretraining) its ``train_history.json`` as
    ``points`` window means of the training loss and its final validation loss from ``results.json``."""
    if (run / "metrics.csv").is_file():
        with (run / "metrics.csv").open(newline="") as handle:
            rows = list(csv.DictReader(handle))
        return {
            "eval_loss_by_step": {int(row["step"]): float(row["eval_loss"]) for row in rows if row.get("eval_loss")},
            "train_loss_by_step": {int(row["step"]): float(row["loss"]) for row in rows if row.get("loss")},
        }
    history_file = run / "train_history.json"  # a list of steps, not a record
    history = load_json(history_file) if history_file.is_file() else None
    results = records.read_record(run / "results.json")
    if history is None or results is None:
        raise FileNotFoundError(f"--runs: {run} has neither metrics.csv nor train_history.json and results.json")
    width = max(1, len(history) // points)
    windows = [history[start:start + width] for start in range(0, len(history) - width + 1, width)]
    train = {int(window[-1]["step"]): sum(row["loss"] for row in window) / len(window) for window in windows}
    return {"eval_loss_by_step": {int(results["steps"]): float(results["eval_loss"])}, "train_loss_by_step": train}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=Path, nargs="+", required=True)
    parser.add_argument("--train_file", type=Path, required=True, help="The runs' corpus (checked by content).")
    parser.add_argument("--tokenizer", type=Path, required=True, help="The runs' tokenizer (checked by content).")
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args()
    corpus, _ = describe_files([args.train_file])  # as the pretraining engine fingerprints its data
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    runs = {}
    unique_names = len({run.name for run in args.runs}) == len(args.runs)
    for run in args.runs:
        name = run.name if unique_names else "/".join(run.parts[-3:])  # the grid's: <pair>/<role>/<run>
        settings = records.read_record(run / "run_fingerprint.json")
        if settings is None:
            parser.error(f"--runs: {run} has no run_fingerprint.json (not a finished hf-variants pretrain run)")
        if settings["data_files"] != corpus:
            parser.error(f"--runs: {run} was not pretrained on --train_file {args.train_file}")
        if settings["tokenizer_sha256"] != tokenizer_sha256(tokenizer):
            parser.error(f"--runs: {run} was not pretrained with --tokenizer {args.tokenizer}")
        runs[name] = {key: settings[key] for key in ("learning_rate", "seed", "schedule_steps", "max_seq_length")}
        try:
            runs[name] |= curve(run)
        except FileNotFoundError as error:
            parser.error(str(error))
    lengths = {run["max_seq_length"] for run in runs.values()}
    if len(lengths) != 1:
        parser.error(f"--runs: pretrained at different lengths {sorted(lengths)}")
    lines = [line for line in args.train_file.read_text(encoding="utf-8").splitlines() if line.strip()]
    record = {
        "command": f"python tools/mlm_curve.py --runs {' '.join(map(str, args.runs))} --train_file {args.train_file} "
        f"--tokenizer {args.tokenizer} --output {args.output}",
        "vocabulary": len(tokenizer),
        "uniform_loss": math.log(len(tokenizer)),
        "unigram_entropy": unigram_entropy(tokenizer, lines, lengths.pop()),
        "runs": runs,
    }
    records.write_record(args.output, record, within=args.output.parent)
    print(f"Wrote {args.output}")


if __name__ == "__main__":
    main()
