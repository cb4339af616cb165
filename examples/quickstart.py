#!/usr/bin/env python
"""The quickstart: build a Macaron-BERT, teach it a little language, and ship it.

Steps (about a minute on a 2-core CPU, no network):
  1. train a WordPiece tokenizer on a corpus (default: the package's synthetic language),
  2. build a small Macaron-BERT and pretrain it briefly with masked-language modelling,
  3. run ``transformers.pipeline("fill-mask")`` on it,
  4. ``save_pretrained`` and reload through ``AutoModelForMaskedLM`` (outputs must match exactly),
  5. export a Hub folder (remote code, safetensors, tokenizer, model card) with ``hf_variants.hub``.

    python examples/quickstart.py --output_dir outputs/quickstart
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import torch
from transformers import AutoModelForMaskedLM, DataCollatorForLanguageModeling, pipeline

import hf_variants
from hf_variants.hub import export_for_hub
from hf_variants.synthetic import synthetic_sentences
from hf_variants.tokenization import train_wordpiece_tokenizer


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output_dir", type=Path, default=Path("outputs/quickstart"))
    parser.add_argument("--corpus", type=Path, help="A text file, one sentence or paragraph per line.")
    parser.add_argument("--steps", type=int, default=300, help="MLM training steps.")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    torch.manual_seed(args.seed)
    if args.corpus is not None:
        lines = [line.strip() for line in args.corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
        if not lines:
            raise SystemExit(f"{args.corpus} has no text.")
    else:
        lines = synthetic_sentences(4000, seed=args.seed)
    tokenizer = train_wordpiece_tokenizer(lines, vocab_size=1000, min_frequency=1, model_max_length=64)
    print(f"[1/5] tokenizer: {len(tokenizer)} tokens from {len(lines)} lines")

    config = hf_variants.MacaronBertConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=256,
        max_position_embeddings=64,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = hf_variants.MacaronBertForMaskedLM(config)
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15, seed=args.seed)
    encoded = tokenizer(lines, truncation=True, max_length=64)["input_ids"]
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    generator = torch.Generator().manual_seed(args.seed)
    model.train()
    losses = []
    for _ in range(args.steps):
        rows = torch.randint(0, len(encoded), (32,), generator=generator).tolist()
        batch = collator([{"input_ids": encoded[i]} for i in rows])
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    first, last = sum(losses[:20]) / 20, sum(losses[-20:]) / 20
    print(f"[2/5] pretrained {args.steps} MLM steps: loss {first:.2f} -> {last:.2f} (perplexity {math.exp(last):.1f})")

    model.eval()
    fill_mask = pipeline("fill-mask", model=model, tokenizer=tokenizer)
    sentence = "the hungry cats [MASK] the mouse ." if args.corpus is None else f"{lines[0].split()[0]} [MASK]"
    predictions = ", ".join(f"{p['token_str']} ({p['score']:.2f})" for p in fill_mask(sentence, top_k=3))
    print(f"[3/5] fill-mask: {sentence!r} -> {predictions}")

    checkpoint = args.output_dir / "checkpoint"
    model.save_pretrained(checkpoint)
    tokenizer.save_pretrained(checkpoint)
    reloaded = AutoModelForMaskedLM.from_pretrained(checkpoint).eval()
    inputs = tokenizer(["the small dog chases the ball ."], return_tensors="pt")
    with torch.no_grad():
        same = torch.equal(model(**inputs).logits, reloaded(**inputs).logits)
    if not same:
        raise SystemExit("reloaded model gives different outputs")
    print(f"[4/5] saved to {checkpoint} and reloaded as {type(reloaded).__name__}: identical outputs")

    folder = export_for_hub(
        model,
        args.output_dir / "hub",
        tokenizer,
        training_summary=(
            f"Pretrained for {args.steps} MLM steps on {args.corpus or 'the synthetic language'} "
            f"by `examples/quickstart.py` (final training loss {last:.2f})."
        ),
    )
    print(f"[5/5] Hub folder: {folder} (load with trust_remote_code=True; push with hf-variants push)")


if __name__ == "__main__":
    main()
