"""docs/tutorial.md runs as written: every block of the page, in order, in an empty folder, with the installed
``hf-variants`` command — the corpus pretrained on, the CSV fine-tuned on (classification and regression), the
export pushed to a local Hub folder and loaded back by transformers alone."""

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

PAGE = REPO_ROOT / "docs" / "tutorial.md"
BLOCK = re.compile(r"```(python|bash)\n(.*?)```", re.DOTALL)


def page_blocks() -> list[tuple[str, str]]:
    return BLOCK.findall(PAGE.read_text(encoding="utf-8"))


def test_the_tutorial_is_python_and_commands_in_order() -> None:
    kinds = [kind for kind, _ in page_blocks()]
    assert kinds == ["python", "bash", "bash", "bash", "bash", "python"]


@pytest.mark.full  # about two minutes: every command of the page, as a user runs them
def test_the_tutorial_runs_as_written_and_the_models_learn(tmp_path: Path) -> None:
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
                   "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}  # fmt: skip
    printed = []
    for number, (kind, code) in enumerate(page_blocks()):
        command = [sys.executable, "-c", code] if kind == "python" else ["bash", "-e", "-c", code]
        result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, env=environment,
                                stdin=subprocess.DEVNULL, timeout=600)  # fmt: skip
        assert result.returncode == 0, f"block {number} ({kind}):\n{result.stderr[-3000:]}"
        printed.append(result.stdout)
    pretrained = json.loads((tmp_path / "runs" / "my-encoder" / "results.json").read_text())
    assert pretrained["perplexity"] < 200  # well below guessing among the 200-token vocabulary
    classifier = json.loads((tmp_path / "runs" / "my-classifier" / "results.json").read_text())
    dev = classifier["eval"]["validation"]
    assert dev["accuracy"] >= 0.9 and dev["largest_class_share"] < 0.8 and dev["samples"] == 100
    predictions = (tmp_path / "runs" / "my-classifier" / "predict_results_custom.txt").read_text().splitlines()
    assert predictions[0] == "index\tprediction" and {line.split("\t")[1] for line in predictions[1:]} == {
        "positive", "negative"}
    scorer = json.loads((tmp_path / "runs" / "my-scorer" / "results.json").read_text())["eval"]["validation"]
    assert scorer["mse"] < 1.0 and scorer["prediction_std"] > 0.5  # the scores vary from about 1 to 5: it learned
    assert (tmp_path / "hub" / "you" / "my-review-classifier" / "model.safetensors").is_file()
    assert not any("Do you wish to run the custom code" in text for text in printed)  # no prompt on the way
    answers = ast.literal_eval(printed[-1].strip().splitlines()[-1])
    assert [answer["label"] for answer in answers] == ["positive", "negative"]
