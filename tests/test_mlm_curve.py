"""``tools/mlm_curve.py``: the unigram reference against a hand computation, and runs of another corpus refused."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from .helpers import load_script


def whitespace_tokenizer(text: str, truncation: bool, max_length: int, add_special_tokens: bool) -> dict:
    assert truncation and not add_special_tokens
    return {"input_ids": text.split()[:max_length]}


def test_the_unigram_entropy_is_the_token_frequencies_entropy() -> None:
    curve = load_script("tools/mlm_curve")
    # length 5 leaves 3 tokens beside [CLS] and [SEP]: "a a b" and "a c c" (d cut) → a: 3, b: 1, c: 2 of 6
    entropy = curve.unigram_entropy(whitespace_tokenizer, ["a a b", "a c c d"], max_length=5)
    assert entropy == pytest.approx(-(0.5 * math.log(0.5) + 1 / 6 * math.log(1 / 6) + 1 / 3 * math.log(1 / 3)))
    assert curve.unigram_entropy(whitespace_tokenizer, ["x x", "x"], max_length=8) == 0.0


def test_a_run_of_another_corpus_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    curve = load_script("tools/mlm_curve")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat\n")
    run = tmp_path / "run"
    run.mkdir()
    (run / "run_fingerprint.json").write_text(json.dumps({"data_files": [{"size": 1, "sha256": "0" * 64}]}))
    monkeypatch.setattr(curve, "AutoTokenizer", type("T", (), {"from_pretrained": staticmethod(lambda path: None)}))
    argv = ["--runs", str(run), "--train_file", str(corpus), "--tokenizer", str(tmp_path), "--output", "out.json"]
    monkeypatch.setattr(sys, "argv", ["mlm_curve.py", *argv])
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit):
        curve.main()
    assert f"--runs: {run} was not pretrained on --train_file {corpus}" in capsys.readouterr().err
    assert not (tmp_path / "out.json").exists()


def test_a_run_without_a_tracker_gives_its_curve_from_the_training_history(tmp_path: Path) -> None:
    """The grid's self-pretraining reports to no tracker: its curve is the window means of its per-step training
    loss and its final validation loss; a folder with neither record is named."""
    curve = load_script("tools/mlm_curve")
    losses = [9.0, 8.0, 7.0, 6.0, 5.0, 4.0, 3.0]  # 7 steps in windows of 3 (points=2): the seventh step left out
    (tmp_path / "train_history.json").write_text(json.dumps([{"step": i + 1, "loss": x} for i, x in enumerate(losses)]))
    (tmp_path / "results.json").write_text(json.dumps({"steps": 7, "eval_loss": 3.5}))
    assert curve.curve(tmp_path, points=2) == {"eval_loss_by_step": {7: 3.5},
                                               "train_loss_by_step": {3: 8.0, 6: 5.0}}  # fmt: skip
    (tmp_path / "results.json").unlink()
    with pytest.raises(FileNotFoundError, match=f"--runs: {tmp_path} has neither metrics.csv"):
        curve.curve(tmp_path)
