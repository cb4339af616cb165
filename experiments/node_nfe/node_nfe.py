#!/usr/bin/env python
"""Depth adaptivity of an N-ODE Transformer: function evaluations per block against solver tolerance
and input length, on real text. Writes ``node_nfe.json``::

    python experiments/node_nfe/node_nfe.py --checkpoint runs/nfe-node \\
        --text_file ../shared/data/wikitext-2/valid.txt --output_dir OUT

The checkpoint of the committed record was pretrained on WikiText-2 with the package's defaults (2 blocks,
hidden 256; the command is in docs/results.md, "Depth adaptivity"); the JSON records the checkpoint's config,
its training steps and the commit, and ``tools/render_tables.py`` renders the table of the results page and
of the N-ODE model card from it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import torch
from transformers import AutoModel, AutoTokenizer

import hf_variants  # noqa: F401  (registers the variants)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", type=Path, required=True, help="node_transformer checkpoint + tokenizer.")
    parser.add_argument("--text_file", type=Path, required=True)
    parser.add_argument("--output_dir", type=Path, default=Path("outputs/node_nfe"))
    parser.add_argument("--tolerances", type=float, nargs="+", default=[1e-2, 1e-3, 1e-4, 1e-5, 1e-6])
    parser.add_argument("--lengths", type=int, nargs="+", default=[16, 32, 64, 128])
    parser.add_argument("--num_texts", type=int, default=8)
    args = parser.parse_args()

    model = AutoModel.from_pretrained(args.checkpoint).eval()
    if model.config.model_type != "node_transformer":
        raise SystemExit(f"{args.checkpoint} holds a {model.config.model_type} model, not node_transformer.")
    tokenizer = AutoTokenizer.from_pretrained(args.checkpoint)
    lines = [line.strip() for line in args.text_file.read_text(encoding="utf-8").splitlines() if len(line.split()) > 60]
    texts = lines[: args.num_texts]
    if not texts:
        raise SystemExit(f"{args.text_file} has no line of more than 60 words.")

    def run(rtol: float, length: int) -> dict:
        model.config.rtol = model.config.atol = rtol
        encoded = tokenizer(texts, truncation=True, max_length=length, padding="max_length", return_tensors="pt")
        with torch.no_grad():
            output = model(**encoded, output_diagnostics=True)
        return {
            "nfe_per_block": output.diagnostics["nfe_per_block"].tolist(),
            "nfe_total": float(output.diagnostics["nfe_total"]),
            "last_hidden_state": output.last_hidden_state,
        }

    reference = run(min(args.tolerances) / 100, max(args.lengths))["last_hidden_state"]
    by_tolerance = []
    for rtol in args.tolerances:
        result = run(rtol, max(args.lengths))
        error = float((result.pop("last_hidden_state") - reference).abs().max())
        by_tolerance.append({"rtol_atol": rtol, **result, "max_abs_error_vs_tight": error})
        print(f"rtol=atol={rtol:g}: NFE per block {result['nfe_per_block']}, max |error| {error:.2e}")
    by_length = []
    for length in args.lengths:
        result = run(1e-5, length)
        result.pop("last_hidden_state")
        by_length.append({"length": length, **result})
        print(f"length {length}: NFE per block {result['nfe_per_block']}")
    fingerprint = args.checkpoint / "run_fingerprint.json"
    settings = json.loads(fingerprint.read_text(encoding="utf-8")) if fingerprint.is_file() else {}
    report = {
        "command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                 check=False).stdout.strip(),
        "checkpoint": str(args.checkpoint),
        "model": {key: getattr(model.config, key) for key in ("hidden_size", "num_hidden_layers", "hidden_act",
                                                               "intermediate_size", "num_attention_heads")},
        "pretraining": settings,
        "method": model.config.ode_method,
        "texts": len(texts),
        "by_tolerance": by_tolerance,
        "by_length_at_1e-5": by_length,
    }
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "node_nfe.json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
