"""GLUE loading (original TSV layouts, real files when present) and offline metrics."""

from __future__ import annotations

import math
from pathlib import Path

import evaluate
import pytest

from hf_variants.glue import EVALUATE_MODULE, TASK_TO_KEYS, compute_glue_metrics, load_glue_local

from .helpers import SHARED_DATA

BOM = "\ufeff"

#: Tiny files in each task's real layout: {folder: {file: text}}.
LAYOUTS = {
    "CoLA": {
        "train.tsv": "gj04\t1\t\tOur friends won't buy this analysis.\ngj04\t0\t*\tThey drank the pub.\n",
        "dev.tsv": "gj04\t1\t\tThe sailors rode the breeze.",  # no final newline, as released
        "test.tsv": "index\tsentence\n0\tBill whistled past the house.\n",
    },
    "SST-2": {
        "train.tsv": "sentence\tlabel\nhide new secretions \t0\nlovely film \t1\n",
        "dev.tsv": "sentence\tlabel\nit 's charming . \t1\n",
        "test.tsv": "index\tsentence\n0\tuneasy mishmash .\n",
    },
    "MRPC": {
        "train.tsv": f"{BOM}Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
        '1\t7\t8\tA " quoted " one .\tAnother .\n0\t1\t2\tX .\tY .\n',
        "dev.tsv": f"{BOM}Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t3\t4\tP .\tQ .\n",
        "test.tsv": "index\t#1 ID\t#2 ID\t#1 String\t#2 String\n0\t5\t6\tR .\tS .\n",
    },
    "RTE": {
        "train.tsv": "index\tsentence1\tsentence2\tlabel\n0\tA.\tB.\tnot_entailment\n1\tC.\tD.\tentailment\n",
        "dev.tsv": "index\tsentence1\tsentence2\tlabel\n0\tE.\tF.\tentailment\n",
        "test.tsv": "index\tsentence1\tsentence2\n0\tG.\tH.\n",
    },
    "STS-B": {
        "train.tsv": "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
        "0\tmain-captions\tMSRvid\t2012test\t0001\tnone\tnone\tA plane is taking off.\tA plane takes off.\t5.000\n",
        "dev.tsv": "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
        "0\tmain-captions\tMSRvid\t2012test\t0000\tnone\tnone\tA man.\tA woman.\t1.250\n",
        "test.tsv": "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\n"
        "0\tmain-captions\tMSRvid\t2012test\t0024\tnone\tnone\tA girl.\tA boy.\n",
    },
    "QNLI": {
        "dev.tsv": "index\tquestion\tsentence\tlabel\n0\tWhat?\tThat.\tentailment\n1\tWho?\tNo one.\tnot_entailment\n",
        "test.tsv": "index\tquestion\tsentence\n0\tWhen?\tNow.\n",
    },
    "MNLI": {
        "train.tsv": "index\tpromptID\tpairID\tgenre\tsentence1\tsentence2\tlabel1\tgold_label\n"
        "0\t1\t1e\tgov\tP.\tH.\tneutral\tneutral\n",
        "dev_matched.tsv": "index\tpromptID\tpairID\tgenre\tsentence1\tsentence2\tlabel1\tgold_label\n"
        "0\t2\t2e\tgov\tP2.\tH2.\tcontradiction\tcontradiction\n",
        "dev_mismatched.tsv": "index\tpromptID\tpairID\tgenre\tsentence1\tsentence2\tlabel1\tgold_label\n"
        "0\t3\t3e\tfiction\tP3.\tH3.\tentailment\tentailment\n",
    },
    "QQP": {
        "train.tsv": "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n0\t1\t2\tHow?\tHow so?\t1\n",
        "dev.tsv": "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n1\t3\t4\tWhy?\tWhen?\t0\n",
    },
    "WNLI": {
        "train.tsv": "index\tsentence1\tsentence2\tlabel\n0\tIt fell.\tThe cup fell.\t1\n",
        "dev.tsv": "index\tsentence1\tsentence2\tlabel\n0\tIt broke.\tThe box broke.\t0\n",
    },
    "diagnostic": {"diagnostic.tsv": "index\tsentence1\tsentence2\n0\tThe cat sat.\tThe cat did not sit.\n"},
}


@pytest.fixture()
def glue_dir(tmp_path: Path) -> Path:
    for folder, files in LAYOUTS.items():
        (tmp_path / folder).mkdir()
        for name, text in files.items():
            (tmp_path / folder / name).write_text(text, encoding="utf-8")
    return tmp_path


def test_every_task_loads_from_the_original_layout(glue_dir: Path) -> None:
    cola = load_glue_local("cola", glue_dir)
    assert cola["train"]["sentence"] == ["Our friends won't buy this analysis.", "They drank the pub."]
    assert cola["train"]["label"] == [1, 0] and cola["validation"].num_rows == 1
    assert cola["test"]["label"] == [-1]
    mrpc = load_glue_local("mrpc", glue_dir)
    assert mrpc["train"]["sentence1"][0] == 'A " quoted " one .' and mrpc["train"]["label"] == [1, 0]
    assert load_glue_local("rte", glue_dir)["train"]["label"] == [1, 0]  # not_entailment = 1, as on the Hub
    assert load_glue_local("qnli", glue_dir)["validation"]["label"] == [0, 1]
    stsb = load_glue_local("stsb", glue_dir)
    assert stsb["train"]["label"] == [5.0] and stsb["validation"]["label"] == [1.25]
    assert stsb["test"]["label"] == [-1]
    mnli = load_glue_local("mnli", glue_dir)
    assert set(mnli) == {"train", "validation_matched", "validation_mismatched"}
    assert mnli["validation_matched"]["label"] == [2] and mnli["validation_mismatched"]["premise"] == ["P3."]
    assert load_glue_local("qqp", glue_dir)["train"]["question2"] == ["How so?"]
    assert load_glue_local("sst2", glue_dir)["train"]["label"] == [0, 1]
    assert load_glue_local("wnli", glue_dir)["validation"]["label"] == [0]
    assert load_glue_local("ax", glue_dir)["test"]["hypothesis"] == ["The cat did not sit."]
    for task, (first, second) in TASK_TO_KEYS.items():
        columns = load_glue_local(task, glue_dir)
        split = next(iter(columns.values()))
        assert first in split.column_names and (second is None or second in split.column_names)


def test_missing_column_is_a_clear_error(glue_dir: Path) -> None:
    (glue_dir / "RTE" / "dev.tsv").write_text("index\tsentence1\tlabel\n0\tA.\tentailment\n")
    with pytest.raises(ValueError, match=r"missing column\(s\) \['sentence2'\]"):
        load_glue_local("rte", glue_dir)


def test_label_outside_the_label_set_is_a_clear_error(glue_dir: Path) -> None:
    (glue_dir / "RTE" / "dev.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\tA.\tB.\tmaybe\n")
    with pytest.raises(ValueError, match=r"dev.tsv:2: label 'maybe' is not in the rte label set"):
        load_glue_local("rte", glue_dir)
    (glue_dir / "SST-2" / "train.tsv").write_text("sentence\tlabel\nfine \t7\n")
    with pytest.raises(ValueError, match="label '7' is not in the sst2 label set"):
        load_glue_local("sst2", glue_dir)


def test_malformed_row_and_missing_folder_are_clear_errors(glue_dir: Path, tmp_path: Path) -> None:
    (glue_dir / "WNLI" / "train.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\tonly one field\n")
    with pytest.raises(ValueError, match=r"train\.tsv:2: 2 tab-separated fields, expected 4"):
        load_glue_local("wnli", glue_dir)
    with pytest.raises(FileNotFoundError, match="must hold the GLUE folders"):
        load_glue_local("cola", tmp_path / "nowhere")
    with pytest.raises(ValueError, match="Unknown GLUE task"):
        load_glue_local("squad", glue_dir)


@pytest.mark.parametrize("score", ["nan", "inf", "-inf", "5.5", "-0.1"])
def test_non_finite_or_out_of_range_stsb_scores_name_the_line(glue_dir: Path, score: str) -> None:
    """One nan score used to turn every weight into NaN while training ended with exit code 0."""
    header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
    row = "{i}\tmain\tx\t2012\t{i}\tn\tn\tA man runs.\tA man walks.\t{score}\n"
    (glue_dir / "STS-B" / "train.tsv").write_text(header + row.format(i=0, score="3.2") + row.format(i=1, score=score))
    expected = rf"train\.tsv:3: score '{score}' is (not a finite number|outside STS-B's range 0–5)"
    with pytest.raises(ValueError, match=expected):
        load_glue_local("stsb", glue_dir)


def test_extra_fields_and_bad_bytes_name_the_file_and_line(glue_dir: Path) -> None:
    sst2 = glue_dir / "SST-2" / "train.tsv"
    sst2.write_text("sentence\tlabel\nfine .\t1\nan extra field\t0\tsurprise\n")
    with pytest.raises(ValueError, match=r"train\.tsv:3: 3 tab-separated fields, expected 2"):
        load_glue_local("sst2", glue_dir)
    sst2.write_bytes(b"sentence\tlabel\nfine .\t1\ncaf\xe9 .\t0\n")  # Latin-1, not UTF-8
    with pytest.raises(ValueError, match=r"train\.tsv:3: byte 0xe9 is not UTF-8"):
        load_glue_local("sst2", glue_dir)
    sst2.write_bytes(b"sentence\tlabel\n\x00\x01\x02")
    with pytest.raises(ValueError, match=r"train\.tsv:2: NUL byte; this is not a text file"):
        load_glue_local("sst2", glue_dir)


REAL_COUNTS = {
    "cola": {"train": 8551, "validation": 1043, "test": 1063},
    "sst2": {"train": 67349, "validation": 872, "test": 1821},
    "mrpc": {"train": 3668, "validation": 408, "test": 1725},
    "rte": {"train": 2490, "validation": 277, "test": 3000},
    "stsb": {"train": 5749, "validation": 1500, "test": 1379},
    "qnli": {"validation": 5463, "test": 5463},
    "wnli": {"train": 635, "validation": 71, "test": 146},
    "ax": {"test": 1104},
}


@pytest.mark.skipif(not (SHARED_DATA / "glue").is_dir(), reason="../shared/data/glue is not present")
@pytest.mark.parametrize("task", sorted(REAL_COUNTS))
def test_real_glue_files_row_counts_and_labels(task: str) -> None:
    data = load_glue_local(task, SHARED_DATA / "glue")
    assert {split: data[split].num_rows for split in data} == REAL_COUNTS[task]
    for split in data:
        labels = set(data[split]["label"])
        if split.startswith("test"):
            assert labels == {-1}
        elif task == "stsb":
            assert min(labels) == 0.0 and max(labels) == 5.0 and len(labels) > 20
        else:
            assert labels == set(range(data[split].features["label"].num_classes))


def test_metrics_on_hand_computed_cases() -> None:
    # CoLA: tp=2, tn=1, fp=1, fn=0 → (2·1 − 1·0) / √(3·2·2·1) = 0.57735
    assert compute_glue_metrics("cola", [1, 1, 1, 0], [1, 1, 0, 0])["matthews_correlation"] == pytest.approx(
        2 / 12**0.5
    )
    assert compute_glue_metrics("cola", [1, 1, 0, 0], [1, 0, 1, 0])["matthews_correlation"] == 0.0
    # MRPC: 3 of 5 right; tp=2, 3 predicted and 3 actual positives → F1 = 4/6
    mrpc = compute_glue_metrics("mrpc", [1, 1, 0, 0, 1], [1, 0, 0, 1, 1])
    assert mrpc["accuracy"] == pytest.approx(0.6) and mrpc["f1"] == pytest.approx(2 / 3)
    assert mrpc["combined_score"] == pytest.approx((0.6 + 2 / 3) / 2)
    stsb = compute_glue_metrics("stsb", [1.0, 2.0, 3.0, 4.0], [3.0, 5.0, 7.0, 9.0])
    assert stsb["pearson"] == pytest.approx(1.0) and stsb["spearmanr"] == pytest.approx(1.0)
    assert compute_glue_metrics("stsb", [1.0, 2.0, 3.0], [3.0, 2.0, 1.0])["spearmanr"] == pytest.approx(-1.0)
    assert compute_glue_metrics("rte", [0, 1, 1], [0, 1, 0]) == {"accuracy": pytest.approx(2 / 3)}
    with pytest.raises(ValueError, match="2 predictions for 3 references"):
        compute_glue_metrics("sst2", [0, 1], [0, 1, 1])


def test_correlations_of_a_constant_predictor_are_undefined_and_said(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="hf_variants.glue.metrics"):
        stsb = compute_glue_metrics("stsb", [2.5, 2.5, 2.5], [1.0, 2.0, 4.5])
    assert math.isnan(stsb["pearson"]) and math.isnan(stsb["spearmanr"]) and math.isnan(stsb["combined_score"])
    assert "All 3 predictions are equal (2.5)" in caplog.text
    # a constant classifier has Matthews correlation 0 (scikit-learn's convention, which GLUE uses)
    assert compute_glue_metrics("cola", [1, 1, 1], [1, 0, 1])["matthews_correlation"] == 0.0
    with pytest.raises(ValueError, match="No examples to score for sst2"):
        compute_glue_metrics("sst2", [], [])


def test_evaluate_module_works_offline() -> None:
    metric = evaluate.load(EVALUATE_MODULE, "mrpc")
    result = metric.compute(predictions=[1, 1, 0, 0, 1], references=[1, 0, 0, 1, 1])
    assert result["f1"] == pytest.approx(2 / 3) and result["accuracy"] == pytest.approx(0.6)
    stsb = evaluate.load(EVALUATE_MODULE, "stsb").compute(predictions=[0.5, 1.5, 4.0], references=[1.0, 2.0, 4.5])
    assert stsb["pearson"] == pytest.approx(1.0, abs=1e-6)


def test_a_new_task_gets_its_metric_and_score_range_from_its_declaration(monkeypatch: pytest.MonkeyPatch,
                                                                          tmp_path: Path) -> None:  # fmt: skip
    """What a task declares decides, not its name: a new classification task that declares Matthews
    correlation is scored by it, and a new regression task's predictions are clipped to its own score range."""
    import dataclasses

    import numpy as np

    from hf_variants import tasks
    from hf_variants.training.run_glue import LabelSpace, write_predictions

    grammatical = dataclasses.replace(tasks.TASKS["sst2"], name="grammatical", metrics=("matthews_correlation",))
    rating = dataclasses.replace(tasks.TASKS["stsb"], name="rating", score_range=(1.0, 3.0))
    monkeypatch.setitem(tasks.TASKS, "grammatical", grammatical)
    monkeypatch.setitem(tasks.TASKS, "rating", rating)
    predictions, references = [1, 1, 0, 0, 1, 0], [1, 0, 0, 0, 1, 1]
    # MCC by hand: tp 2, tn 2, fp 1, fn 1 → (2·2 − 1·1) / √(3·3·3·3) = 1/3
    scores = compute_glue_metrics("grammatical", predictions, references)
    assert scores == {"matthews_correlation": pytest.approx(1 / 3)}
    write_predictions(tmp_path / "rating.tsv", "rating", LabelSpace(None), np.array([0.2, 2.5, 4.0]), False,
                      within=tmp_path)
    rows = (tmp_path / "rating.tsv").read_text().splitlines()
    assert rows == ["index\tprediction", "0\t1.000", "1\t2.500", "2\t3.000"]
