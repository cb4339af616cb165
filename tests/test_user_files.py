"""Users' own task files are read cell by cell: every bad cell is named with its file and line, and the
problem type never changes because of one cell."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from datasets import ClassLabel, Value

from hf_variants.glue.user_files import load_task_files
from hf_variants.tasks import get_glue_task


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def load(tmp_path: Path, train: str, dev: str | None = None, *, suffix: str = ".csv", task: str | None = None,
         label_type: str = "auto"):  # fmt: skip
    files = {"train": write(tmp_path / f"train{suffix}", train)}
    if dev is not None:
        files["validation"] = write(tmp_path / f"dev{suffix}", dev)
    glue_task = get_glue_task(task) if task is not None else None
    return load_task_files(files, glue_task, glue_task.keys if glue_task else None, label_type)


@pytest.mark.parametrize(
    ("train", "dev", "message"),
    [
        ("text,label\na,x\nb,y\nc,\nd,x\n", None, r"train\.csv:4: this train row has no label"),
        ("text,label\na,1\ntext,label\nb,0\n", None, r"train\.csv:3: this row repeats the header"),
        ("text,label\na,1\nb,0,extra\n", None, r"train\.csv:3: 3 fields, but the header has 2"),
        ("text,label\na,1\n,0\n", None, r"train\.csv:3: the 'text' cell is empty"),
        ("text,label\na,1\nb,-1\n", None, r"train\.csv:3: this train row has label -1 \(unlabeled\)"),
        ("text,label\na,pos\nb,neg\n", "text,label\nc,pos\nd,postive\n",
         r"dev\.csv:3: label 'postive' is not in the label set of the training file .*\['neg', 'pos'\]"),
        ("text,label\na,pos\nb,neg\n", "text\nc\n", r"dev\.csv: missing column\(s\) \['label'\]"),
        ('text,label\n"two\nlines",1\nb,0\nc,\n', None, r"train\.csv:5: this train row has no label"),
        ("sentence\tlabel\na\t1\n", None, r"train\.csv:1: the header is one field holding tabs .* tab-separated"),
    ],
)  # fmt: skip
def test_a_bad_csv_cell_is_named_with_its_line(tmp_path: Path, train: str, dev: str | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load(tmp_path, train, dev)


def test_json_lines_rows_are_checked_like_csv_rows(tmp_path: Path) -> None:
    rows = [{"text": "a", "label": "x"}, {"text": "b"}, {"text": "c", "label": "y"}]
    with pytest.raises(ValueError, match=r"train\.jsonl:2: this train row has no label"):
        load(tmp_path, "\n".join(json.dumps(row) for row in rows) + "\n", suffix=".jsonl")
    with pytest.raises(ValueError, match=r"train\.jsonl:2: not a JSON object"):
        load(tmp_path, '{"text": "a", "label": 1}\n{"text": "b", "label": 0\n', suffix=".jsonl")
    with pytest.raises(ValueError, match=r"train\.jsonl:1: the 'text' cell is empty"):
        load(tmp_path, '{"text": null, "label": 1}\n{"text": "b", "label": 0}\n', suffix=".jsonl")
    array = json.dumps([{"text": "a", "label": 1}, {"text": "b", "label": None}], indent=1)
    with pytest.raises(ValueError, match=r"train\.json:6: this train row has no label"):
        load(tmp_path, array, suffix=".json")


def test_the_problem_type_comes_from_every_label_never_from_one_cell(tmp_path: Path) -> None:
    classes = load(tmp_path, "text,label\na,1\nb,0\nc,2\n")["train"]
    assert classes.features["label"] == ClassLabel(names=["0", "1", "2"]) and classes["label"] == [1, 0, 2]
    scores = load(tmp_path, "text,label\na,0.5\nb,3\nc,4.25\n")["train"]
    assert scores.features["label"] == Value("float32") and scores["label"] == [0.5, 3.0, 4.25]
    asked = load(tmp_path, "text,label\na,1\nb,3\n", label_type="regression")["train"]
    assert asked.features["label"] == Value("float32") and asked["label"] == [1.0, 3.0]
    booleans = load(tmp_path, "text,label\na,True\nb,False\n")["train"]
    assert booleans.features["label"].names == ["False", "True"] and booleans["label"] == [1, 0]
    from_json = load(tmp_path, '{"text": "a", "label": true}\n{"text": "b", "label": false}\n', suffix=".jsonl")
    assert from_json["train"].features["label"].names == ["false", "true"]
    with pytest.raises(ValueError, match=r"train\.csv:3: label 'high' is not a finite number \(regression\)"):
        load(tmp_path, "text,label\na,0.5\nb,high\n", label_type="regression")


def test_na_null_and_none_are_text_in_a_csv(tmp_path: Path) -> None:
    data = load(tmp_path, "text,label\nNA,x\nnull,y\nNone,x\n")["train"]
    assert data["text"] == ["NA", "null", "None"]


def test_with_a_task_the_task_label_set_is_checked_at_the_right_line(tmp_path: Path) -> None:
    rows = "\n".join(f"sentence {i},{i % 2}" for i in range(6))
    with pytest.raises(ValueError, match=r"train\.csv:9: label '' is not in the sst2 label set"):
        load(tmp_path, f"sentence,label\n{rows}\nlast but one,1\nlast,\n", task="sst2")
    data = load(tmp_path, f"sentence,label\n{rows}\n", "sentence,label\ngood,1\n", task="sst2")
    assert data["validation"]["label"] == [1] and data["train"].features["label"].names == ["negative", "positive"]


def test_multi_label_rows_are_label_sets_read_from_either_format(tmp_path: Path) -> None:
    train, dev = 'text,label\na,"drama,comedy"\nb,comedy\n', "text,label\nc,drama\n"
    csv_data = load(tmp_path, train, dev, label_type="multi_label")
    assert csv_data["train"].features["label"].feature.names == ["comedy", "drama"]
    assert csv_data["train"]["label"] == [[1, 0], [0]] and csv_data["validation"]["label"] == [[1]]
    rows = [{"text": "a", "label": ["drama", "comedy"]}, {"text": "b", "label": ["comedy"]}]
    json_data = load(tmp_path, "\n".join(json.dumps(row) for row in rows) + "\n", suffix=".jsonl")  # auto: lists
    assert json_data["train"]["label"] == csv_data["train"]["label"]


@pytest.mark.parametrize(
    ("train", "dev", "message"),
    [
        ('text,label\na,"drama,,comedy"\n', None, r"train\.csv:2: label 'drama,,comedy' holds an empty label"),
        ('text,label\na,"drama,drama"\n', None, r"train\.csv:2: label 'drama,drama' holds a label twice"),
        ("text,label\na,drama\nb,\n", None, r"train\.csv:3: this train row has no label"),
        ("text,label\na,drama\n", 'text,label\nb,"drama,horror"\n',
         r"dev\.csv:2: label\(s\) \['horror'\] not in the label set of the training file .*\['drama'\]"),
        ('text,label\na,"[1, {}]"\n', None, r"train\.csv:2: label '\[1, \{\}\]' is not a list of labels"),
    ],
)  # fmt: skip
def test_a_bad_label_set_is_named_with_its_line(tmp_path: Path, train: str, dev: str | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load(tmp_path, train, dev, label_type="multi_label")


def test_multi_label_is_refused_for_a_glue_task(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"--label_type multi_label is for files without --task_name; sst2"):
        load(tmp_path, "sentence,label\na,1\n", task="sst2", label_type="multi_label")
