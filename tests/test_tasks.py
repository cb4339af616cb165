"""The one task table: every family's tasks in it under distinct names, each read by its declaration (metric,
labels, guessing level), so that a new task reaches the engines, the main job and the grid by being declared."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from pathlib import Path

import pytest

from hf_variants import tasks
from hf_variants.lab import text_classification
from hf_variants.lab.measurement import headline_metric
from hf_variants.tasks import EMBEDDED_TASKS, FILE_TASKS, GLUE_TASKS, TASKS, EmbeddedLevels, get_glue_task, get_task

from .test_experiments import learnable_ag_news


def test_one_table_holds_every_family_under_distinct_names() -> None:
    families = [GLUE_TASKS, FILE_TASKS, EMBEDDED_TASKS]
    assert sum(len(family) for family in families) == len(TASKS)  # no name of one family hides another's
    assert all(TASKS[name] is task for family in families for name, task in family.items())
    assert get_task("SST-2") is GLUE_TASKS["sst2"] and get_task("listops") is FILE_TASKS["listops"]


def test_a_family_lookup_names_that_familys_tasks_only() -> None:
    with pytest.raises(ValueError, match=r"Unknown GLUE task 'imdb'; choose from cola, sst2") as refused:
        get_glue_task("imdb")
    assert "imdb" not in str(refused.value).split("choose from")[1]
    with pytest.raises(ValueError, match=r"Unknown task 'sst5'"):
        get_task("sst5")


@pytest.mark.parametrize("name", sorted(EMBEDDED_TASKS))
def test_embedded_rows_lie_in_their_declared_labels(name: str) -> None:
    task = EMBEDDED_TASKS[name]
    rows = task.generate(400, 1, EmbeddedLevels(attractors=2, recall_pairs=3))
    counts = Counter(label for _, label in rows)
    assert set(counts) <= set(range(task.num_labels)) and len(counts) >= 2
    assert task.metrics == ("accuracy",) and task.describe(EmbeddedLevels())


def test_guessing_levels_and_headlines_come_from_the_declaration(monkeypatch: pytest.MonkeyPatch) -> None:
    assert [name for name, task in TASKS.items() if task.guessing_level() is not None] == ["recall"]
    assert headline_metric("recall") == "accuracy" and headline_metric("mrpc") == "f1"
    assert headline_metric("cola") == "matthews_correlation" and headline_metric("stsb") == "pearson"
    quiz = dataclasses.replace(EMBEDDED_TASKS["subject_number"], name="quiz", guessing=lambda levels: 0.25)
    monkeypatch.setitem(tasks.TASKS, "quiz", quiz)
    assert headline_metric("quiz") == "accuracy" and get_task("quiz").guessing_level() == 0.25


def test_the_grid_reads_the_classification_tasks_it_can_score() -> None:
    assert set(text_classification.GRID_TASKS) == {"imdb", "ag_news", "listops", "sst2"}
    assert text_classification.readable(dataclasses.replace(GLUE_TASKS["cola"], metrics=("accuracy",)))
    for refused in ("cola", "mrpc", "stsb", "recall"):  # scored by MCC, a pair, a regression, no files
        assert not text_classification.readable(TASKS[refused])
        with pytest.raises(ValueError, match=rf"Unknown task '{refused}'; choose one of"):
            text_classification.load_task(refused, Path("unused"))


def test_a_file_tasks_declared_labels_match_its_files(tmp_path: Path) -> None:
    learnable_ag_news(tmp_path, rows=100)
    data = text_classification.load_task("ag_news", tmp_path)
    assert data.num_labels == FILE_TASKS["ag_news"].num_labels == 4
    assert set(data.train_labels + data.test_labels) == set(range(4))


def test_sst2_from_scratch_reads_the_glue_files(tmp_path: Path) -> None:
    folder = tmp_path / "glue" / "SST-2"
    folder.mkdir(parents=True)
    rows = [f"{'good' if index % 2 else 'bad'} film {index}\t{index % 2}" for index in range(10)]
    (folder / "train.tsv").write_text("sentence\tlabel\n" + "\n".join(rows) + "\n", encoding="utf-8")
    (folder / "dev.tsv").write_text("sentence\tlabel\n" + "\n".join(rows[:4]) + "\n", encoding="utf-8")
    data = text_classification.load_task("sst2", tmp_path, max_train=6)
    shuffled = [row.split("\t")[0] for row in rows]
    random.Random(0).shuffle(shuffled)  # the split seed, on the file's order
    assert data.train_texts == shuffled[:6] and data.test_texts == [row.split("\t")[0] for row in rows[:4]]
    assert dict(zip(data.train_texts, data.train_labels, strict=True)) == {
        text: int(text.startswith("good")) for text in data.train_texts}
    assert "glue/SST-2/train.tsv (10, shuffled with seed 0)" in data.split
