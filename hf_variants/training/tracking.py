"""Experiment tracking through accelerate's trackers, plus a local CSV file as one more tracker.

``--report_to`` takes accelerate's tracker names (``tensorboard``, ``wandb``, ``mlflow``, ``trackio``,
…, ``all``) and ``csv``; :class:`CSVTracker` is an ``accelerate.tracking.GeneralTracker``, so every
tracker is driven the same way (``accelerator.init_trackers`` / ``accelerator.log``) and only the
main process writes.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from accelerate.tracking import GeneralTracker, get_available_trackers
from accelerate.utils import LoggerType

from ..storage.files import open_for_append, write_text_atomic


class CSVTracker(GeneralTracker):
    """``metrics.csv`` in the run's folder: one row per logged step, one column per scalar. ``rows`` are the rows
    logged before a resume (a checkpoint's), so the file keeps the whole run's history.

    Each log appends its row (constant cost, however long the run); the file is written whole only when it must
    be: at the first log of a run or a resume (the file then holds exactly ``rows`` and the new one, so rows logged
    after the checkpoint a run resumed from are dropped, as the run logs them again), and when a row brings a
    column the header lacks."""

    name = "csv"
    requires_logging_directory = False
    main_process_only = True

    def __init__(self, directory: Path, rows: Sequence[dict[str, Any]] = ()) -> None:
        super().__init__()
        self.directory = Path(directory)
        self.path = self.directory / "metrics.csv"
        self.rows: list[dict[str, Any]] = list(rows)
        self.header: list[str] | None = None  # the file's columns once written; None: write it whole next

    @property
    def tracker(self) -> list[dict[str, Any]]:
        return self.rows

    def store_init_configuration(self, values: dict) -> None:  # the run's settings are in run_fingerprint.json
        pass

    def log(self, values: dict, step: int | None = None, **kwargs: Any) -> None:
        row = {"step": step, **values}
        self.rows.append(row)
        if self.header is not None and set(row) <= set(self.header):
            with open_for_append(self.path, within=self.directory) as handle:
                csv.DictWriter(handle, fieldnames=self.header, lineterminator="\n").writerow(row)
            return
        self.header = ["step", *sorted({key for logged in self.rows for key in logged} - {"step"})]
        table = io.StringIO(newline="")
        writer = csv.DictWriter(table, fieldnames=self.header, lineterminator="\n")
        writer.writeheader()
        writer.writerows(self.rows)
        write_text_atomic(self.path, table.getvalue(), within=self.directory)


def trackers(report_to: Sequence[str], directory: Path, rows: Sequence[dict[str, Any]] = ()) -> list:
    """The ``log_with`` list of ``Accelerator`` for ``--report_to``: a :class:`CSVTracker` for ``csv``,
    accelerate's names for the rest; an accelerate tracker that is not installed is an error naming it."""
    chosen: list = []
    available = {str(LoggerType(tracker).value) for tracker in get_available_trackers()}
    for name in report_to:
        if name == "none":
            continue
        if name == "csv":
            chosen.append(CSVTracker(directory, rows))
        elif name == "all":
            chosen.extend(sorted(available - {str(item) for item in chosen}))
        elif name not in {item.value for item in LoggerType}:
            raise ValueError(f"--report_to: {name!r} is not a tracker of accelerate ({', '.join(LoggerType.list())}).")
        elif name not in available:
            raise ImportError(f"--report_to {name}: the {name} package is not installed (pip install {name}).")
        else:
            chosen.append(name)
    return list(dict.fromkeys(chosen))


def csv_rows(accelerator: Any) -> list[dict[str, Any]]:
    """The rows the CSV tracker holds (saved in checkpoints, so a resumed run keeps its history)."""
    tracker = next((t for t in accelerator.trackers if isinstance(t, CSVTracker)), None)
    return list(tracker.rows) if tracker is not None else []
