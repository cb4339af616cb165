#!/usr/bin/env python
"""Empirical layer-wise activation bounds (TransJect paper, Fig. 5c) on real sentences.

For TransJect (default ``residual_weight="tanh"``, α_l = tanh(a_l) bounded as Theorem 2 needs, from
ReZero's 0), TransJect with eq. 3's ``"sigmoid"`` (α_l ∈ (0, 1) from 0.5), the same with the
authors' N(0, 1) token embeddings, TransJect with the unbounded ``"linear"`` residual weight,
Entropic-TransJect, TransJect's matched control (the same model with softmax attention and BERT
layers, same embeddings and pooling) and ``transformers``' BERT as an external reference, all of the
same width and depth, each first trained on SST-2 (``--train_steps``, sentence classification from
scratch with a WordPiece tokenizer trained on SST-2 train) by the fine-tuning engine — the
classification grid's run (:func:`hf_variants.lab.grid_training.train_and_evaluate`: the Trainer of
``hf-variants finetune`` with AdamW, linear warmup and decay, clipping and the non-finite check; a
run that stops is recorded with its status and cause) — the script records the residual weights
α_l during training (every ``--train_steps // 10`` steps) and the dev accuracy with every α_l set to
0 afterwards (what the layers contribute), then runs SST-2 dev sentences and measures, for every
layer l and every pair of real tokens (i, j) of a sentence, the distance ratio

    ‖h_i^(l) − h_j^(l)‖ / ‖h_i^(l−1) − h_j^(l−1)‖,

the empirical activation bound of layer l (Theorem 2 bounds it for TransJect by e² over the whole
encoder). It also reports each token's norm ratio ‖h_i^(l)‖ / ‖h_i^(l−1)‖. Writes
``transject_bounds.json`` and ``transject_bounds.png``::

    python experiments/transject_bounds/transject_bounds.py --glue_dir ../shared/data/glue --output_dir OUT
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
from transformers import BertConfig, PretrainedConfig, PreTrainedModel, TrainerCallback

from hf_variants.core.composition import matched_control
from hf_variants.core.schemes.injective.modeling_injective import residual_weights
from hf_variants.glue import load_glue_local
from hf_variants.lab.analysis import layer_distance_ratios, summarise
from hf_variants.lab.grid_training import EncodedSplit, RunSettings, train_and_evaluate
from hf_variants.tokenization import train_wordpiece_tokenizer
from hf_variants.transject import TransJectConfig


def read_sst2(glue_dir: Path, split: str, limit: int | None = None) -> tuple[list[str], list[int]]:
    """SST-2 sentences and labels through the package's GLUE loader."""
    data = load_glue_local("sst2", glue_dir)[split]
    if limit is not None:
        data = data.select(range(min(limit, len(data))))
    return [sentence.strip() for sentence in data["sentence"]], list(data["label"])


def model_configs(vocab_size: int, hidden: int, layers: int, max_len: int, pad_id: int) -> dict[str, PretrainedConfig]:
    """The compared models, by name: TransJect's readings, its matched control and transformers' BERT."""
    shared = dict(
        vocab_size=vocab_size,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_labels=2,
        max_position_embeddings=max_len,
        pad_token_id=pad_id,
    )
    transject = TransJectConfig(num_experts=4, **shared)
    return {
        "TransJect": transject,
        "TransJect, residual_weight=sigmoid": TransJectConfig(num_experts=4, residual_weight="sigmoid", **shared),
        "TransJect, sigmoid, N(0, 1) token embeddings": TransJectConfig(
            num_experts=4, residual_weight="sigmoid", embedding_init="standard_normal", **shared
        ),
        "TransJect, residual_weight=linear": TransJectConfig(num_experts=4, residual_weight="linear", **shared),
        "Entropic-TransJect": TransJectConfig(num_experts=4, entropic=True, **shared),
        "matched control (softmax, BERT layers)": matched_control(transject),
        "transformers BERT (external reference)": BertConfig(
            num_attention_heads=4, intermediate_size=4 * hidden, attn_implementation="eager", **shared
        ),
    }


class ResidualWeightTrace(TrainerCallback):
    """The residual weights α_l (:func:`residual_weights`) every ``interval`` steps and after the last,
    by step; nothing for a model without injective layers."""

    def __init__(self, interval: int) -> None:
        self.interval = max(1, interval)
        self.by_step: dict[int, list[float]] = {}

    def on_step_begin(self, args, state, control, model=None, **kwargs):
        if state.global_step % self.interval == 0 and (alphas := residual_weights(model)):
            self.by_step[state.global_step] = alphas

    def on_train_end(self, args, state, control, model=None, **kwargs):
        if alphas := residual_weights(model):
            self.by_step[state.global_step] = alphas


def ratio_summary(model: PreTrainedModel, encodings: list[dict]) -> dict[str, Any]:
    """The distance and norm ratios of ``model``'s layers on ``encodings``, summarised per layer, and the
    largest distance ratio over the whole encoder (the product of the layers' maxima)."""
    ratios = layer_distance_ratios(model, encodings)
    return {
        "distance_ratio": [summarise(v) for v in ratios["distance_ratio"]],
        "norm_ratio": [summarise(v) for v in ratios["norm_ratio"]],
        "encoder_distance_ratio_max": float(np.prod([v.max() for v in ratios["distance_ratio"]])),
    }


def bounds_record(run: dict[str, Any], trace: ResidualWeightTrace) -> dict[str, Any]:
    """One model's entry of ``transject_bounds.json`` from the engine's run record (measured by
    :func:`ratio_summary`): the dev accuracy (and with every α_l = 0), α_l by step and the ratios per layer;
    a run that did not finish keeps its status and cause instead of numbers."""
    if run["status"] != "finished":
        return run
    zeroed = {"dev_accuracy_alpha_zero": run["accuracy_with_identity_layers"]} if "residual_weights" in run else {}
    return {
        "status": "finished",
        "final_train_loss": run["final_train_loss"],
        "residual_weight_alpha_by_step": trace.by_step,
        "dev_accuracy": run["accuracy"],
        "predicts_one_class": run["predicts_one_class"],
        **zeroed,
        **{field: run[field] for field in ("distance_ratio", "norm_ratio", "encoder_distance_ratio_max")},
    }


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(8, 4))
    names = [name for name, model in results["models"].items() if model["status"] == "finished"]
    layers = len(results["models"][names[0]]["distance_ratio"])
    width = 0.8 / len(names)
    for index, name in enumerate(names):
        stats = results["models"][name]["distance_ratio"]
        positions = np.arange(1, layers + 1) + (index - (len(names) - 1) / 2) * width
        axis.bxp(
            [
                {"med": s["median"], "q1": s["p1"], "q3": s["p99"], "whislo": s["min"], "whishi": s["max"], "label": ""}
                for s in stats
            ],
            positions=positions,
            widths=width * 0.9,
            showfliers=False,
            patch_artist=True,
            boxprops={"facecolor": f"C{index}"},
        )
        axis.plot([], [], color=f"C{index}", linewidth=6, label=name)
    axis.axhline(math.e**2, color="gray", linestyle="--", linewidth=1, label="e² (Theorem 2, whole encoder)")
    axis.axhline(1.0, color="black", linewidth=0.5)
    axis.set_yscale("log")
    axis.set_xticks(np.arange(1, layers + 1), [str(layer) for layer in range(1, layers + 1)])
    axis.set(xlabel="layer", ylabel="‖Δh⁽ˡ⁾‖ / ‖Δh⁽ˡ⁻¹⁾‖ (token pairs)")
    axis.set_title("Layer-wise distance ratios on SST-2 dev (box: p1–p99, whiskers: min–max)", fontsize=10)
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=90)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--glue_dir", type=Path, default=Path("../shared/data/glue"))
    parser.add_argument("--output_dir", type=Path, default=Path("outputs/transject_bounds"))
    parser.add_argument("--hidden_size", type=int, default=128)
    parser.add_argument("--num_layers", type=int, default=4)
    parser.add_argument("--train_examples", type=int, default=8000)
    parser.add_argument("--train_steps", type=int, default=1000)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument("--warmup_ratio", type=float, default=0.1)
    parser.add_argument("--num_sentences", type=int, default=200, help="SST-2 dev sentences to measure.")
    parser.add_argument("--max_length", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    train_sentences, train_labels = read_sst2(args.glue_dir, "train", args.train_examples)
    dev_sentences, dev_labels = read_sst2(args.glue_dir, "validation")
    tokenizer = train_wordpiece_tokenizer(train_sentences, vocab_size=4000, model_max_length=args.max_length)
    train = EncodedSplit.encode(tokenizer, train_sentences, train_labels, args.max_length)
    dev = EncodedSplit.encode(tokenizer, dev_sentences, dev_labels, args.max_length)
    measured = [
        dict(tokenizer(sentence, truncation=True, return_tensors="pt", return_token_type_ids=False))
        for sentence in dev_sentences[: args.num_sentences]
    ]
    settings = RunSettings(learning_rate=args.learning_rate, warmup_ratio=args.warmup_ratio,
                           steps=args.train_steps, batch_size=args.batch_size, seed=args.seed)  # fmt: skip
    configs = model_configs(len(tokenizer), args.hidden_size, args.num_layers, args.max_length, tokenizer.pad_token_id)
    results: dict = {
        "command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "engine": "hf_variants.lab.grid_training.train_and_evaluate (the fine-tuning engine's Trainer)",
        "models": {},
    }
    for name, config in configs.items():
        trace = ResidualWeightTrace(args.train_steps // 10)
        run = train_and_evaluate(config, tokenizer, train, dev, settings, callbacks=[trace],
                                 measure=lambda model: ratio_summary(model, measured))  # fmt: skip
        stats = results["models"][name] = bounds_record(run, trace)
        if stats["status"] != "finished":
            print(f"{name}: {stats['status']} ({stats.get('cause') or stats.get('error')})")
            continue
        alphas = trace.by_step.get(args.train_steps)
        print(
            f"{name}: dev acc {stats['dev_accuracy']:.3f}; per-layer max distance ratio "
            + ", ".join(f"{s['max']:.3f}" for s in stats["distance_ratio"])
            + (f"; trained α_l {', '.join(f'{a:+.3f}' for a in alphas)}" if alphas else "")
        )
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "transject_bounds.json").write_text(json.dumps(results, indent=2) + "\n")
    plot(results, args.output_dir / "transject_bounds.png")
    print(f"wrote {args.output_dir / 'transject_bounds.json'} and transject_bounds.png")


if __name__ == "__main__":
    main()
