"""Arguments are checked where they are parsed: every bad value is an error that names the argument
(exit status 2), never a hang, a silent change of meaning or a bare ZeroDivisionError later; and the
engine refuses a run that would end without an evaluated token."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from hf_variants.settings import pretraining as pretrain_arguments
from hf_variants.training import run_mlm

from .mlm_helpers import mlm_args

BASE = ["--model_type", "bert_control", "--train_file", "corpus.txt", "--output_dir", "out"]

#: (argument, value) pairs that trained wrongly, hung or crashed before they were checked at the edge.
BAD_VALUES = [
    ("--max_grad_norm", "-1"),  # was gradient ascent
    ("--max_train_steps", "0"), ("--max_train_steps", "-3"),  # were a full epoch / an untrained "success"
    ("--num_train_epochs", "0"), ("--num_train_epochs", "-1"),
    ("--gradient_accumulation_steps", "-1"), ("--gradient_accumulation_steps", "0"),  # looped forever / divided by 0
    ("--per_device_train_batch_size", "-2"), ("--per_device_train_batch_size", "0"),
    ("--per_device_eval_batch_size", "0"),
    ("--max_eval_samples", "0"), ("--max_seq_length", "1"), ("--max_seq_length", "0"),  # perplexity 1.0 on 0 tokens
    ("--logging_steps", "0"), ("--checkpointing_steps", "0"), ("--checkpointing_steps", "-1"), ("--eval_steps", "0"),
    ("--learning_rate", "-0.001"), ("--learning_rate", "0"), ("--learning_rate", "nan"),
    ("--mlm_probability", "0"), ("--mlm_probability", "1.5"), ("--num_warmup_steps", "-1"),
    ("--adam_beta1", "1"), ("--adam_beta2", "-0.1"), ("--weight_decay", "-0.1"), ("--time_budget_seconds", "0"),
    ("--validation_split_percentage", "100"), ("--train_tokenizer_vocab_size", "3"),
    ("--preprocessing_num_workers", "0"), ("--max_train_steps", "ten"),
]  # fmt: skip


@pytest.mark.parametrize(("argument", "value"), BAD_VALUES)
def test_a_bad_value_is_refused_naming_its_argument(argument: str, value: str, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        pretrain_arguments.parse_args([*BASE, argument, value])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert f"argument {argument}: " in error and value in error


def test_edge_values_that_mean_something_are_accepted() -> None:
    args = pretrain_arguments.parse_args([*BASE, "--max_grad_norm", "0", "--num_warmup_steps", "0",
                                          "--weight_decay", "0", "--max_train_steps", "1"])  # fmt: skip
    assert (args.max_grad_norm, args.num_warmup_steps, args.weight_decay, args.max_train_steps) == (0.0, 0.0, 0.0, 1)


def test_max_grad_norm_zero_means_no_clipping(corpus: Path, tokenizer_dir: Path, tmp_path: Path) -> None:
    """As in transformers: 0 trains exactly like an unreachable clipping norm, not with zero gradients."""

    def weights(name: str, norm: str) -> dict[str, torch.Tensor]:
        run_mlm.main(mlm_args(corpus, tokenizer_dir, tmp_path / name, "macaron_bert", "--max_train_steps", "3",
                              "--max_grad_norm", norm))  # fmt: skip
        return load_file(tmp_path / name / "model.safetensors")

    unclipped, unreachable, tight = weights("zero", "0"), weights("huge", "1e9"), weights("tight", "1e-4")
    assert all(torch.equal(unclipped[key], unreachable[key]) for key in unclipped)
    assert not all(torch.equal(unclipped[key], tight[key]) for key in unclipped)


def test_a_run_without_an_evaluated_token_is_an_error(corpus: Path, tokenizer_dir: Path, tmp_path: Path) -> None:
    arguments = mlm_args(corpus, tokenizer_dir, tmp_path / "run", "macaron_bert", "--max_train_steps", "1",
                         "--max_eval_samples", "1", "--max_seq_length", "3", "--mlm_probability", "0.001")  # fmt: skip
    with pytest.raises(ValueError, match="No validation token was masked"):
        run_mlm.main(arguments)
