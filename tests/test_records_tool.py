"""A study's committed records (``tools/records.py``): an output folder packed into one JSON-lines file per top-level
folder and unpacked back to the same records; every line read back is checked, and no path leads out of the folder
or through a link."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import REPO_ROOT, committed_records, load_script

records = load_script("tools/records")


def study_output(folder: Path) -> dict[str, dict]:
    """A small study output as the grid writes it: per-condition cells, a top-level file, a non-finite loss."""
    files = {
        "scratch/ag_news/run_fingerprint.json": {"task": "ag_news", "seeds": [1, 2]},
        "scratch/ag_news/mgk_bert/control/seed1.json": {"status": "finished", "accuracy": 0.5, "loss": 1.25},
        "self_pretrained/ag_news/mgk_bert/variant/seed1.json": {"status": "diverged", "loss": float("nan")},
        "mlm_curve.json": {"command": "python tools/mlm_curve.py", "points": [[0, 9.1], [10, 6.2]]},
    }
    for name, record in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(json.dumps(record, indent=1) + "\n")
    (folder / "study.toml").write_text("pairs = ['mgk_bert']\n")  # not a record: not packed
    return files


def same(first: dict, second: dict) -> bool:
    return json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)  # NaN equal to NaN here


def test_an_output_folder_packs_into_one_file_per_condition_and_unpacks_to_the_same_records(tmp_path: Path) -> None:
    files = study_output(tmp_path / "out")
    written = records.pack(tmp_path / "out", tmp_path / "study")
    assert sorted(path.name for path in written) == ["_top.jsonl", "scratch.jsonl", "self_pretrained.jsonl"]
    assert len((tmp_path / "study" / "records" / "scratch.jsonl").read_text().splitlines()) == 2
    back = records.unpack(tmp_path / "study", tmp_path / "back")
    assert sorted(p.relative_to(back).as_posix() for p in back.rglob("*.json")) == sorted(files)
    for name, record in files.items():
        assert same(json.loads((back / name).read_text()), record), name
    assert math.isnan(json.loads((back / "self_pretrained/ag_news/mgk_bert/variant/seed1.json").read_text())["loss"])


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", r"line 2: not JSON"),
        ('{"path": "a.json"}', r"line 2: expected an object with exactly 'path' and 'record'"),
        ('{"path": "../outside.json", "record": {}}',
         r"line 2: 'path' must be a relative path .* got '../outside.json'"),
        ('{"path": "/etc/x.json", "record": {}}', r"line 2: 'path' must be a relative path"),
        ('{"path": "notes.txt", "record": {}}', r"line 2: 'path' must be a relative path to a \.json file"),
        ('{"path": 3, "record": {}}', r"line 2: 'path' must be a relative path"),
        ('{"path": "a.json", "record": [1]}', r"line 2: 'record' must be a JSON object"),
        ('{"path": "scratch/ag_news/run_fingerprint.json", "record": {}}', r"is there twice"),
    ],
)
def test_an_altered_line_is_named_with_its_file_and_line_and_nothing_escapes(tmp_path: Path, line: str,
                                                                              message: str) -> None:  # fmt: skip
    study = tmp_path / "study" / "records"
    study.mkdir(parents=True)
    first = json.dumps({"path": "scratch/ag_news/run_fingerprint.json", "record": {"task": "ag_news"}})
    (study / "scratch.jsonl").write_text(f"{first}\n{line}\n")
    with pytest.raises(records.RecordsError, match=message):
        records.unpack(tmp_path / "study", tmp_path / "back" / "inner")
    assert not (tmp_path / "back" / "outside.json").exists()


def test_a_link_is_never_written_through_nor_packed(tmp_path: Path) -> None:
    study_output(tmp_path / "out")
    records.pack(tmp_path / "out", tmp_path / "study")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    back = tmp_path / "back"
    (back / "scratch").mkdir(parents=True)
    (back / "scratch" / "ag_news").symlink_to(elsewhere, target_is_directory=True)  # a planted link on the way
    with pytest.raises(records.RecordsError, match="a link on the way"):
        records.unpack(tmp_path / "study", back)
    assert list(elsewhere.iterdir()) == []
    (tmp_path / "out" / "linked.json").symlink_to(tmp_path / "out" / "mlm_curve.json")
    with pytest.raises(records.RecordsError, match="a link in a study's output"):
        records.pack(tmp_path / "out", tmp_path / "study2")
    (tmp_path / "study3" / "records").mkdir(parents=True)
    (tmp_path / "study3" / "records" / "_top.jsonl").symlink_to(elsewhere / "target.jsonl")
    (tmp_path / "out" / "linked.json").unlink()
    with pytest.raises(records.RecordsError, match="refusing to write through it"):
        records.pack(tmp_path / "out", tmp_path / "study3")
    assert not (elsewhere / "target.jsonl").exists()


def test_the_command_line_reports_a_bad_record_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "study" / "records").mkdir(parents=True)
    (tmp_path / "study" / "records" / "x.jsonl").write_text('{"path": "../x.json", "record": {}}\n')
    result = subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "records.py"), "unpack", str(tmp_path / "study"),
                             str(tmp_path / "back")], capture_output=True, text=True)  # fmt: skip
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith("records.py unpack: error: ") and "x.jsonl, line 1" in result.stderr


def test_a_committed_study_is_read_from_its_unpacked_records() -> None:
    """The committed from-scratch grid, unpacked, is a grid folder the lab reads as it wrote it: every cell's seeds
    and its one sweep's choice (the rule it was run under) are there."""
    from hf_variants.lab.grid import load_grid

    grid = load_grid(committed_records("classification") / "ag_news")
    assert len(grid["cells"]) == 5  # the five pairs of the study
    for roles in grid["cells"].values():
        for cell in roles.values():
            assert sorted(cell["seeds"]) == [1, 2, 3] and len(cell["sweeps"]) == 1
            assert set(cell["chosen"].values()) <= set(next(iter(cell["sweeps"].values())))
