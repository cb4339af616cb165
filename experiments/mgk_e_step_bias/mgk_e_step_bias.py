#!/usr/bin/env python
"""How MGK's variances bias its E-steps (the MGK card's "Unequal variances" limitation).

The paper's kernel ``exp(−‖q − k_r‖² / 2σ_r²)`` has no Gaussian normaliser, so a wider component
scores higher at every distance. For each setting of ``variance_factors`` (the paper's equal
``[1, 1]`` and the §3 ablation's ``[1, 3]``) this builds the first MGK layer of a freshly initialised
MGK-BERT (hidden 128, 2 heads of width 64), feeds it the embeddings of random token sequences and
records

* the soft E-step: π of the last (with ``[1, 3]`` the wide) component per head after 1, 10, 50, 100
  and ``--forwards`` training forwards (eq. 8's M-step; π starts at ½);
* the hard E-step: the share of (query, key) pairs whose ``max_r`` picks the last component;

for each of ``--seeds`` initialisations, so that a drift toward one component can be told apart from
a drift toward the wide one.

::

    python experiments/mgk_e_step_bias/mgk_e_step_bias.py --output OUT/e_step_bias.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from hf_variants.core.mixers.mgk.modeling_mgk import component_log_scores
from hf_variants.mgk_bert import MgkBertConfig, MgkBertModel

SETTINGS = {"paper (§2.3, A.1): [1, 1]": [1.0, 1.0], "ablation (§3): [1, 3]": [1.0, 3.0]}


def measure(variance_factors: list[float], forwards: int, seed: int) -> dict:
    torch.manual_seed(seed)
    sizes = dict(hidden_size=128, num_attention_heads=2, head_dim=64, intermediate_size=256, num_hidden_layers=1)
    config = MgkBertConfig(**sizes, vocab_size=1000, variance_factors=variance_factors, mixture_weights="soft_em")
    model = MgkBertModel(config).train()
    attention = model.encoder.layer[0].attention
    generator = torch.Generator().manual_seed(seed)
    wide_prior, hard_share = [], []
    for _ in range(forwards):
        ids = torch.randint(5, config.vocab_size, (8, 64), generator=generator)
        with torch.no_grad():
            hidden = model.embeddings(input_ids=ids)
            attention(hidden, None)  # a training forward: the soft E-step updates π (eq. 8)
            query, keys, _ = attention.project(hidden)
            scores = component_log_scores(query, keys, attention.variances(query), None)  # (B, H, M, N, N)
        wide_prior.append([round(p, 4) for p in attention.mixture_prior[:, -1].tolist()])
        hard_share.append((scores.argmax(dim=2) == scores.shape[2] - 1).float().mean().item())
    return {
        "variance_factors": variance_factors,
        "seed": seed,
        "soft_e_step_last_prior_per_head_after": {str(n): wide_prior[n - 1] for n in (1, 10, 50, 100, forwards)},
        "hard_e_step_last_share": round(sum(hard_share) / len(hard_share), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", type=Path, default=Path("outputs/mgk_e_step_bias.json"))
    parser.add_argument("--forwards", type=int, default=200)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    args = parser.parse_args()
    results = {
        name: [measure(factors, args.forwards, seed) for seed in args.seeds] for name, factors in SETTINGS.items()
    }
    for name, runs in results.items():
        final = [p for run in runs for p in run["soft_e_step_last_prior_per_head_after"][str(args.forwards)]]
        at_50 = [p for run in runs for p in run["soft_e_step_last_prior_per_head_after"]["50"]]
        hard = [run["hard_e_step_last_share"] for run in runs]
        print(f"{name}: soft E-step π_last per head after 50 forwards {sorted(at_50)}, after {args.forwards} "
              f"{sorted(final)}; hard E-step picks the last component for {min(hard):.1%}–{max(hard):.1%} of pairs")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    command = "python experiments/mgk_e_step_bias/mgk_e_step_bias.py"
    args.output.write_text(json.dumps({"command": command, **results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
