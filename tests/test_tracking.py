"""The CSV tracker (:class:`hf_variants.training.tracking.CSVTracker`) appends a row per log instead of rewriting the
whole file each time, and still holds exactly the run's history: after a new column, and after a resume from a
checkpoint's rows."""

from __future__ import annotations

import csv
from pathlib import Path

from hf_variants.training import tracking


def read(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(path.read_text().splitlines()))


def as_text(rows: list[dict]) -> list[dict[str, str]]:
    """``rows`` as a CSV reader gives them back (every column, an empty cell where a row has none)."""
    columns = {key for row in rows for key in row}
    return [{key: "" if row.get(key) is None else str(row[key]) for key in columns} for row in rows]


def test_a_log_appends_and_the_file_is_rewritten_only_for_a_new_column(tmp_path: Path, monkeypatch) -> None:
    rewrites = []
    monkeypatch.setattr(tracking, "write_text_atomic", lambda path, text, *, within: (
        rewrites.append(path), path.write_text(text)))  # fmt: skip
    tracker = tracking.CSVTracker(tmp_path)
    logged = []
    for step in range(1, 201):
        values = {"loss": 1 / step, "learning_rate": 1e-3} | ({"eval_loss": 2 / step} if step % 50 == 0 else {})
        tracker.log(values, step=step)
        logged.append({"step": step, **values})
    assert len(rewrites) == 2  # the first log, and the first row with eval_loss (step 50): 198 appends
    assert read(tmp_path / "metrics.csv") == as_text(logged)


def test_a_resumed_run_keeps_the_checkpoints_rows_and_drops_the_rest(tmp_path: Path) -> None:
    """A run killed at step 60 that resumes from its checkpoint of step 30 logs steps 31… again: the file holds each
    step once, as an uninterrupted run's would."""
    first = tracking.CSVTracker(tmp_path)
    for step in range(1, 61):
        first.log({"loss": float(step)}, step=step)
    checkpoint_rows = first.rows[:30]
    resumed = tracking.CSVTracker(tmp_path, checkpoint_rows)
    for step in range(31, 41):
        resumed.log({"loss": float(step)}, step=step)
    rows = read(tmp_path / "metrics.csv")
    assert [row["step"] for row in rows] == [str(step) for step in range(1, 41)]
