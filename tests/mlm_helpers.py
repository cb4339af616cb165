"""Shared pieces of the MLM pretraining tests: tiny configs, the corpus and tokenizer fixtures and
the run_mlm argument list."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from hf_variants.synthetic import synthetic_sentences
from hf_variants.training import train_tokenizer

TINY = {
    "macaron_bert": "hidden_size=32,num_hidden_layers=2,num_attention_heads=4,intermediate_size=64",
    "mgk_bert": "hidden_size=32,num_hidden_layers=2,num_attention_heads=2,head_dim=16,intermediate_size=64",
    "transject": "hidden_size=32,num_hidden_layers=2,num_experts=2",
    "node_transformer": (
        "hidden_size=32,num_hidden_layers=1,num_attention_heads=4,intermediate_size=32,rtol=1e-3,atol=1e-3"
    ),
    "bert": "hidden_size=32,num_hidden_layers=2,num_attention_heads=4,intermediate_size=64",
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "train.txt"
    path.write_text("\n".join(synthetic_sentences(800, seed=3)) + "\n")
    return path


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory, corpus: Path) -> Path:
    output = tmp_path_factory.mktemp("tokenizer")
    train_tokenizer.main(
        ["--train_file", str(corpus), "--vocab_size", "120", "--min_frequency", "1", "--output_dir", str(output)]
    )
    return output


@pytest.fixture(scope="module")
def pretrained_run(tmp_path_factory, corpus: Path, tokenizer_dir: Path) -> Path:
    """A finished two-step pretraining run of a tiny Macaron-BERT (its folder, with manifest)."""
    from hf_variants.training import run_mlm

    output = tmp_path_factory.mktemp("pretrained") / "run"
    run_mlm.main(mlm_args(corpus, tokenizer_dir, output, "macaron_bert", "--max_train_steps", "2"))
    return output


def mlm_args(
    corpus: Path, tokenizer_dir: Path, output: Path, model_type: str = "macaron_bert", *extra: str
) -> list[str]:
    return [
        "--model_type", model_type, "--config_overrides", TINY[model_type],
        "--train_file", str(corpus), "--tokenizer_name", str(tokenizer_dir),
        "--max_seq_length", "24", "--per_device_train_batch_size", "8", "--learning_rate", "3e-3",
        "--num_warmup_steps", "0", "--output_dir", str(output), "--disable_tqdm", "--logging_steps", "1", *extra,
    ]  # fmt: skip


def history(output: Path) -> list[dict]:
    return json.loads((output / "train_history.json").read_text())


def deterministic_metrics(output: Path) -> list[dict]:
    """``metrics.csv`` rows without the timing column (wall-clock throughput differs between runs)."""
    rows = list(csv.DictReader((output / "metrics.csv").read_text().splitlines()))
    return [{k: v for k, v in row.items() if k != "tokens_per_second"} for row in rows]




def assert_same_model_as_one_process(one: Path, parallel: Path) -> None:
    """A data-parallel run (``parallel``) trained the one-process run's (``one``) model: the same losses and
    weights to float tolerance (the processes' gradients are summed in another order)."""
    import torch
    from safetensors.torch import load_file

    assert json.loads((parallel / "results.json").read_text())["processes"] == 2
    for a, b in zip(history(one), history(parallel), strict=True):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5)
    expected, got = load_file(one / "model.safetensors"), load_file(parallel / "model.safetensors")
    assert expected.keys() == got.keys()
    for key in expected:
        torch.testing.assert_close(got[key], expected[key], atol=1e-5, rtol=1e-4, msg=key)
