"""GLUE fine-tuning (run_glue on the Trainer): end to end per model type, STS-B regression, resume,
predictions in GLUE's submission format, Hub export with measured results, clear errors."""

from __future__ import annotations

import csv
import json
import random
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
import yaml
from safetensors.torch import load_file
from scipy import stats
from transformers import (
    AutoConfig,
    AutoModelForMaskedLM,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    Trainer,
)

from hf_variants.core.overrides import parse_overrides
from hf_variants.storage import run_folder, run_identity
from hf_variants.synthetic import synthetic_acceptability, synthetic_sentences
from hf_variants.tokenization import train_wordpiece_tokenizer
from hf_variants.training import checkpoints as checkpoint_files
from hf_variants.training import run_glue
from hf_variants.training.nonfinite import NonFiniteStepError

from .helpers import middle_parameter, poison_gradient
from .mlm_helpers import TINY

PERSON_WORDS = ("teacher", "child", "doctor", "farmer", "writer")


def write_tsv(path: Path, header: list[str] | None, rows: list[list]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t", quoting=csv.QUOTE_NONE, escapechar="\\")
        if header:
            writer.writerow(header)
        writer.writerows(rows)


def topic(sentence: str) -> int:
    return int(any(word in sentence for word in PERSON_WORDS))


@pytest.fixture(scope="module")
def glue_dir(tmp_path_factory) -> Path:
    """SST-2, CoLA, RTE, STS-B and MNLI (+ AX) in the original layouts, on the synthetic language.
    SST-2's label is the sentence's topic (person vs animal): learnable by a tiny model in a few steps."""
    root = tmp_path_factory.mktemp("glue")
    sentences = synthetic_sentences(400, seed=11)
    train, dev, test = sentences[:256], sentences[256:320], sentences[320:336]
    write_tsv(root / "SST-2/train.tsv", ["sentence", "label"], [[s, topic(s)] for s in train])
    write_tsv(root / "SST-2/dev.tsv", ["sentence", "label"], [[s, topic(s)] for s in dev])
    write_tsv(root / "SST-2/test.tsv", ["index", "sentence"], [[i, s] for i, s in enumerate(test)])
    cola = synthetic_acceptability(96, seed=5)
    write_tsv(root / "CoLA/train.tsv", None, [["gj04", label, "" if label else "*", s] for s, label in cola[:64]])
    write_tsv(root / "CoLA/dev.tsv", None, [["gj04", label, "" if label else "*", s] for s, label in cola[64:]])
    pairs = list(zip(sentences[:96], sentences[96:192], strict=True))
    rte_label = ["entailment", "not_entailment"]
    write_tsv(root / "RTE/train.tsv", ["index", "sentence1", "sentence2", "label"],
              [[i, a, b, rte_label[topic(a) == topic(b)]] for i, (a, b) in enumerate(pairs[:64])])  # fmt: skip
    write_tsv(root / "RTE/dev.tsv", ["index", "sentence1", "sentence2", "label"],
              [[i, a, b, rte_label[topic(a) == topic(b)]] for i, (a, b) in enumerate(pairs[64:])])  # fmt: skip
    write_tsv(
        root / "RTE/test.tsv", ["index", "sentence1", "sentence2"], [[i, a, b] for i, (a, b) in enumerate(pairs[:8])]
    )
    sts_header = ["index", "genre", "filename", "year", "old_index", "source1", "source2", "sentence1", "sentence2"]

    def overlap(a: str, b: str) -> float:
        return 5.0 * len(set(a.split()) & set(b.split())) / len(set(a.split()) | set(b.split()))

    sts_rows = [[i, "main", "x", "2012", i, "n", "n", a, b] for i, (a, b) in enumerate(pairs)]
    write_tsv(
        root / "STS-B/train.tsv", [*sts_header, "score"], [[*r, f"{overlap(r[7], r[8]):.3f}"] for r in sts_rows[:64]]
    )
    write_tsv(
        root / "STS-B/dev.tsv", [*sts_header, "score"], [[*r, f"{overlap(r[7], r[8]):.3f}"] for r in sts_rows[64:]]
    )
    write_tsv(root / "STS-B/test.tsv", sts_header, sts_rows[:8])
    mnli_header = ["index", "promptID", "pairID", "genre", "sentence1", "sentence2", "label1", "gold_label"]
    labels = ["entailment", "neutral", "contradiction"]
    mnli = [[i, i, f"{i}e", "gov", a, b, labels[i % 3], labels[i % 3]] for i, (a, b) in enumerate(pairs)]
    for name, rows in (("train", mnli[:48]), ("dev_matched", mnli[48:64]), ("dev_mismatched", mnli[64:80])):
        write_tsv(root / f"MNLI/{name}.tsv", mnli_header, rows)
    for name in ("test_matched", "test_mismatched"):
        write_tsv(root / f"MNLI/{name}.tsv", mnli_header[:6], [r[:6] for r in mnli[:5]])
    write_tsv(
        root / "diagnostic/diagnostic.tsv",
        ["index", "sentence1", "sentence2"],
        [[i, a, b] for i, (a, b) in enumerate(pairs[:7])],
    )
    return root


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> Path:
    output = tmp_path_factory.mktemp("glue-tokenizer")
    train_wordpiece_tokenizer(synthetic_sentences(500, seed=2), vocab_size=120, min_frequency=1).save_pretrained(output)
    return output


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory, tokenizer_dir: Path) -> dict[str, Path]:
    """A randomly initialised MLM checkpoint of every model type (the "pretrained" input of run_glue)."""
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    folders = {}
    for model_type, overrides in TINY.items():
        torch.manual_seed(0)
        config = AutoConfig.for_model(model_type, vocab_size=len(tokenizer), max_position_embeddings=64,
                                      pad_token_id=tokenizer.pad_token_id, **parse_overrides(overrides))  # fmt: skip
        folder = tmp_path_factory.mktemp(model_type)
        AutoModelForMaskedLM.from_config(config).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        folders[model_type] = folder
    return folders


def glue_args(checkpoint: Path, task: str, glue_dir: Path, output: Path, *extra: str) -> list[str]:
    return [
        "--model_name_or_path", str(checkpoint), "--task_name", task, "--glue_dir", str(glue_dir),
        "--output_dir", str(output), "--max_seq_length", "32", "--per_device_train_batch_size", "16",
        "--per_device_eval_batch_size", "32", "--learning_rate", "3e-3", "--report_to", "none",
        "--disable_tqdm", "true", "--log_level", "warning", "--dataloader_pin_memory", "false", *extra,
    ]  # fmt: skip


def dev_predictions(model_dir: Path, glue_dir: Path, task: str, pair: bool) -> tuple[np.ndarray, np.ndarray]:
    """Logits of the saved model on the dev file, computed here, and the dev labels."""
    from hf_variants.glue import load_glue

    dev = load_glue(task, glue_dir)["validation"]
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    keys = ("sentence1", "sentence2") if pair else ("sentence",)
    batch = tokenizer(*(list(dev[k]) for k in keys), padding=True, truncation=True, max_length=32, return_tensors="pt")
    with torch.no_grad():
        logits = model(**batch).logits.numpy()
    return logits, np.asarray(dev["label"])


def test_the_engine_called_with_typed_settings_is_the_command_line_run(
    checkpoints: dict[str, Path], glue_dir: Path, tmp_path: Path
) -> None:
    """``run_glue.run`` with typed settings (as the studies call it) trains the same model as the command
    line with the same values (the command line's own default, length-grouped batches, given explicitly), and
    records the same settings with an effect."""
    from transformers import TrainingArguments

    from hf_variants.settings.finetuning import DataTrainingArguments, ModelArguments, RunArguments

    extra = ("--do_train", "--do_eval", "--max_steps", "6", "--print_logs", "false")
    command = run_glue.main(glue_args(checkpoints["macaron_bert"], "sst2", glue_dir, tmp_path / "command", *extra))
    typed = run_glue.run(
        ModelArguments(model_name_or_path=str(checkpoints["macaron_bert"])),
        DataTrainingArguments(task_name="sst2", glue_dir=str(glue_dir), max_seq_length=32),
        TrainingArguments(
            output_dir=str(tmp_path / "typed"), per_device_train_batch_size=16, per_device_eval_batch_size=32,
            learning_rate=3e-3, report_to="none", disable_tqdm=True, log_level="warning",
            dataloader_pin_memory=False, do_train=True, do_eval=True, max_steps=6,
            train_sampling_strategy="group_by_length",
        ),
        RunArguments(print_logs=False),
    )  # fmt: skip
    assert typed["command"] is None and command["command"].startswith("run_glue.py --model_name_or_path")
    assert typed["arguments"] == command["arguments"] and typed["arguments"]["training"]["max_steps"] == 6
    assert typed["eval"]["validation"]["accuracy"] == command["eval"]["validation"]["accuracy"]
    weights = [load_file(tmp_path / run / "model.safetensors") for run in ("command", "typed")]
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][key], weights[1][key]) for key in weights[0])


@pytest.mark.parametrize("model_type", sorted(TINY))
def test_fine_tuning_reports_the_saved_models_dev_accuracy(
    model_type: str, checkpoints: dict[str, Path], glue_dir: Path, tmp_path: Path
) -> None:
    results = run_glue.main(glue_args(checkpoints[model_type], "sst2", glue_dir, tmp_path,
                                      "--do_train", "--do_eval", "--max_steps", "12"))  # fmt: skip
    logits, labels = dev_predictions(tmp_path, glue_dir, "sst2", pair=False)
    assert results["eval"]["validation"]["accuracy"] == pytest.approx(float((logits.argmax(-1) == labels).mean()))
    largest_share = np.bincount(logits.argmax(-1)).max() / len(labels)  # the "did not learn" measure
    assert results["eval"]["validation"]["largest_class_share"] == pytest.approx(largest_share)
    assert json.loads((tmp_path / "all_results.json").read_text())["eval_accuracy"] == pytest.approx(
        results["eval"]["validation"]["accuracy"]
    )
    # The fine-tuned backbone moved away from the checkpoint (training happened, on the loaded weights).
    before, after = load_file(checkpoints[model_type] / "model.safetensors"), load_file(tmp_path / "model.safetensors")
    shared = [k for k in after if k in before and "classifier" not in k and before[k].shape == after[k].shape]
    assert len(shared) > 5 and any(not torch.equal(before[k], after[k]) for k in shared)
    recorded = run_folder.verify_manifest(tmp_path)["files"]  # the fine-tuned folder lists what the run wrote
    assert {"model.safetensors", "config.json", "all_results.json"} <= set(recorded)
    assert recorded["model.safetensors"]["sha256"] == run_identity.file_sha256(tmp_path / "model.safetensors")


def test_a_tiny_model_learns_the_topic_task(checkpoints: dict[str, Path], glue_dir: Path, tmp_path: Path) -> None:
    results = run_glue.main(glue_args(checkpoints["macaron_bert"], "sst2", glue_dir, tmp_path,
                                      "--do_train", "--do_eval", "--num_train_epochs", "6"))  # fmt: skip
    assert results["eval"]["validation"]["accuracy"] >= 0.9, results["eval"]


def test_heldout_fraction_evaluates_on_training_rows_never_on_dev(
    checkpoints: dict[str, Path], glue_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """For choosing hyperparameters: a seeded slice of train is evaluated instead of dev, and the model is
    trained on the rest (the evaluated score is recomputed here on exactly those training rows)."""
    from hf_variants.glue import load_glue

    extra = ("--do_train", "--do_eval", "--max_steps", "6", "--heldout_fraction", "0.3", "--heldout_seed", "3")
    results = run_glue.main(glue_args(checkpoints["bert"], "sst2", glue_dir, tmp_path, *extra))
    train = load_glue("sst2", glue_dir)["train"]
    held = train.train_test_split(test_size=0.3, seed=3, shuffle=True)["test"]
    assert results["evaluated_on"] == "held-out 0.3 of the training split (seed 3)"
    assert results["eval"]["validation"]["samples"] == len(held) != len(load_glue("sst2", glue_dir)["validation"])
    tokenizer = AutoTokenizer.from_pretrained(tmp_path)
    model = AutoModelForSequenceClassification.from_pretrained(tmp_path).eval()
    batch = tokenizer(list(held["sentence"]), padding=True, truncation=True, max_length=32, return_tensors="pt")
    with torch.no_grad():
        predicted = model(**batch).logits.argmax(-1).numpy()
    accuracy = float((predicted == np.asarray(held["label"])).mean())
    assert results["eval"]["validation"]["accuracy"] == pytest.approx(accuracy)
    with pytest.raises(SystemExit) as refused:  # a usage error of the command line, naming the flag
        run_glue.main(glue_args(checkpoints["bert"], "sst2", glue_dir, tmp_path / "bad", "--heldout_fraction", "1.5"))
    assert refused.value.code == 2 and "--heldout_fraction must be between 0 and 1" in capsys.readouterr().err


def test_random_init_keeps_the_architecture_but_not_the_weights(
    checkpoints: dict[str, Path], glue_dir: Path, tmp_path: Path
) -> None:
    results = run_glue.main(glue_args(checkpoints["mgk_bert"], "sst2", glue_dir, tmp_path, "--do_train",
                                      "--max_steps", "1", "--learning_rate", "1e-9", "--random_init"))  # fmt: skip
    assert results["random_init"] and results["model_type"] == "mgk_bert"
    before, after = load_file(checkpoints["mgk_bert"] / "model.safetensors"), load_file(tmp_path / "model.safetensors")
    name = next(k for k in after if k.endswith("word_embeddings.weight"))
    assert before[name].shape == after[name].shape and not torch.allclose(before[name], after[name], atol=1e-4)


def test_stsb_is_regression_with_pearson_and_clipped_submission(
    checkpoints: dict[str, Path], glue_dir: Path, tmp_path: Path
) -> None:
    results = run_glue.main(glue_args(checkpoints["node_transformer"], "stsb", glue_dir, tmp_path, "--do_train",
                                      "--do_eval", "--do_predict", "--max_steps", "8"))  # fmt: skip
    config = AutoConfig.from_pretrained(tmp_path)
    assert config.num_labels == 1 and config.problem_type == "regression"
    logits, scores = dev_predictions(tmp_path, glue_dir, "stsb", pair=True)
    predicted = logits[:, 0]
    metrics = results["eval"]["validation"]
    assert metrics["pearson"] == pytest.approx(stats.pearsonr(predicted, scores)[0], abs=1e-4)
    assert metrics["spearmanr"] == pytest.approx(stats.spearmanr(predicted, scores)[0], abs=1e-4)
    assert metrics["combined_score"] == pytest.approx((metrics["pearson"] + metrics["spearmanr"]) / 2)
    assert metrics["prediction_std"] == pytest.approx(float(predicted.std()), rel=1e-4)
    rows = (tmp_path / "STS-B.tsv").read_text().splitlines()
    assert rows[0] == "index\tprediction" and len(rows) == 9
    values = [float(row.split("\t")[1]) for row in rows[1:]]
    assert all(0.0 <= v <= 5.0 for v in values)


def test_resume_from_checkpoint_gives_the_same_model(
    checkpoints: dict[str, Path], glue_dir: Path, tmp_path: Path
) -> None:
    common = ["--do_train", "--max_steps", "6", "--save_strategy", "steps", "--save_steps", "3", "--seed", "7",
              "--logging_steps", "1"]  # fmt: skip
    run_glue.main(glue_args(checkpoints["transject"], "sst2", glue_dir, tmp_path / "full", *common))
    # Mark the checkpoint's logged losses: a run that resumes carries them over, one that silently
    # retrained from scratch would log real values for steps 1-3.
    checkpoint = tmp_path / "full" / "checkpoint-3"
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    for entry in state["log_history"]:
        entry["loss"] = -1.0
    (checkpoint / "trainer_state.json").write_text(json.dumps(state))
    checkpoint_files.mark_complete(checkpoint)  # the edit above is ours: the checkpoint stays loadable
    resumed_dir = tmp_path / "resumed"
    resumed = run_glue.main(glue_args(checkpoints["transject"], "sst2", glue_dir, resumed_dir, *common,
                                      "--resume_from_checkpoint", str(checkpoint)))  # fmt: skip
    full = json.loads((tmp_path / "full" / "results.json").read_text())
    # the Trainer's own train_loss would cover only steps 4-6 after a resume
    assert resumed["train"]["train_loss"] == pytest.approx(full["train"]["train_loss"], rel=1e-6)

    def logged_losses(folder: Path) -> dict[int, float]:
        history = json.loads((folder / "trainer_state.json").read_text())["log_history"]
        return {entry["step"]: entry["loss"] for entry in history if "loss" in entry}

    full_losses, resumed_losses = logged_losses(tmp_path / "full"), logged_losses(resumed_dir)
    assert [resumed_losses[step] for step in (1, 2, 3)] == [-1.0, -1.0, -1.0]
    assert [resumed_losses[step] for step in (4, 5, 6)] == pytest.approx([full_losses[s] for s in (4, 5, 6)], rel=1e-5)
    first, second = load_file(tmp_path / "full/model.safetensors"), load_file(resumed_dir / "model.safetensors")
    for name in first:
        torch.testing.assert_close(second[name], first[name], rtol=1e-5, atol=1e-6, msg=name)


def test_rte_and_mnli_predictions_use_glue_submission_names_and_labels(
    checkpoints: dict[str, Path], glue_dir: Path, tmp_path: Path
) -> None:
    run_glue.main(glue_args(checkpoints["bert"], "rte", glue_dir, tmp_path / "rte", "--do_predict"))
    rows = (tmp_path / "rte" / "RTE.tsv").read_text().splitlines()
    assert rows[0] == "index\tprediction" and len(rows) == 9
    assert {row.split("\t")[1] for row in rows[1:]} <= {"entailment", "not_entailment"}
    results = run_glue.main(glue_args(checkpoints["macaron_bert"], "mnli", glue_dir, tmp_path / "mnli",
                                      "--do_eval", "--do_predict"))  # fmt: skip
    assert set(results["eval"]) == {"validation_matched", "validation_mismatched"}
    assert results["eval"]["validation_mismatched"]["samples"] == 16
    for name, count in (("MNLI-m.tsv", 5), ("MNLI-mm.tsv", 5), ("AX.tsv", 7)):
        rows = (tmp_path / "mnli" / name).read_text().splitlines()
        assert len(rows) == count + 1, name
        assert {row.split("\t")[1] for row in rows[1:]} <= {"entailment", "neutral", "contradiction"}


def test_export_card_carries_the_measured_dev_results(
    checkpoints: dict[str, Path], glue_dir: Path, tmp_path: Path
) -> None:
    export = tmp_path / "hub"
    results = run_glue.main(glue_args(checkpoints["macaron_bert"], "cola", glue_dir, tmp_path / "run", "--do_train",
                                      "--do_eval", "--max_steps", "4", "--export_dir", str(export)))  # fmt: skip
    card = (export / "README.md").read_text()
    metadata = yaml.safe_load(card.split("---")[1])
    entry = metadata["model-index"][0]["results"][0]
    assert entry["dataset"]["config"] == "cola" and entry["dataset"]["split"] == "validation"
    assert entry["metrics"][0]["type"] == "matthews_correlation"
    assert entry["metrics"][0]["value"] == pytest.approx(results["eval"]["validation"]["matthews_correlation"])
    assert json.loads((export / "config.json").read_text())["auto_map"]["AutoModelForSequenceClassification"]


def test_custom_csv_files_with_a_label_set_read_from_training(checkpoints: dict[str, Path], tmp_path: Path) -> None:
    rng = random.Random(0)
    rows = [(s, ["animal", "person"][topic(s)]) for s in synthetic_sentences(80, seed=4)]
    rng.shuffle(rows)
    for name, part in (("train.csv", rows[:64]), ("dev.csv", rows[64:])):
        with (tmp_path / name).open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["text", "label"])
            writer.writerows(part)
    results = run_glue.main([
        "--model_name_or_path", str(checkpoints["mgk_bert"]), "--train_file", str(tmp_path / "train.csv"),
        "--validation_file", str(tmp_path / "dev.csv"), "--do_train", "--do_eval", "--max_steps", "2",
        "--output_dir", str(tmp_path / "out"), "--report_to", "none", "--disable_tqdm", "true",
        "--max_seq_length", "32", "--log_level", "warning",
    ])  # fmt: skip
    assert AutoConfig.from_pretrained(tmp_path / "out").id2label == {0: "animal", 1: "person"}
    assert 0.0 <= results["eval"]["validation"]["accuracy"] <= 1.0


def test_a_card_made_from_the_users_csv_names_it_and_its_pushed_usage_runs_as_pasted(
    checkpoints: dict[str, Path], tmp_path: Path
) -> None:
    """A model fine-tuned on the user's own CSV: its card names that file (no GLUE), carries the evaluation that ran
    in model-index and the run's hyperparameters; pushed with a repo id, its usage names that repository, and the
    uploaded folder verifies (its manifest re-computed for the card it holds)."""
    from hf_variants.hub import LocalHub, push_folder_to_hub
    from hf_variants.storage.run_folder import verify_manifest

    rows = [(s, ["animal", "person"][topic(s)]) for s in synthetic_sentences(80, seed=4)]
    write_csv(tmp_path / "reviews.csv", ["text", "label"], rows[:64])
    write_csv(tmp_path / "reviews_dev.csv", ["text", "label"], rows[64:])
    export = tmp_path / "export"
    results = run_glue.main([
        "--model_name_or_path", str(checkpoints["macaron_bert"]), "--train_file", str(tmp_path / "reviews.csv"),
        "--validation_file", str(tmp_path / "reviews_dev.csv"), "--do_train", "--do_eval", "--max_steps", "2",
        "--output_dir", str(tmp_path / "out"), "--report_to", "none", "--disable_tqdm", "true", "--learning_rate",
        "1e-3", "--max_seq_length", "32", "--log_level", "warning", "--export_dir", str(export),
    ])  # fmt: skip
    card = (export / "README.md").read_text()
    metadata = yaml.safe_load(card.split("---")[1])
    assert "datasets" not in metadata and "nyu-mll/glue" not in card and "on GLUE" not in card
    entry = metadata["model-index"][0]["results"][0]
    assert entry["dataset"]["name"] == "reviews.csv" and entry["dataset"]["split"] == "validation"
    accuracy = results["eval"]["validation"]["accuracy"]
    assert entry["metrics"][0] == {"type": "accuracy", "value": pytest.approx(accuracy)}
    assert "the user's own data, `reviews.csv` (64 examples)" in card and "| `learning_rate` | `0.001` |" in card
    assert "your-name/" in card  # no repository yet: a placeholder
    push_folder_to_hub(export, "you/my-review-classifier", api=LocalHub(tmp_path / "hub"))
    pushed = tmp_path / "hub" / "you" / "my-review-classifier"
    pushed_card = (pushed / "README.md").read_text()
    assert "your-name/" not in pushed_card and 'pipeline("text-classification", model="you/my-review-classifier"' \
        in pushed_card  # fmt: skip
    assert verify_manifest(pushed) is not None and verify_manifest(export) is not None  # both verify


def test_multi_label_csv_trains_per_label_and_predicts_label_sets(checkpoints: dict[str, Path], tmp_path: Path) -> None:
    """Each row a set of labels ("person,long"): per-label BCE (the config's problem type), micro F1 and exact
    match on dev, and test predictions that are the labels whose logits the saved model puts above 0."""
    sentences = synthetic_sentences(96, seed=6)

    def labels(sentence: str) -> str:
        return ",".join([["animal", "person"][topic(sentence)], *(["long"] if len(sentence.split()) > 5 else [])])

    write_csv(tmp_path / "train.csv", ["text", "label"], [[s, labels(s)] for s in sentences[:64]])
    write_csv(tmp_path / "dev.csv", ["text", "label"], [[s, labels(s)] for s in sentences[64:88]])
    write_csv(tmp_path / "test.csv", ["text"], [[s] for s in sentences[88:]])
    results = run_glue.main([
        "--model_name_or_path", str(checkpoints["macaron_bert"]), "--train_file", str(tmp_path / "train.csv"),
        "--validation_file", str(tmp_path / "dev.csv"), "--test_file", str(tmp_path / "test.csv"),
        "--label_type", "multi_label", "--do_train", "--do_eval", "--do_predict", "--max_steps", "3",
        "--output_dir", str(tmp_path / "out"), "--report_to", "none", "--disable_tqdm", "true",
        "--max_seq_length", "32", "--log_level", "warning",
    ])  # fmt: skip
    config = AutoConfig.from_pretrained(tmp_path / "out")
    assert config.problem_type == "multi_label_classification"
    assert config.id2label == {0: "animal", 1: "long", 2: "person"}
    model = AutoModelForSequenceClassification.from_pretrained(tmp_path / "out").eval()
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "out")
    with torch.no_grad():
        logits = model(**tokenizer(sentences[64:], padding=True, return_tensors="pt")).logits
    chosen = (logits > 0).int().numpy()
    gold = np.array([[int(name in labels(s).split(",")) for name in ("animal", "long", "person")]
                     for s in sentences[64:88]])  # fmt: skip
    f1 = 2 * (chosen[:24] * gold).sum() / (chosen[:24].sum() + gold.sum())
    assert results["eval"]["validation"]["f1"] == pytest.approx(f1, abs=1e-6)
    assert results["eval"]["validation"]["exact_match"] == pytest.approx((chosen[:24] == gold).all(1).mean(), abs=1e-6)
    expected = [",".join(config.id2label[i] for i in range(3) if row[i]) for row in chosen[24:]]
    rows = (tmp_path / "out" / "predict_results_custom.txt").read_text().splitlines()
    assert rows[0] == "index\tprediction" and [row.split("\t")[1] for row in rows[1:]] == expected


def test_multi_label_scores_by_hand() -> None:
    predicted = np.array([[1, 0, 1], [0, 0, 0], [0, 1, 0]])
    gold = np.array([[1, 0, 0], [0, 0, 0], [0, 1, 0]])
    # TP 2, predicted positives 3, gold positives 2 → F1 = 4/5; rows 2 and 3 exact
    scores = run_glue.multi_label_scores(predicted, gold)
    assert scores == {"f1": pytest.approx(0.8), "exact_match": pytest.approx(2 / 3)}
    assert run_glue.collapse_measure(np.array([[1, 0], [1, 0], [0, 1]]), False) == {
        "largest_class_share": pytest.approx(2 / 3)}


# ------------------------------------------------------------------------------------------------
# Clear errors
# ------------------------------------------------------------------------------------------------
def write_csv(path: Path, header: list[str], rows: list[list]) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def test_missing_column_is_named(checkpoints: dict[str, Path], tmp_path: Path) -> None:
    train = write_csv(tmp_path / "train.csv", ["text", "label"], [["good", 1], ["bad", 0]])
    with pytest.raises(ValueError, match=r"missing column\(s\) \['sentence'\] for task sst2"):
        run_glue.main(["--model_name_or_path", str(checkpoints["bert"]), "--task_name", "sst2",
                       "--train_file", str(train), "--do_train", "--output_dir", str(tmp_path / "o")])  # fmt: skip


def test_labels_outside_the_task_label_set_are_named(checkpoints: dict[str, Path], tmp_path: Path) -> None:
    train = write_csv(tmp_path / "train.csv", ["sentence1", "sentence2", "label"],
                      [["a", "b", "entailment"], ["c", "d", "maybe"]])  # fmt: skip
    with pytest.raises(ValueError, match=r"label 'maybe' is not in the rte label set"):
        run_glue.main(["--model_name_or_path", str(checkpoints["bert"]), "--task_name", "rte",
                       "--train_file", str(train), "--do_train", "--output_dir", str(tmp_path / "o")])  # fmt: skip
    dev = write_csv(tmp_path / "dev.csv", ["text", "label"], [["x", "neutral"]])
    custom = write_csv(tmp_path / "custom.csv", ["text", "label"], [["x", "yes"], ["y", "no"]])
    with pytest.raises(ValueError, match=r"dev\.csv:2: label 'neutral' is not in the label set of the training file"):
        run_glue.main(["--model_name_or_path", str(checkpoints["bert"]), "--train_file", str(custom),
                       "--validation_file", str(dev), "--do_train", "--output_dir", str(tmp_path / "p")])  # fmt: skip


def test_task_and_num_labels_mismatch_is_refused(checkpoints: dict[str, Path], glue_dir: Path, tmp_path: Path) -> None:
    classifier = tmp_path / "sst2-model"
    run_glue.main(
        glue_args(checkpoints["macaron_bert"], "sst2", glue_dir, classifier, "--do_train", "--max_steps", "1")
    )
    with pytest.raises(ValueError, match=r"num_labels=2, but task stsb has 1 label\(s\) \(regression\)"):
        run_glue.main(glue_args(classifier, "stsb", glue_dir, tmp_path / "stsb", "--do_train"))
    # The explicit switch replaces the head.
    results = run_glue.main(glue_args(classifier, "stsb", glue_dir, tmp_path / "stsb", "--do_eval",
                                      "--ignore_mismatched_sizes"))  # fmt: skip
    assert "pearson" in results["eval"]["validation"]


def test_sequence_length_beyond_the_position_table_is_refused(
    checkpoints: dict[str, Path], glue_dir: Path, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match=r"--max_seq_length 100 exceeds the model's position table"):
        run_glue.main(glue_args(checkpoints["mgk_bert"], "sst2", glue_dir, tmp_path, "--do_eval",
                                "--max_seq_length", "100"))  # fmt: skip


def test_a_checkpoint_missing_backbone_weights_is_refused(
    checkpoints: dict[str, Path], glue_dir: Path, tmp_path: Path
) -> None:
    """A renamed or dropped backbone weight, or a config override that drops stored layers, would
    train from fresh weights while results say random_init: false."""
    import shutil

    from safetensors.torch import save_file

    damaged = tmp_path / "renamed"
    shutil.copytree(checkpoints["mgk_bert"], damaged)
    weights = load_file(damaged / "model.safetensors")
    name = next(k for k in weights if ".layer.0.attention.query.weight" in k)
    weights[name.replace("query", "querry")] = weights.pop(name)
    save_file(weights, damaged / "model.safetensors")
    with pytest.raises(ValueError, match=r"does not hold every weight of this model: 1 missing from the checkpoint"):
        run_glue.main(glue_args(damaged, "sst2", glue_dir, tmp_path / "a", "--do_train", "--max_steps", "1"))
    with pytest.raises(ValueError, match=r"in the checkpoint but not in this model .*layer\.1\."):
        run_glue.main(glue_args(checkpoints["mgk_bert"], "sst2", glue_dir, tmp_path / "b", "--do_train",
                                "--max_steps", "1", "--config_overrides", "num_hidden_layers=1",
                                "--allow_function_changes", "true"))  # fmt: skip
    with pytest.raises(ValueError, match=r"missing from the checkpoint .*final_layer_norm"):
        run_glue.main(glue_args(checkpoints["mgk_bert"], "sst2", glue_dir, tmp_path / "c", "--do_train",
                                "--max_steps", "1", "--config_overrides", "layer_norm_position=pre",
                                "--allow_function_changes", "true"))  # fmt: skip
    # the explicit way to start from fresh weights still works
    run_glue.main(glue_args(damaged, "sst2", glue_dir, tmp_path / "d", "--do_train", "--max_steps", "1",
                            "--random_init"))  # fmt: skip


def test_a_tokenizer_with_another_vocabulary_is_refused(
    checkpoints: dict[str, Path], glue_dir: Path, tmp_path: Path
) -> None:
    """Same size, other tokens: the embedding rows would mean other words."""
    import shutil

    from hf_variants.storage.run_identity import vocabulary_sha256

    pretrained = tmp_path / "pretrained"
    shutil.copytree(checkpoints["macaron_bert"], pretrained)
    config = AutoConfig.from_pretrained(pretrained)
    config.tokenizer_vocabulary_sha256 = vocabulary_sha256(AutoTokenizer.from_pretrained(pretrained))
    config.save_pretrained(pretrained)
    other = tmp_path / "other-tokenizer"
    train_wordpiece_tokenizer([s[::-1] for s in synthetic_sentences(500, seed=2)], vocab_size=120,
                              min_frequency=1).save_pretrained(other)  # fmt: skip
    assert len(AutoTokenizer.from_pretrained(other)) == len(AutoTokenizer.from_pretrained(pretrained))
    with pytest.raises(ValueError, match=r"another vocabulary than the one the model was pretrained with"):
        run_glue.main(glue_args(pretrained, "sst2", glue_dir, tmp_path / "a", "--do_train", "--max_steps", "1",
                                "--tokenizer_name", str(other)))  # fmt: skip
    run_glue.main(glue_args(pretrained, "sst2", glue_dir, tmp_path / "b", "--do_train", "--max_steps", "1"))


def test_empty_header_only_and_non_utf8_csv_files_are_refused(
    checkpoints: dict[str, Path], tmp_path: Path
) -> None:
    def csv_args(train: Path) -> list[str]:
        return ["--model_name_or_path", str(checkpoints["macaron_bert"]), "--train_file", str(train),
                "--output_dir", str(tmp_path / "out"), "--do_train", "--max_steps", "1",
                "--report_to", "none"]  # fmt: skip

    empty, header_only, latin1 = tmp_path / "empty.csv", tmp_path / "header.csv", tmp_path / "latin1.csv"
    empty.write_text("")
    header_only.write_text("sentence,label\n")
    latin1.write_bytes(b"sentence,label\nfine,1\ncaf\xe9,0\n")
    with pytest.raises(ValueError, match=r"empty\.csv is empty"):
        run_glue.main(csv_args(empty))
    with pytest.raises(ValueError, match=r"header\.csv has no rows"):
        run_glue.main(csv_args(header_only))
    with pytest.raises(ValueError, match=r"latin1\.csv:3: byte 0xe9 is not UTF-8"):
        run_glue.main(csv_args(latin1))


def test_one_fine_tuning_run_per_output_folder(checkpoints: dict[str, Path], glue_dir: Path, tmp_path: Path) -> None:
    """SST-2 with checkpoints, then CoLA into the same folder: refused (it used to resume the SST-2
    checkpoint, train 0 steps and save the SST-2 weights as the CoLA model)."""
    output = tmp_path / "run"
    run_glue.main(glue_args(checkpoints["macaron_bert"], "sst2", glue_dir, output, "--do_train", "--max_steps", "4",
                            "--save_strategy", "steps", "--save_steps", "2"))  # fmt: skip
    with pytest.raises(checkpoint_files.CheckpointError, match=r"holds another run .*task_name"):
        run_glue.main(glue_args(checkpoints["macaron_bert"], "cola", glue_dir, output, "--do_train",
                                "--max_steps", "4"))  # fmt: skip
    results = run_glue.main(glue_args(checkpoints["macaron_bert"], "cola", glue_dir, output, "--do_train",
                                      "--max_steps", "4", "--overwrite_output_dir", "true"))  # fmt: skip
    assert results["task"] == "cola" and AutoConfig.from_pretrained(output).finetuning_task == "cola"
    assert not (output / "checkpoint-2").exists()  # the SST-2 run's checkpoints are gone


def test_a_non_finite_training_loss_stops_fine_tuning(
    checkpoints: dict[str, Path], glue_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = Trainer.compute_loss

    def nan_on_second_step(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        loss = original(self, model, inputs, return_outputs, num_items_in_batch)
        return loss * float("nan") if self.state.global_step == 1 and model.training else loss

    monkeypatch.setattr(Trainer, "compute_loss", nan_on_second_step)
    with pytest.raises(FloatingPointError, match=r"Step 2: non-finite training loss nan"):
        run_glue.main(glue_args(checkpoints["bert"], "sst2", glue_dir, tmp_path / "a", "--do_train",
                                "--max_steps", "4"))  # fmt: skip
    results = run_glue.main(glue_args(checkpoints["bert"], "sst2", glue_dir, tmp_path / "b", "--do_train",
                                      "--max_steps", "4", "--skip_nonfinite_steps", "true"))  # fmt: skip
    assert results["train"]["skipped_nonfinite_steps"] == 1
    weights = load_file(tmp_path / "b" / "model.safetensors")
    assert all(torch.isfinite(tensor).all() for tensor in weights.values())


def test_an_infinite_gradient_stops_fine_tuning_naming_the_step_and_the_parameter(
    checkpoints: dict[str, Path], glue_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One parameter's gradient made infinite on the second step, with a finite loss: the Trainer's
    callback stops before the optimizer step naming that step and exactly that parameter (clipping
    would have spread it as NaN into every weight); with --skip_nonfinite_steps the step is skipped."""
    original, poisoned = Trainer.training_step, {}

    def poison_once(self, model, inputs, num_items_in_batch=None):
        if not poisoned:
            name, parameter = middle_parameter(self.model)
            poisoned[name] = poison_gradient(parameter, on_call=2)
        return original(self, model, inputs, num_items_in_batch)

    monkeypatch.setattr(Trainer, "training_step", poison_once)
    with pytest.raises(NonFiniteStepError) as stopped:
        run_glue.main(glue_args(checkpoints["macaron_bert"], "sst2", glue_dir, tmp_path / "a", "--do_train",
                                "--max_steps", "4"))  # fmt: skip
    (name,) = poisoned
    assert stopped.value.step == 2 and stopped.value.parameters == [name]
    assert str(stopped.value).startswith(f"Step 2: non-finite gradient in {name}. Nothing was updated")
    assert not (tmp_path / "a" / "model.safetensors").exists()
    poisoned.clear()
    results = run_glue.main(glue_args(checkpoints["macaron_bert"], "sst2", glue_dir, tmp_path / "b", "--do_train",
                                      "--max_steps", "4", "--skip_nonfinite_steps", "true"))  # fmt: skip
    assert results["train"]["skipped_nonfinite_steps"] == 1
    weights = load_file(tmp_path / "b" / "model.safetensors")
    assert all(torch.isfinite(tensor).all() for tensor in weights.values())


def test_run_identity_is_every_argument_but_those_without_effect(
    checkpoints: dict[str, Path], glue_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A TrainingArguments field the package never names (``neftune_noise_alpha``) still makes another run;
    the same data in another folder is the same run; a library version change is announced, not refused."""
    output = tmp_path / "run"
    command = glue_args(checkpoints["macaron_bert"], "sst2", glue_dir, output, "--do_train", "--max_steps", "4",
                        "--save_strategy", "steps", "--save_steps", "2")  # fmt: skip
    run_glue.main(command)
    for extra, difference in ((["--neftune_noise_alpha", "5"], "training.neftune_noise_alpha: None → 5.0"),
                              (["--lr_scheduler_kwargs", '{"power": 2.0}'], "training.lr_scheduler_kwargs"),
                              (["--skip_nonfinite_steps", "true"], "training.skip_nonfinite_steps: False → True"),
                              (["--dataloader_drop_last", "true"], "training.dataloader_drop_last")):  # fmt: skip
        with pytest.raises(checkpoint_files.CheckpointError, match=re.escape(difference)):
            run_glue.main([*command, *extra])
    # Logging, saving and worker settings are not the run's identity: the same run goes on.
    run_glue.main([*command, "--logging_steps", "1", "--save_total_limit", "3", "--dataloader_num_workers", "0"])

    moved = tmp_path / "moved-glue"
    shutil.copytree(glue_dir, moved)
    fingerprint_file = output / run_folder.FINGERPRINT_FILE
    saved = json.loads(fingerprint_file.read_text())
    saved["versions"]["transformers"] = "4.0.0"
    fingerprint_file.write_text(json.dumps(saved))
    with caplog.at_level("WARNING", logger="hf_variants.storage.run_identity"):
        moved_command = glue_args(checkpoints["macaron_bert"], "sst2", moved, output, "--do_train", "--max_steps", "4",
                                  "--save_strategy", "steps", "--save_steps", "2")  # fmt: skip
        results = run_glue.main(moved_command)
    assert results["task"] == "sst2"
    assert f"transformers 4.0.0 → {transformers.__version__}" in caplog.text
    (moved / "SST-2" / "dev.tsv").write_text((moved / "SST-2" / "dev.tsv").read_text().replace("\t1\n", "\t0\n", 1))
    with pytest.raises(checkpoint_files.CheckpointError, match=r"holds another run .*files"):
        run_glue.main(moved_command)


def test_overrides_that_change_what_the_weights_compute_need_a_flag(
    checkpoints: dict[str, Path], glue_dir: Path, tmp_path: Path
) -> None:
    """An MGK checkpoint fine-tuned as MLK loads every weight, so only the config can tell: refused with
    the field and the flag; dropout and ODE solver tolerances do not change the function and pass."""
    for override, change in (("attention_type=mlk", "attention_type: 'mgk' → 'mlk'"),
                             ("hidden_act=relu", "hidden_act: 'gelu' → 'relu'")):  # fmt: skip
        with pytest.raises(ValueError, match=re.escape(change) + ".*--allow_function_changes"):
            run_glue.main(glue_args(checkpoints["mgk_bert"], "sst2", glue_dir, tmp_path / override, "--do_train",
                                    "--max_steps", "1", "--config_overrides", override))  # fmt: skip
    run_glue.main(glue_args(checkpoints["mgk_bert"], "sst2", glue_dir, tmp_path / "mlk", "--do_train", "--max_steps",
                            "1", "--config_overrides", "attention_type=mlk",
                            "--allow_function_changes", "true"))  # fmt: skip
    assert AutoConfig.from_pretrained(tmp_path / "mlk").attention_type == "mlk"
    run_glue.main(glue_args(checkpoints["node_transformer"], "sst2", glue_dir, tmp_path / "tolerances", "--do_train",
                            "--max_steps", "1", "--config_overrides",
                            "rtol=1e-2,atol=1e-2,hidden_dropout_prob=0.0"))  # fmt: skip
