"""scripts/glue_comparison.py: its table from finished runs, including undefined (constant-prediction) scores."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from hf_variants.training.checkpoints import CheckpointError

from .helpers import load_script

glue_comparison = load_script("glue_comparison")


GRID = ["--models", "bert", "mgk_bert", "--tasks", "sst2", "stsb", "--seeds", "1", "2", "3"]


def write_run(root: Path, model: str, task: str, init: str, seed: int, value: float, **changed: str) -> None:
    """A finished run's ``results.json`` as ``run_glue`` writes it (NaN included), made with the grid's command
    unless ``changed`` alters a setting."""
    args = glue_comparison.parse_args(["--output_dir", str(root), *GRID, *[f"--{k}={v}" for k, v in changed.items()]])
    run_dir, argv = glue_comparison.job_argv(args, model, task, seed, random_init=init == "random")
    metric = {"stsb": "pearson", "sst2": "accuracy"}[task]
    run_dir.mkdir(parents=True)
    result = {
        "command": " ".join(["run_glue.py", *argv]),
        "task": task,
        "seed": seed,
        "train": {"train_runtime": 10.0 * seed},
        "eval": {"validation": {metric: value}},
    }
    (run_dir / "results.json").write_text(json.dumps(result))


def summarize_only(tmp_path: Path, capsys: pytest.CaptureFixture) -> tuple[dict, str]:
    glue_comparison.main(["--summarize_only", "--output_dir", str(tmp_path), *GRID])
    capsys.readouterr()

    def refuse(constant: str) -> None:
        raise AssertionError(f"summary.json holds {constant}, which is not JSON")

    summary = json.loads((tmp_path / "summary.json").read_text(), parse_constant=refuse)
    assert summary["command"] == " ".join(["scripts/glue_comparison.py", "--output_dir", str(tmp_path), *GRID])
    assert "summarize_only" not in summary["settings"]
    return summary["results"], (tmp_path / "summary.md").read_text()


def test_table_averages_defined_scores_and_pairs_seeds(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    pretrained, random = {1: 0.70, 2: 0.60, 3: 0.65}, {1: 0.50, 2: 0.62, 3: 0.55}
    for seed in (1, 2, 3):
        write_run(tmp_path, "bert", "sst2", "pretrained", seed, pretrained[seed])
        write_run(tmp_path, "bert", "sst2", "random", seed, random[seed])
        # STS-B: the pretrained model predicts a constant on seeds 1 and 2 (Pearson undefined)
        write_run(tmp_path, "bert", "stsb", "pretrained", seed, 0.2 if seed == 3 else math.nan)
        write_run(tmp_path, "bert", "stsb", "random", seed, 0.1 * seed)
    write_run(tmp_path, "mgk_bert", "sst2", "pretrained", 1, 0.5)  # an unfinished cell (1 of 3 seeds)

    table, text = summarize_only(tmp_path, capsys)

    sst2 = table["bert/pretrained"]["sst2"]
    assert sst2["mean"] == pytest.approx(65.0) and sst2["std"] == pytest.approx(5.0)
    assert sst2["undefined_seeds"] == 0 and sst2["train_seconds"] == pytest.approx(20.0)
    stsb = table["bert/pretrained"]["stsb"]
    assert stsb["scores"] == [None, None, pytest.approx(20.0)] and stsb["undefined_seeds"] == 2
    assert stsb["mean"] == pytest.approx(20.0) and stsb["std"] is None
    assert table["bert/random"]["stsb"]["mean"] == pytest.approx(20.0)
    assert "mgk_bert/pretrained" not in table  # only cells with every seed finished

    assert "| bert | pretrained | 65.0 ± 5.0 | 20.0 (2 undefined†) |" in text
    assert "| bert | random | 55.7 ± 6.0 | 20.0 ± 10.0 |" in text
    # pretraining wins seeds 1 and 3 on SST-2; on STS-B only seed 3 has both scores, and 20.0 < 30.0
    assert "| bert | 2/3 | 0/1 |" in text and "| mgk_bert | – | – |" in text
    assert "† The model predicted one constant score" in text


def test_all_seeds_undefined_shows_undefined(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    for seed in (1, 2, 3):
        write_run(tmp_path, "bert", "stsb", "pretrained", seed, math.nan)
        write_run(tmp_path, "bert", "stsb", "random", seed, 0.1)

    table, text = summarize_only(tmp_path, capsys)

    assert table["bert/pretrained"]["stsb"]["mean"] is None and table["bert/pretrained"]["stsb"]["std"] is None
    assert "| bert | pretrained | – | undefined† |" in text and "| bert | – | –† |" in text


def test_runs_of_another_command_are_refused_not_reused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    for seed in (1, 2, 3):
        write_run(tmp_path, "bert", "sst2", "random", seed, 0.5)
        write_run(tmp_path, "bert", "sst2", "pretrained", seed, 0.6, learning_rate="1e-4")

    refusal = r"pretrained-seed1/results\.json holds a run made with another command"
    with pytest.raises(CheckpointError, match=refusal) as error:
        summarize_only(tmp_path, capsys)
    assert "--learning_rate 0.0001" in str(error.value) and "--learning_rate 0.0005" in str(error.value)
