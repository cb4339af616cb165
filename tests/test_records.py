"""The lab's one resume record (:mod:`hf_variants.lab.records`): written whole or not at all, taken back only for
the settings it was made with, the differences named."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hf_variants.lab.records import OtherSettings, differing_fields, read_record, record_for, write_record
from hf_variants.storage.files import FAILPOINT_ENV, CheckpointError


def test_a_record_killed_while_written_is_absent_and_the_rerun_writes_it(tmp_path: Path) -> None:
    record = tmp_path / "study" / "run.json"
    code = (f"from pathlib import Path; from hf_variants.lab.records import write_record; "
            f"write_record(Path({str(record)!r}), {{'accuracy': 0.5}}, within=Path({str(tmp_path)!r}))")  # fmt: skip
    killed = subprocess.run([sys.executable, "-c", code], env={**os.environ, FAILPOINT_ENV: "atomic_write@run.json"},
                            timeout=120)  # fmt: skip
    assert killed.returncode == -signal.SIGKILL
    assert read_record(record) is None  # a re-run finds no record: the run is done again, not half-trusted
    write_record(record, {"accuracy": 0.5, "loss": math.nan}, within=tmp_path)
    assert read_record(record)["accuracy"] == 0.5 and math.isnan(read_record(record)["loss"])
    assert [path.name for path in record.parent.iterdir()] == ["run.json"]


def test_differences_are_named_field_by_field_both_ways() -> None:
    recorded = {"data": {"task": "sst2", "max_length": 64}, "seed": 1, "old_field": True}
    asked = {"data": {"task": "sst2", "max_length": 128}, "seed": 1, "new_field": 3}
    assert sorted(differing_fields(recorded, asked)) == [
        "data.max_length: recorded 64, asked 128",
        "new_field: not recorded, asked 3",
        "old_field: recorded True, not asked",
    ]
    assert differing_fields(recorded, asked, compare_missing=False) == ["data.max_length: recorded 64, asked 128"]
    assert differing_fields(asked, asked) == []


def test_a_record_is_taken_only_for_its_own_settings(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    settings = {"training": {"learning_rate": 1e-3, "seed": 1}}

    def settings_of(record: dict) -> dict:
        return record["arguments"]

    assert record_for(path, settings, settings_of) is None
    write_record(path, {"arguments": settings, "accuracy": 0.75}, within=tmp_path)
    assert record_for(path, settings, settings_of)["accuracy"] == 0.75
    other = {"training": {"learning_rate": 3e-4, "seed": 1}}
    with pytest.raises(OtherSettings, match=r"run\.json holds a run made with other settings:\n  "
                       r"training\.learning_rate: recorded 0\.001, asked 0\.0003\n") as raised:  # fmt: skip
        record_for(path, other, settings_of)
    assert raised.value.differences == ["training.learning_rate: recorded 0.001, asked 0.0003"]
    path.write_text(json.dumps({"arguments": {"training": {"learning_rate": 1e-3}}, "accuracy": 0.5}))
    assert record_for(path, settings, settings_of, compare_missing=False)["accuracy"] == 0.5  # an older version's
    with pytest.raises(OtherSettings, match=r"training\.seed: not recorded, asked 1"):
        record_for(path, settings, settings_of)
    path.write_text('{"arguments": ')  # damaged by hand: named, never taken for a finished run
    with pytest.raises(CheckpointError, match=r"run\.json is not valid JSON"):
        record_for(path, settings, settings_of)
