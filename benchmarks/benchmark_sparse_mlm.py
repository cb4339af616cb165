#!/usr/bin/env python
"""Sparse vs dense masked-LM prediction: one MLM training step (forward, backward, AdamW) of every
variant with a BERT-sized vocabulary (30,522), computing the decoder at all positions (dense) or only
at the 15% masked positions (``sparse_prediction=True``, MosaicBERT-style). Writes
``sparse_mlm_benchmark.json``::

    python benchmarks/benchmark_sparse_mlm.py --output_dir OUT

At the classification grid's size (the self-pretraining study's MLM: hidden 64, 2 layers of 2 heads, its 8,000-token
vocabulary, 32 examples of 128 tokens)::

    python benchmarks/benchmark_sparse_mlm.py --output_dir OUT --hidden_size 64 \
        --num_layers 2 --intermediate_size 128 --num_attention_heads 2 --vocab_size 8000 --batch_size 32 \
        --model_types bert_control macaron_bert mgk_bert transject
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForMaskedLM

import hf_variants  # noqa: F401  (registers the variants)

SIZES = {
    "bert_control": {"num_attention_heads": 4},
    "macaron_bert": {"num_attention_heads": 4},
    "mgk_bert": {"num_attention_heads": 2, "head_dim": 64},
    "transject": {"num_experts": 4},
    "node_transformer": {"num_attention_heads": 4, "rtol": 1e-3, "atol": 1e-3},
}


def step_function(model: torch.nn.Module, batch: int, seq_len: int, vocab: int):
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(5, vocab, (batch, seq_len), generator=generator)
    labels = input_ids.masked_fill(torch.rand(batch, seq_len, generator=generator) > 0.15, -100)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)

    def step() -> float:
        loss = model(input_ids=input_ids, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return float(loss.detach())

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output_dir", type=Path, default=Path("outputs/benchmarks"))
    parser.add_argument("--hidden_size", type=int, default=256)
    parser.add_argument("--num_layers", type=int, default=4)
    parser.add_argument("--vocab_size", type=int, default=30522)
    parser.add_argument("--intermediate_size", type=int, help="default: 4 × hidden_size")
    parser.add_argument("--num_attention_heads", type=int, help="default: each model's own (SIZES)")
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--seq_len", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--model_types", nargs="+", default=list(SIZES))
    args = parser.parse_args()

    results = {}
    for model_type in args.model_types:
        steps, losses = {}, {}
        for sparse in (False, True):
            torch.manual_seed(0)
            sizes = SIZES[model_type] | ({} if args.num_attention_heads is None else
                                         {"num_attention_heads": args.num_attention_heads})  # fmt: skip
            config = AutoConfig.for_model(
                model_type, vocab_size=args.vocab_size, hidden_size=args.hidden_size,
                num_hidden_layers=args.num_layers, intermediate_size=args.intermediate_size or 4 * args.hidden_size,
                sparse_prediction=sparse, **sizes,
            )  # fmt: skip
            name = "sparse" if sparse else "dense"
            steps[name] = step_function(
                AutoModelForMaskedLM.from_config(config).train(), args.batch_size, args.seq_len, args.vocab_size
            )
            losses[name] = steps[name]()  # warm-up; same weights and data, so the same first loss
        samples = {name: [] for name in steps}
        for _ in range(args.repeats):
            for name, step in steps.items():
                start = time.perf_counter()
                step()
                samples[name].append(time.perf_counter() - start)
        median = {name: statistics.median(values) for name, values in samples.items()}
        results[model_type] = {
            "seconds_per_step": median,
            "speedup": median["dense"] / median["sparse"],
            "first_loss": losses,
        }
        print(
            f"{model_type}: dense {median['dense'] * 1e3:.0f} ms, sparse {median['sparse'] * 1e3:.0f} ms, "
            f"speed-up {results[model_type]['speedup']:.2f}× "
            f"(first losses {losses['dense']:.5f} / {losses['sparse']:.5f})"
        )
    report = {
        "command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "machine": {"platform": platform.platform(), "threads": torch.get_num_threads(), "torch": torch.__version__},
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "results": results,
    }
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "sparse_mlm_benchmark.json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
