#!/usr/bin/env python
"""Pretrain every variant and BERT with MLM under the same tokenizer, size and CPU-time budget, and
tabulate validation perplexity and throughput (docs/pretraining.md).

    python scripts/pretrain_comparison.py --data_dir ../shared/data/wikitext-2 \\
        --output_dir runs/pretrain-wikitext2 --time_budget_seconds 200

Each model runs ``hf_variants.training.run_mlm`` in turn (nothing else should load the machine);
the tokenizer is trained once on the training file. Writes ``summary.json`` and ``summary.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from hf_variants.training import run_mlm, train_tokenizer

#: Matched sizes: hidden 256, 4 layers; BERT-style models with 4 heads of 64, MGK with 2 heads of 64
#: (the paper's half-the-heads comparison), TransJect with 4 experts, N-ODE with 2 ODE blocks.
MODELS = {
    "bert": "hidden_size=256,num_hidden_layers=4,num_attention_heads=4,intermediate_size=1024",
    "macaron_bert": "hidden_size=256,num_hidden_layers=4,num_attention_heads=4,intermediate_size=1024",
    "mgk_bert": "hidden_size=256,num_hidden_layers=4,num_attention_heads=2,head_dim=64,intermediate_size=1024",
    "transject": "hidden_size=256,num_hidden_layers=4,num_experts=4",
    "node_transformer": "hidden_size=256,num_hidden_layers=2,num_attention_heads=4,intermediate_size=1024",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_dir", type=Path, default=Path("../shared/data/wikitext-2"))
    parser.add_argument("--output_dir", type=Path, default=Path("runs/pretrain-wikitext2"))
    parser.add_argument("--time_budget_seconds", type=float, default=200)
    parser.add_argument("--vocab_size", type=int, default=8000)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--learning_rate", type=float, default=5e-4)
    parser.add_argument("--max_eval_samples", type=int, default=512)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()

    train_file, valid_file = args.data_dir / "train.txt", args.data_dir / "valid.txt"
    tokenizer_dir = args.output_dir / "tokenizer"
    train_tokenizer.main(["--train_file", str(train_file), "--vocab_size", str(args.vocab_size),
                          "--output_dir", str(tokenizer_dir)])  # fmt: skip
    rows = {}
    for model_type in args.models:
        argv = [
            "--model_type", model_type, "--config_overrides", MODELS[model_type],
            "--train_file", str(train_file), "--validation_file", str(valid_file),
            "--tokenizer_name", str(tokenizer_dir), "--max_seq_length", str(args.max_seq_length),
            "--per_device_train_batch_size", str(args.batch_size), "--learning_rate", str(args.learning_rate),
            "--lr_scheduler_type", "constant_with_warmup", "--num_warmup_steps", "100",
            "--max_train_steps", "1000000", "--time_budget_seconds", str(args.time_budget_seconds),
            "--max_eval_samples", str(args.max_eval_samples), "--seed", str(args.seed),
            "--logging_steps", "25", "--output_dir", str(args.output_dir / model_type), "--disable_tqdm",
        ]  # fmt: skip
        rows[model_type] = run_mlm.main(argv)
    summary = {
        "command": " ".join(["scripts/pretrain_comparison.py", *sys.argv[1:]]),
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "models": {name: {**result, "config_overrides": MODELS[name]} for name, result in rows.items()},
    }
    (args.output_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    lines = [
        "| model | parameters | steps | train tokens | tokens/s | validation loss | validation perplexity |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, result in rows.items():
        lines.append(
            f"| {name} | {result['parameters']:,} | {result['steps']:,} | {result['train_tokens']:,} | "
            f"{result['tokens_per_second']:,.0f} | {result['eval_loss']:.3f} | {result['perplexity']:.1f} |"
        )
    (args.output_dir / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
