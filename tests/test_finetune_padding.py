"""Fine-tuning computes real tokens, not padding: ``hf-variants finetune`` pads each batch to its longest example and
groups examples of similar length by default, counts the real tokens it trains on, and predicts what the padded path
predicts; the benchmark that measures it (``benchmarks/finetune_padding_benchmark.py``) counts positions exactly."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import pytest

from hf_variants.training import run_glue

from .helpers import load_script

WORDS = ["the", "a", "film", "movie", "good", "bad", "great", "awful", "plot", "actors", "story", "was", "is", "very",
         "not", "quite", "fun", "dull", "long", "short"]  # fmt: skip


def sst2_folder(root: Path, train: int = 96, dev: int = 24) -> Path:
    """A GLUE-layout SST-2 folder of made-up sentences of 2–40 words (labels by a word's presence)."""
    rng = random.Random(0)
    folder = root / "glue" / "SST-2"
    folder.mkdir(parents=True)
    for name, count in (("train", train), ("dev", dev)):
        with open(folder / f"{name}.tsv", "w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle, delimiter="\t", quoting=csv.QUOTE_NONE, escapechar="\\")
            writer.writerow(["sentence", "label"])
            for _ in range(count):
                sentence = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 40)))
                writer.writerow([sentence, int("good" in sentence or "great" in sentence)])
    return root


def test_the_command_line_defaults_to_dynamic_padding_length_grouped_batches_and_real_token_counts(tmp_path) -> None:
    argv = ["--model_name_or_path", "unused", "--task_name", "sst2", "--output_dir", str(tmp_path / "out")]
    _, data_args, training_args, _ = run_glue.parse_args(argv)
    assert not data_args.pad_to_max_length
    assert training_args.train_sampling_strategy == "group_by_length"
    assert training_args.include_num_input_tokens_seen == "non_padding"
    _, data_args, training_args, _ = run_glue.parse_args([*argv, "--pad_to_max_length", "--train_sampling_strategy",
                                                          "random"])  # fmt: skip
    assert data_args.pad_to_max_length and training_args.train_sampling_strategy == "random"


@pytest.fixture(scope="module")
def benchmark_run(tmp_path_factory) -> tuple[dict, Path, Path]:
    root = tmp_path_factory.mktemp("padding")
    data = sst2_folder(root / "data")
    script = load_script("benchmarks/finetune_padding_benchmark")
    return script.main(["--data_dir", str(data), "--output_dir", str(root / "out"), "--tiny"]), data, root / "out"


def test_the_padded_path_computes_every_position_and_the_default_far_fewer(benchmark_run) -> None:
    """Padded: steps × batch × max_seq_length positions exactly (3 × 32 × 128); the defaults compute only each
    batch's longest example, at most 42 tokens here ([CLS], 40 words, [SEP])."""
    record, _, out = benchmark_run
    padded = [run for run in record["runs"] if run["setting"].startswith("padded")]
    assert [run["positions"] for run in padded] == [3 * 32 * 128] * 2
    default = [run for run in record["runs"] if run["setting"].endswith("(default)")]
    assert all(run["positions"] <= 3 * 32 * 42 for run in default)
    row = record["summary"]["dynamic padding + length-grouped batches (default)"]
    assert row["fewer_positions_than_padded"] >= 128 / 42
    assert json.loads((out / "padding_benchmark.json").read_text())["summary"] == record["summary"]
    table = load_script("tools/benchmark_tables").padding_table(record)  # the pages' table of the record
    assert table.startswith("| setting |") and table.count("\n| ") == len(record["summary"])


def test_dynamic_padding_predicts_what_padding_to_max_length_predicts(benchmark_run, tmp_path) -> None:
    """The same fine-tuned model evaluated on the same dev set with each batch padded to its longest example and
    with every example padded to 128: the same accuracy and the same loss (float32 tolerance)."""
    from transformers import TrainingArguments

    from hf_variants.settings.finetuning import DataTrainingArguments, ModelArguments, RunArguments

    _, data, out = benchmark_run
    trained = out / "runs" / "group_by_length-seed1"
    scores = {}
    for pad in (True, False):
        results = run_glue.run(
            ModelArguments(model_name_or_path=str(trained)),
            DataTrainingArguments(task_name="sst2", glue_dir=str(data / "glue"), max_seq_length=128,
                                  pad_to_max_length=pad),
            TrainingArguments(output_dir=str(tmp_path / f"eval-{pad}"), do_train=False, do_eval=True,
                              per_device_eval_batch_size=8, report_to=[], disable_tqdm=True),
            RunArguments(),
        )  # fmt: skip
        scores[pad] = results["eval"]["validation"]
    assert scores[True]["accuracy"] == scores[False]["accuracy"]
    assert scores[True]["loss"] == pytest.approx(scores[False]["loss"], abs=1e-5)
