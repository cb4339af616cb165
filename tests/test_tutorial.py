"""The two tutorials run as written: every block of each page, in order, in an empty folder, with the installed
``hf-variants`` command. "Fine-tune on your own CSV": classification, regression and multi-label files, the export
pushed to a local Hub folder and loaded back by transformers alone. "Pretrain on your corpus, then fine-tune": the
pretraining, its resumption, and the fine-tuned encoder beside the same architecture from random initialisation."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import REPO_ROOT

CSV_PAGE = REPO_ROOT / "docs" / "tutorial-csv.md"
PRETRAINING_PAGE = REPO_ROOT / "docs" / "tutorial-pretraining.md"
BLOCK = re.compile(r"```(python|bash)\n(.*?)```", re.DOTALL)


def page_blocks(page: Path) -> list[tuple[str, str]]:
    return BLOCK.findall(page.read_text(encoding="utf-8"))


def run_page(page: Path, folder: Path) -> list[tuple[str, str]]:
    """Every block of ``page`` in ``folder``, in order, as a user runs them; what each printed (standard output
    and error)."""
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
                   "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}  # fmt: skip
    printed = []
    for number, (kind, code) in enumerate(page_blocks(page)):
        command = [sys.executable, "-c", code] if kind == "python" else ["bash", "-e", "-c", code]
        result = subprocess.run(command, cwd=folder, capture_output=True, text=True, env=environment,
                                stdin=subprocess.DEVNULL, timeout=600)  # fmt: skip
        assert result.returncode == 0, f"{page.name} block {number} ({kind}):\n{result.stderr[-3000:]}"
        printed.append((result.stdout, result.stderr))
    return printed


def test_the_tutorials_are_python_and_commands_in_order() -> None:
    assert [kind for kind, _ in page_blocks(CSV_PAGE)] == ["python", "bash", "bash", "bash", "bash", "bash", "python"]
    assert [kind for kind, _ in page_blocks(PRETRAINING_PAGE)] == ["python", "bash", "bash", "bash", "bash", "python"]


@pytest.mark.full  # about two minutes: every command of the page, as a user runs them
def test_the_csv_tutorial_runs_as_written_and_the_models_learn(tmp_path: Path) -> None:
    printed = run_page(CSV_PAGE, tmp_path)
    runs = tmp_path / "runs"
    classifier = json.loads((runs / "my-classifier" / "results.json").read_text())["eval"]["validation"]
    assert classifier["accuracy"] >= 0.9 and classifier["largest_class_share"] < 0.8 and classifier["samples"] == 100
    predictions = (runs / "my-classifier" / "predict_results_custom.txt").read_text().splitlines()
    assert predictions[0] == "index\tprediction" and {line.split("\t")[1] for line in predictions[1:]} == {
        "positive", "negative"}
    scorer = json.loads((runs / "my-scorer" / "results.json").read_text())["eval"]["validation"]
    assert scorer["mse"] < 1.0 and scorer["prediction_std"] > 0.5  # the scores vary from about 1 to 5: it learned
    tagger = json.loads((runs / "my-tagger" / "results.json").read_text())["eval"]["validation"]
    assert tagger["f1"] >= 0.9 and tagger["exact_match"] >= 0.7
    tags = (runs / "my-tagger" / "predict_results_custom.txt").read_text().splitlines()[1:]
    assert {line.split("\t")[1] for line in tags} >= {"criticism,praise", "praise", "criticism"}
    assert (tmp_path / "hub" / "you" / "my-review-classifier" / "model.safetensors").is_file()
    assert not any("Do you wish to run the custom code" in out + err for out, err in printed)  # no prompt on the way
    answers = ast.literal_eval(printed[-1][0].strip().splitlines()[-1])
    assert [answer["label"] for answer in answers] == ["positive", "negative"]


@pytest.mark.full  # about three minutes
def test_the_pretraining_tutorial_runs_as_written_and_pretraining_shows(tmp_path: Path) -> None:
    """The page's claim holds on its run: the encoder learned from the corpus which words go together (its MLM head
    fills a slot after a word of praise with praise), and the classifier fine-tuned from it scores the dev reviews,
    whose words no labelled example has, far above the same model trained from scratch."""
    printed = run_page(PRETRAINING_PAGE, tmp_path)
    encoder = tmp_path / "runs" / "my-encoder"
    pretrained = json.loads((encoder / "results.json").read_text())
    assert pretrained["perplexity"] < 10  # far below guessing among the 200-token vocabulary
    assert "finished: nothing was trained or written (it finished at step 600;" in "".join(printed[2])
    assert sorted(path.name for path in encoder.glob("checkpoint-*")) == [f"checkpoint-{n}" for n in (200, 400, 600)]
    fill = subprocess.run(
        [sys.executable, "-c", "import hf_variants; from transformers import pipeline; "
         "fill = pipeline('fill-mask', model='runs/my-encoder'); "
         "print(' '.join(a['token_str'] for a in fill('the film was superb and the music felt [MASK]', top_k=3)))"],
        cwd=tmp_path, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert set(fill.stdout.split()) <= {"great", "moving", "lovely", "superb", "charming", "brilliant"}
    lines = printed[-1][0].strip().splitlines()
    assert [line.split(":")[0] for line in lines] == ["pretrained-classifier", "scratch-classifier"]
    scratch = json.loads((tmp_path / "runs" / "scratch-classifier" / "results.json").read_text())
    assert scratch["arguments"]["model"]["random_init"] is True
    dev = {name: json.loads((tmp_path / "runs" / name / "results.json").read_text())["eval"]["validation"]
           for name in ("pretrained-classifier", "scratch-classifier")}  # fmt: skip
    assert dev["pretrained-classifier"]["accuracy"] >= 0.9
    assert dev["pretrained-classifier"]["accuracy"] - dev["scratch-classifier"]["accuracy"] >= 0.2
