"""The comparison grid: statistics against hand-computed references, data splits and data errors, the
held-out learning-rate choice, resuming, and the tables rendered from result files."""

from __future__ import annotations

import csv
import json
import math
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import torch

from hf_variants.lab.grid import Grid, GridSettings, SelfPretraining, held_out_run, load_grid
from hf_variants.lab.grid_evidence import calibration_checks, grid_comparisons
from hf_variants.lab.spec import ModelSpec, calibration_pairs, spec_folder
from hf_variants.lab.statistics import mean_interval, paired_difference, predicts_one_class
from hf_variants.lab.tables import comparison_table, rate_text, summarize_role
from hf_variants.lab.text_classification import load_task
from hf_variants.lab.verdicts import HeldOutRun, stayed_on_plateau
from hf_variants.storage.files import CheckpointError

from .helpers import load_script, middle_parameter, poison_gradient

#: The repository's renderers of the studies' tables (tools/, outside the package).
_never_from_scratch, _study_tables = load_script("tools/never_from_scratch"), load_script("tools/study_tables")
SCRATCH, cell_compute = _never_from_scratch.SCRATCH, _never_from_scratch.cell_compute
compute_table = _never_from_scratch.compute_table
injective_layer_table, reading_table = _study_tables.injective_layer_table, _study_tables.reading_table

ROOT = Path(__file__).resolve().parent.parent
#: Two-sided 95% Student-t critical values from a printed table (df = 1, 2, 4).
T_975 = {1: 12.706, 2: 4.303, 4: 2.776}


def test_mean_interval_matches_the_t_table() -> None:
    for values in ([0.5, 0.7], [1.0, 2.0, 3.0], [0.1, 0.4, 0.2, 0.9, 0.3]):
        n = len(values)
        mean = sum(values) / n
        sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
        interval = mean_interval(values)
        assert interval.mean == pytest.approx(mean)
        assert interval.half_width == pytest.approx(T_975[n - 1] * sd / math.sqrt(n), rel=1e-3)
    single = mean_interval([0.4])
    assert single.n == 1 and math.isnan(single.half_width) and not single.excludes_zero
    with pytest.raises(ValueError, match="non-finite"):
        mean_interval([0.1, float("nan")])


def test_paired_difference_pairs_by_seed_and_says_whether_it_excludes_zero() -> None:
    variant = {1: 0.80, 2: 0.70, 3: 0.90}
    control = {1: 0.70, 2: 0.60, 3: 0.85, 4: 0.10}  # seed 4 has no partner and is not used
    difference = paired_difference(variant, control)
    assert difference.n == 3 and difference.mean == pytest.approx((0.10 + 0.10 + 0.05) / 3)
    assert difference.excludes_zero  # differences 0.10, 0.10, 0.05: all positive, small spread
    noisy = paired_difference({1: 0.8, 2: 0.6, 3: 0.7}, {1: 0.7, 2: 0.7, 3: 0.7})
    assert not noisy.excludes_zero
    with pytest.raises(ValueError, match="share no seed"):
        paired_difference({1: 0.5}, {2: 0.5})


def test_one_class_rule() -> None:
    assert predicts_one_class([0, 500, 0]) and predicts_one_class([3, 997])
    assert not predicts_one_class([20, 980]) and not predicts_one_class([0, 0])


# ---------------------------------------------------------------------------------------------- data
def write_ag_news(folder: Path, rows: list[list[str]], header: list[str] | None = None) -> Path:
    path = folder / "ag_news" / "test.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header or ["label", "title", "description"])
        writer.writerows(rows)
    return path


def learnable_ag_news(folder: Path, rows: int = 240) -> None:
    """Labels 1–4, each signalled by its own word, so a tiny model can learn them."""
    words = ["sports", "business", "science", "world"]
    generator = random.Random(0)
    data = []
    for _ in range(rows):
        label = generator.randrange(4)
        filler = " ".join(generator.choice(["the", "a", "news", "today", "report"]) for _ in range(6))
        data.append([str(label + 1), f"{words[label]} {filler}", filler])
    write_ag_news(folder, data)


def test_single_file_tasks_are_split_with_a_fixed_seed(tmp_path: Path) -> None:
    learnable_ag_news(tmp_path, rows=100)
    first, second = load_task("ag_news", tmp_path), load_task("ag_news", tmp_path)
    assert (first.train_texts, first.test_texts) == (second.train_texts, second.test_texts)
    assert len(first.train_texts) == 80 and len(first.test_texts) == 20
    assert "seed 0" in first.split and "80 train / 20 test" in first.split
    (fit, fit_labels), (held, held_labels) = first.held_out(0.25)
    assert fit + held == first.train_texts and fit_labels + held_labels == first.train_labels
    assert len(held) == 20 and not set(held) & set(first.test_texts) - set(first.train_texts)


@pytest.mark.parametrize(
    ("rows", "header", "message"),
    [
        ([["1", "a", "b"], ["2", "c"]], None, r"test.csv: line 3 has 2 fields, expected 3"),
        ([["1", "a", "b"], ["five", "c", "d"]], None, r"test.csv: line 3: label 'five' is not an integer"),
        ([["1", "a", "b"], ["9", "c", "d"]], None, r"test.csv: line 3: label 9 is outside 1–4"),
        ([["1", "a", "b"]], ["label", "text"], r"test.csv: line 1 should be the header"),
        ([], None, r"test.csv has no data rows"),
    ],
)
def test_malformed_data_names_the_file_and_line(tmp_path: Path, rows, header, message) -> None:
    write_ag_news(tmp_path, rows, header)
    with pytest.raises(ValueError, match=message):
        load_task("ag_news", tmp_path)


def test_missing_data_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"listops/test_d20s.tsv does not exist"):
        load_task("listops", tmp_path)


# ---------------------------------------------------------------------------------------------- grid
def tiny_settings(**overrides) -> GridSettings:
    fields = dict(
        task="ag_news",
        pairs=("mgk_bert", "macaron_bert"),
        sizes={"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "head_dim": 8,
               "intermediate_size": 32},
        learning_rates=(1e-3, 3e-3),
        seeds=(1, 2),
        steps=3,
        batch_size=8,
        max_length=24,
        vocab_size=200,
        calibration=False,  # the protocol's mechanics; the calibration controls have their own test
    )
    return GridSettings(**{**fields, **overrides})


def test_a_grid_sweep_record_is_read_as_the_protocols_held_out_run() -> None:
    """Accuracy and the one-class flag of a finished run; a diverged or failed run has no score."""
    finished = {"status": "finished", "accuracy": 0.7, "predicts_one_class": False}
    assert held_out_run(finished) == HeldOutRun(0.7, one_class=False)
    assert held_out_run({**finished, "predicts_one_class": True}) == HeldOutRun(0.7, one_class=True)
    assert held_out_run({"status": "diverged", "error": "Step 3: non-finite gradient"}) == HeldOutRun(None)
    assert held_out_run({"status": "solver_failed", "predicts_one_class": True}) == HeldOutRun(None)


def test_grid_runs_each_seeds_sweep_on_the_held_out_slice_then_its_final_run_and_resumes(tmp_path: Path) -> None:
    """The grid runs the lab's protocol: at each seed every cell's held-out runs (scored on the held-out slice),
    then the seed's final run at the rate its own sweep chose (recomputed here from the records); each record is
    reported as it is written, in the protocol's order."""
    learnable_ag_news(tmp_path / "data")
    settings = tiny_settings()
    folder = tmp_path / "out" / "ag_news"
    seen: list[tuple[Path, set[str]]] = []  # what each call of on_record finds on disk (what a commit would take)
    Grid(settings, tmp_path / "data", tmp_path / "out").run(
        on_record=lambda cell: seen.append((cell, {p.name for p in cell.iterdir()})))  # fmt: skip
    cells = [folder / spec_folder(spec) / role for spec in settings.pairs for role in ("variant", "control")]
    expected = [(cell, f"sweep-lr{lr:g}-seed{seed}.json") for seed in settings.seeds for cell in cells
                for lr in settings.learning_rates] + [(cell, f"seed{seed}.json") for seed in settings.seeds
                                                      for cell in cells]  # fmt: skip
    written = [(cell, *(files - next((f for c, f in reversed(seen[:i]) if c == cell), set())))
               for i, (cell, files) in enumerate(seen)]  # fmt: skip
    assert written == expected
    data = json.loads((folder / "data.json").read_text())
    chosen_rates = set()
    for cell in cells:
        for seed in settings.seeds:
            sweep = {lr: json.loads((cell / f"sweep-lr{lr:g}-seed{seed}.json").read_text())
                     for lr in settings.learning_rates}  # fmt: skip
            for record in sweep.values():  # scored on the held-out slice, never the test split
                assert sum(record["prediction_counts"]) == data["held_out_examples"] and record["seed"] == seed
                assert record["evaluated_on"] == "held-out slice of the training split"
            best = max(r["accuracy"] for r in sweep.values())
            chosen = min(lr for lr, r in sweep.items() if r["accuracy"] == best)
            chosen_rates.add(chosen)
            record = json.loads((cell / f"seed{seed}.json").read_text())
            assert record["learning_rate"] == chosen and record["seed"] == seed
            assert sum(record["prediction_counts"]) == data["test_examples"]
            spec, role = cell.parent.name, cell.name
            assert (record["attention_type"], record["layer_scheme"]) == (
                ("softmax", "lie_trotter") if role == "control" else
                {"mgk_bert": ("mgk", "lie_trotter"), "macaron_bert": ("softmax", "strang")}[spec]
            )  # fmt: skip
        assert load_grid(folder)["cells"][cell.parent.name][cell.name]["chosen"] == {
            seed: json.loads((cell / f"seed{seed}.json").read_text())["learning_rate"] for seed in settings.seeds}
    assert not list(folder.glob("*/*/choice.json"))
    # A rerun does nothing (every file kept); a lost run is redone alone.
    def run_files() -> dict[Path, int]:
        paths = [*folder.glob("*/*/sweep-*.json"), *folder.glob("*/*/seed*.json")]
        return {p: p.stat().st_mtime_ns for p in paths}

    files = run_files()
    assert len(files) == 2 * 2 * 2 * (2 + 1)  # pairs × roles × seeds × (rates + a final run)
    lost = folder / "mgk_bert" / "variant" / "seed2.json"
    kept = json.loads(lost.read_text())
    lost.unlink()
    seen.clear()
    Grid(settings, tmp_path / "data", tmp_path / "out").run(on_record=lambda cell: seen.append((cell, [])))
    assert seen == [(lost.parent, [])]  # only the run trained again is reported (a commit has nothing else)
    after = run_files()
    assert after.keys() == files.keys()
    assert {p: t for p, t in after.items() if p != lost} == {p: t for p, t in files.items() if p != lost}
    redone = json.loads(lost.read_text())
    assert redone["accuracy"] == kept["accuracy"] and redone["prediction_counts"] == kept["prediction_counts"]
    # Another grid in the same folder is refused, naming the difference.
    with pytest.raises(CheckpointError, match="steps: 3 → 4") as refused:
        Grid(tiny_settings(steps=4), tmp_path / "data", tmp_path / "out").run()
    assert "--overwrite_output_dir to replace its records" in str(refused.value)  # what replaces it, named
    # So is resuming it with another engine (a grid committed before its runs moved to the Trainer).
    fingerprint = folder / "run_fingerprint.json"
    fingerprint.write_text(json.dumps({k: v for k, v in json.loads(fingerprint.read_text()).items() if k != "engine"}))
    with pytest.raises(CheckpointError, match="engine"):
        Grid(settings, tmp_path / "data", tmp_path / "out").run()
    # So is a grid recorded under the rule before the protocol (one sweep per cell, no rate_choice).
    grid_fingerprint = Grid(settings, tmp_path / "data", tmp_path / "out").fingerprint()
    fingerprint.write_text(json.dumps({k: v for k, v in grid_fingerprint.items() if k != "rate_choice"}))
    with pytest.raises(CheckpointError, match="rate_choice"):
        Grid(settings, tmp_path / "data", tmp_path / "out").run()
    # A finished seed at a rate its sweep no longer chooses is refused, not silently kept.
    fingerprint.write_text(json.dumps(grid_fingerprint))
    seed = folder / "mgk_bert" / "variant" / "seed2.json"
    seed.write_text(json.dumps({**redone, "learning_rate": 0.5}))
    with pytest.raises(CheckpointError, match=r"seed2.json was trained at learning rate 0.5, but the sweep now"):
        Grid(settings, tmp_path / "data", tmp_path / "out").run()


def test_a_grid_narrowed_to_the_controls_is_the_same_grid_and_the_rest_fills_in_later(tmp_path: Path) -> None:
    """``roles=("control",)`` trains only the control cells, under the grid's own fingerprint; the grid run later
    in full trains only the variants, keeps the controls' files, and its records are those of a grid run at once."""
    learnable_ag_news(tmp_path / "data")
    settings = tiny_settings(pairs=("mgk_bert",))
    folder = tmp_path / "narrowed" / "ag_news"
    Grid(settings, tmp_path / "data", tmp_path / "narrowed").run(roles=("control",))
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) == [
        "data.json", "mgk_bert", "run_fingerprint.json"]
    assert [p.name for p in (folder / "mgk_bert").iterdir()] == ["control"]
    controls = {p: p.stat().st_mtime_ns for p in (folder / "mgk_bert" / "control").glob("s*.json")}  # the runs
    seen = []
    Grid(settings, tmp_path / "data", tmp_path / "narrowed").run(on_record=seen.append)
    assert set(seen) == {folder / "mgk_bert" / "variant"}  # the controls were not trained again
    assert {p: p.stat().st_mtime_ns for p in (folder / "mgk_bert" / "control").glob("s*.json")} == controls
    Grid(settings, tmp_path / "data", tmp_path / "at_once").run()
    for role in ("variant", "control"):
        for path in (tmp_path / "at_once" / "ag_news" / "mgk_bert" / role).glob("s*.json"):
            narrowed, at_once = (json.loads(p.read_text()) for p in (folder / "mgk_bert" / role / path.name, path))
            assert narrowed["prediction_counts"] == at_once["prediction_counts"], (role, path.name)
            assert narrowed["accuracy"] == at_once["accuracy"]


def test_a_cell_whose_model_an_earlier_cell_trains_copies_its_runs(tmp_path: Path, monkeypatch) -> None:
    """MGK-BERT's control is post-LN Macaron-BERT's (BERT on the core): the grid trains it once and copies the
    records, marked, into the later cell; the copies are what training that cell gives (a grid of MGK alone)."""
    import hf_variants.lab.grid as grid_module

    learnable_ag_news(tmp_path / "data")
    trained = []
    train_and_evaluate = grid_module.train_and_evaluate

    def counting(config, *args, **kwargs):
        trained.append(config.model_type)
        return train_and_evaluate(config, *args, **kwargs)

    monkeypatch.setattr(grid_module, "train_and_evaluate", counting)
    settings = tiny_settings(pairs=("macaron_bert:layer_norm_position=post", "mgk_bert"))
    Grid(settings, tmp_path / "data", tmp_path / "both" / SCRATCH).run()
    runs = len(settings.seeds) * (len(settings.learning_rates) + 1)
    assert Counter(trained) == {"macaron_bert": 2 * runs, "mgk_bert": runs}  # MGK's control not trained again
    Grid(tiny_settings(pairs=("mgk_bert",)), tmp_path / "data", tmp_path / "alone").run()
    copied, alone = (tmp_path / name / "ag_news" / "mgk_bert" / "control" for name in ("both/scratch", "alone"))
    assert sorted(p.name for p in copied.iterdir()) == sorted(p.name for p in alone.iterdir())
    for path in alone.glob("s*.json"):
        copy, reference = json.loads((copied / path.name).read_text()), json.loads(path.read_text())
        assert copy.pop("same_model_as") == "macaron_bert:layer_norm_position=post control"
        assert copy["model_type"] == "mgk_bert" and copy["config"] == reference["config"]
        for key in ("accuracy", "prediction_counts", "learning_rate", "seed", "pair", "role", "evaluated_on"):
            assert copy[key] == reference[key], key
    # The study's compute table counts the runs trained, the copies as their twin's.
    def minutes(pair: str, role: str) -> str:
        runs = (tmp_path / "both/scratch/ag_news" / pair / role).glob("s*.json")
        return f"{sum(json.loads(path.read_text())['train_seconds'] for path in runs) / 60:.0f}"

    rows = compute_table(tmp_path / "both", ["ag_news"]).splitlines()[2:]
    twin = "copied from macaron_bert:layer_norm_position=post control"
    assert rows == [
        f"| scratch | ag_news | macaron_bert:layer_norm_position=post | {runs} / {runs} | — | "
        f"{minutes('macaron_bert__layer_norm_position-post', 'variant')} / "
        f"{minutes('macaron_bert__layer_norm_position-post', 'control')} |",
        f"| scratch | ag_news | mgk_bert | {runs} / {twin} | — | {minutes('mgk_bert', 'variant')} / {twin} |",
    ]


def test_a_grid_runs_its_calibration_controls_and_a_task_whose_controls_fail_makes_no_verdict(
        tmp_path: Path, monkeypatch) -> None:  # fmt: skip
    """Beside its pairs a grid runs the positive control (the BERT control without token mixing) and the A/A control
    (the BERT control initialised from other seeds, on its seed's data order) against the BERT control, under the
    same protocol; the task's pairs get a verdict only where the positive control came out below and the A/A was
    equivalent (the controls' final runs planted here with known outcomes, both ways)."""
    import hf_variants.lab.grid as grid_module

    learnable_ag_news(tmp_path / "data")
    seeds_trained: dict[tuple[str, str], set[tuple[int, int | None]]] = {}
    train_and_evaluate = grid_module.train_and_evaluate

    def recording(config, tokenizer, train, evaluation, settings, **kwargs):
        key = (config.model_type, config.attention_type)
        seeds_trained.setdefault(key, set()).add((settings.seed, kwargs.get("initialisation_seed")))
        return train_and_evaluate(config, tokenizer, train, evaluation, settings, **kwargs)

    monkeypatch.setattr(grid_module, "train_and_evaluate", recording)
    settings = tiny_settings(pairs=("mgk_bert",), calibration=True)
    Grid(settings, tmp_path / "data", tmp_path / "out").run()
    folder = tmp_path / "out" / "ag_news"
    positive, negative = calibration_pairs()["positive"], calibration_pairs()["negative"]
    assert json.loads((folder / "run_fingerprint.json").read_text())["calibration"] == calibration_pairs()
    for pair in (positive, negative):
        for role in ("variant", "control"):
            names = sorted(p.name for p in (folder / spec_folder(pair) / role).glob("*.json"))
            assert names == sorted([f"sweep-lr{r:g}-seed{s}.json" for r in settings.learning_rates
                                    for s in settings.seeds] + [f"seed{s}.json" for s in settings.seeds])  # fmt: skip
    replica = json.loads((folder / spec_folder(negative) / "variant" / "seed2.json").read_text())
    assert replica["initialisation_seed"] == 1002 and replica["seed"] == 2 and "same_model_as" not in replica
    assert (replica["model_type"], replica["attention_type"]) == ("bert_control", "softmax")
    bag = json.loads((folder / spec_folder(positive) / "variant" / "seed1.json").read_text())
    assert bag["attention_type"] == "mean" and bag["layer_scheme"] == "lie_trotter"
    # the replica's weights come from other seeds, its data order from its own; every other model's both from its own.
    # The BERT control itself is not trained again: MGK-BERT's control is the same model (its records are copies).
    assert seeds_trained.pop(("bert_control", "softmax")) == {(s, s + 1000) for s in settings.seeds}
    assert set(seeds_trained) == {("mgk_bert", "mgk"), ("mgk_bert", "softmax"), ("bert_control", "mean")}
    assert all(pairs == {(s, s) for s in settings.seeds} for pairs in seeds_trained.values())
    control = json.loads((folder / spec_folder(negative) / "control" / "seed1.json").read_text())
    assert control["same_model_as"] == "mgk_bert control"

    grid = load_grid(folder)
    assert grid["calibration"] == calibration_pairs() and [kind for kind, _, _ in calibration_checks(grid)] == [
        "positive", "negative"]

    def plant(pair: str, role: str, accuracies: list[float]) -> None:
        for seed, accuracy in zip(settings.seeds, accuracies, strict=True):
            path = folder / spec_folder(pair) / role / f"seed{seed}.json"
            path.write_text(json.dumps(json.loads(path.read_text()) | {"status": "finished", "accuracy": accuracy,
                                                                      "predicts_one_class": False}))  # fmt: skip

    plant("mgk_bert", "variant", [0.80, 0.83])  # the pair itself: comparable whenever the task is calibrated
    plant("mgk_bert", "control", [0.79, 0.80])
    plant(positive, "control", [0.90, 0.91])
    plant(negative, "control", [0.90, 0.91])
    plant(negative, "variant", [0.901, 0.909])  # equivalent within ±2 points at two seeds
    plant(positive, "variant", [0.90, 0.92])  # a bag of words as good as attention: this task cannot tell
    (reason,) = {comparison.per_protocol.why_not for comparison in
                 grid_comparisons(tmp_path / "out", ["ag_news"]).values()}  # fmt: skip
    assert reason.startswith("this task is not calibrated: the positive control failed"), reason
    assert "not calibrated" in comparison_table(tmp_path / "out", ["ag_news"])
    plant(positive, "variant", [0.50, 0.52])  # far below: the task needs token mixing, and the grid sees it
    assert [passed for _, passed, _ in calibration_checks(load_grid(folder))] == [True, True]
    (comparison,) = grid_comparisons(tmp_path / "out", ["ag_news"]).values()
    assert comparison.per_protocol.why_not is None
    assert "ag_news: calibrated (positive control below" in comparison_table(tmp_path / "out", ["ag_news"])
    # a grid recorded before the controls existed names none, and its pairs keep their verdicts
    fingerprint = folder / "run_fingerprint.json"
    fingerprint.write_text(json.dumps({k: v for k, v in json.loads(fingerprint.read_text()).items()
                                       if k != "calibration"}))  # fmt: skip
    plant(positive, "variant", [0.90, 0.92])
    assert load_grid(folder)["calibration"] == {} and list(grid_comparisons(tmp_path / "out", ["ag_news"])) == [
        ("mgk_bert", "ag_news")]
    assert next(iter(grid_comparisons(tmp_path / "out", ["ag_news"]).values())).per_protocol.why_not is None
    assert "No calibration controls ran on ag_news:" in comparison_table(tmp_path / "out", ["ag_news"])


def test_an_initialisation_seed_changes_the_weights_only() -> None:
    """``initialisation_seed`` draws the new weights from its own seed: a run's starting weights are those of a run
    at that seed, not those of the run's own seed (which keeps the data order and dropout)."""
    from transformers import TrainerCallback

    from hf_variants.lab.grid_training import EncodedSplit, RunSettings, train_and_evaluate
    from hf_variants.tokenization import train_wordpiece_tokenizer

    class FirstWeights(TrainerCallback):
        def __init__(self) -> None:
            self.weights: dict[str, torch.Tensor] = {}

        def on_train_begin(self, args, state, control, model=None, **kwargs):
            self.weights = {name: value.detach().clone() for name, value in model.state_dict().items()}

    texts = [f"word{i % 7} filler text {i}" for i in range(32)]
    tokenizer = train_wordpiece_tokenizer(texts, vocab_size=60)
    data = EncodedSplit.encode(tokenizer, texts, [i % 2 for i in range(32)], 12)
    config = ModelSpec.parse("bert_control").config(tiny_settings().sizes, vocab_size=len(tokenizer), num_labels=2,
                                                    pad_token_id=tokenizer.pad_token_id)  # fmt: skip

    def first_weights(seed: int, initialisation_seed: int | None) -> dict[str, torch.Tensor]:
        watcher = FirstWeights()
        train_and_evaluate(config, tokenizer, data, data, RunSettings(learning_rate=1e-3, warmup_ratio=0.0, steps=1,
                           batch_size=8, seed=seed), callbacks=[watcher], initialisation_seed=initialisation_seed)
        return watcher.weights

    replica, at_its_seed, at_the_run_seed = first_weights(1, 1001), first_weights(1001, None), first_weights(1, None)
    assert all(torch.equal(replica[name], at_its_seed[name]) for name in replica)
    assert not all(torch.equal(replica[name], at_the_run_seed[name]) for name in replica)


def test_self_pretraining_sees_only_each_runs_training_inputs(tmp_path: Path, monkeypatch, capfd) -> None:
    """Each run's model is pretrained on its own training inputs before fine-tuning: a held-out run on the training
    split without the held-out slice, a final run on the whole training split; the test split never. The
    fine-tuned run starts from the pretrained encoder; the record states the pretraining and its compute."""
    from hf_variants.lab import grid as grid_module
    from hf_variants.training import run_mlm

    learnable_ag_news(tmp_path / "data", rows=160)
    settings = tiny_settings(pairs=("macaron_bert",), learning_rates=(1e-3, 3e-3), seeds=(1,),
                             pretraining=SelfPretraining(steps=4, sparse_prediction=True))  # fmt: skip
    seen: list[tuple[str, list[str]]] = []
    sparse: list[bool] = []
    engine = run_mlm.run

    def recording_engine(arguments):
        seen.append((Path(arguments.output_dir).name, Path(arguments.train_file).read_text().splitlines()))
        sparse.append(json.loads((Path(arguments.config_name) / "config.json").read_text())["sparse_prediction"])
        return engine(arguments)

    monkeypatch.setattr(run_mlm, "run", recording_engine)
    with pytest.raises(ValueError, match="needs a work_dir"):
        Grid(settings, tmp_path / "data", tmp_path / "out")
    grid = Grid(settings, tmp_path / "data", tmp_path / "out", work_dir=tmp_path / "work")
    capfd.readouterr()
    grid.run()
    assert "examples/s]" not in capfd.readouterr().err  # the engine's dataset bars stay off the grid's console
    data = load_task("ag_news", tmp_path / "data")
    (fit, _), (held_out, _) = data.held_out(settings.heldout_fraction)
    normalised = {name: [" ".join(text.split()) for text in texts]
                  for name, texts in {"fit": fit, "held_out": held_out, "train": data.train_texts,
                                      "test": data.test_texts}.items()}  # fmt: skip
    # the variant's two held-out runs, the control's (each rate's asks the engine, which trains the seed's once),
    # then the final runs
    assert [name for name, _ in seen] == ["pretrained-fit-seed1"] * 4 + ["pretrained-train-seed1"] * 2
    assert sparse == [True] * 6  # the MLM decoder at the masked positions only, as the settings ask
    for name, lines in seen:
        assert lines == normalised["fit" if "-fit-" in name else "train"]
        assert not set(lines) & (set(normalised["test"]) - set(normalised["train"]))
        if "-fit-" in name:
            assert not set(lines) & (set(normalised["held_out"]) - set(normalised["fit"]))
    record = json.loads((tmp_path / "out" / "ag_news" / "macaron_bert" / "variant" / "seed1.json").read_text())
    assert record["pretraining"]["corpus"] == "train" and record["pretraining"]["steps"] == 4
    assert record["pretraining"]["compute_multiple"] == 4 / settings.steps
    assert record["pretraining"]["examples"] == len(data.train_texts)
    # Its progress is in the pretraining's folder as it trains: the loss every logging step (here every step).
    pretrained = tmp_path / "work" / "ag_news" / "macaron_bert" / "variant" / "pretrained-train-seed1"
    logged = [row for row in csv.DictReader((pretrained / "metrics.csv").open()) if row.get("loss")]
    assert [int(row["step"]) for row in logged] == [1, 2, 3, 4] and all(math.isfinite(float(r["loss"])) for r in logged)
    # The fine-tuned model starts from the pretrained encoder, not from random initialisation.
    from transformers import AutoModelForMaskedLM, AutoModelForSequenceClassification

    encoder = AutoModelForMaskedLM.from_pretrained(pretrained).base_model.embeddings.word_embeddings.weight
    captured = {}
    train_and_evaluate = grid_module.train_and_evaluate

    def capturing(config, *args, initial_weights=None, **kwargs):
        model = AutoModelForSequenceClassification.from_pretrained(initial_weights, num_labels=config.num_labels)
        captured["embeddings"] = model.base_model.embeddings.word_embeddings.weight
        return train_and_evaluate(config, *args, initial_weights=initial_weights, **kwargs)

    monkeypatch.setattr(grid_module, "train_and_evaluate", capturing)
    (tmp_path / "out" / "ag_news" / "macaron_bert" / "variant" / "seed1.json").unlink()
    seen.clear()
    Grid(settings, tmp_path / "data", tmp_path / "out", work_dir=tmp_path / "work").run()
    assert [name for name, _ in seen] == ["pretrained-train-seed1"]  # the engine returns the finished run
    log = pretrained.with_name(pretrained.name + ".log").read_text()
    assert "parameters;" in log and "finished at step 4" in log  # the training's log kept, the re-entry added
    assert captured["embeddings"].equal(encoder)
    # A from-scratch grid's fingerprint is the one grids had before self-pretraining existed.
    assert "pretraining" not in tiny_settings().fingerprint() and "pretraining" in settings.fingerprint()


def test_a_self_pretraining_that_stops_is_the_runs_outcome(tmp_path: Path, monkeypatch) -> None:
    """A non-finite step in a run's self-pretraining is recorded as that run's outcome (named, with the step),
    like one in fine-tuning; the grid goes on with its other runs. The held-out runs share one pretraining (one
    per rate): a stopped one is not run again for the next rate, nor when the grid is run again."""
    from hf_variants.training import run_mlm
    from hf_variants.training.nonfinite import NonFiniteStepError

    learnable_ag_news(tmp_path / "data", rows=120)
    settings = tiny_settings(pairs=("macaron_bert",), learning_rates=(1e-3, 3e-3), seeds=(1,),
                             pretraining=SelfPretraining(steps=2))  # fmt: skip
    engine = run_mlm.run
    control_pretrainings: list[str] = []

    def failing_for_the_control(arguments):
        if "control" in Path(arguments.output_dir).parts:
            control_pretrainings.append(Path(arguments.output_dir).name)
            time.sleep(0.3)  # a pretraining that ran a while before it stopped
            raise NonFiniteStepError(2, ["bert.embeddings.word_embeddings.weight"])
        return engine(arguments)

    monkeypatch.setattr(run_mlm, "run", failing_for_the_control)
    Grid(settings, tmp_path / "data", tmp_path / "out", work_dir=tmp_path / "work").run()
    assert control_pretrainings == ["pretrained-fit-seed1", "pretrained-train-seed1"]  # once each, not per rate
    cell = tmp_path / "out" / "ag_news" / "macaron_bert"
    for name in ("sweep-lr0.001-seed1", "sweep-lr0.003-seed1", "seed1"):
        failed = json.loads((cell / "control" / f"{name}.json").read_text())
        assert failed["status"] == "diverged" and failed["error"].startswith("self-pretraining: Step 2: non-finite")
        assert held_out_run(failed) == HeldOutRun(None)
    assert json.loads((cell / "variant" / "seed1.json").read_text())["status"] == "finished"
    # The compute table counts the held-out runs' one pretraining once, and a stopped one's time until it stopped.
    cells = load_grid(tmp_path / "out" / "ag_news")["cells"]["macaron_bert"]
    shared = {record["pretraining"]["train_seconds"] for record in cells["variant"]["sweeps"][1].values()}
    assert len(shared) == 1  # both held-out runs start from one pretraining
    expected = (shared.pop() + cells["variant"]["seeds"][1]["pretraining"]["train_seconds"]) / 60
    assert cell_compute(cells["variant"])["pretraining"] == pytest.approx(expected)
    sweep_wall = [record["wall_seconds"] for record in cells["control"]["sweeps"][1].values()]
    expected = (max(sweep_wall) + cells["control"]["seeds"][1]["wall_seconds"]) / 60
    assert cell_compute(cells["control"])["pretraining"] == pytest.approx(expected)
    assert min(sweep_wall) < 0.3 <= expected * 60  # the second held-out run paid nothing; the time counted once
    # Run again without the records: the stopped pretrainings' outcomes are read, not trained again.
    for name in ("sweep-lr0.003-seed1", "seed1"):
        (cell / "control" / f"{name}.json").unlink()
    Grid(settings, tmp_path / "data", tmp_path / "out", work_dir=tmp_path / "work").run()
    assert control_pretrainings == ["pretrained-fit-seed1", "pretrained-train-seed1"]
    assert json.loads((cell / "control" / "seed1.json").read_text())["error"] == failed["error"]
    # Another pretraining (here a longer one) in the same work folder is another run: the engine is asked again,
    # the stopped outcome is not read as this run's.
    asked: list[str] = []

    def stopping_at_step_3(arguments):
        asked.append("/".join(Path(arguments.output_dir).parts[-2:]))
        raise NonFiniteStepError(3, ["bert.embeddings.word_embeddings.weight"])

    monkeypatch.setattr(run_mlm, "run", stopping_at_step_3)
    longer = tiny_settings(pairs=("macaron_bert",), learning_rates=(1e-3,), seeds=(1,),
                           pretraining=SelfPretraining(steps=3))  # fmt: skip
    Grid(longer, tmp_path / "data", tmp_path / "longer", work_dir=tmp_path / "work").run()
    assert asked == [f"{role}/pretrained-train-seed1" for role in ("variant", "control")]  # one rate: no sweep
    record = json.loads((tmp_path / "longer" / "ag_news" / "macaron_bert" / "control" / "seed1.json").read_text())
    assert record["error"].startswith("self-pretraining: Step 3: non-finite")


def test_chosen_rate_is_marked_at_either_edge_of_the_sweep() -> None:
    swept = [3e-4, 1e-3, 3e-3]
    assert [rate_text(lr, swept) for lr in swept] == ["0.0003†", "0.001", "0.003*"]
    assert rate_text(1e-3, [1e-3]) == "0.001*"  # a single rate is the largest swept


def test_table_reports_means_pairs_and_did_not_learn_from_the_files(tmp_path: Path) -> None:
    learnable_ag_news(tmp_path / "data")
    settings = tiny_settings(pairs=("mgk_bert",), seeds=(1, 2, 3))
    Grid(settings, tmp_path / "data", tmp_path / "out").run()
    folder = tmp_path / "out" / "ag_news"

    def set_seed(role: str, seed: int, accuracy: float, one_class: bool) -> None:
        """Give a run's file chosen numbers (the table must read them from the file)."""
        path = folder / "mgk_bert" / role / f"seed{seed}.json"
        record = json.loads(path.read_text())
        total = sum(record["prediction_counts"])
        counts = [total, 0, 0, 0] if one_class else [total // 2, total - total // 2, 0, 0]
        record.update(accuracy=accuracy, predicts_one_class=one_class, prediction_counts=counts)
        path.write_text(json.dumps(record))

    variant = {1: 0.80, 2: 0.70, 3: 0.75}
    for seed, accuracy in variant.items():
        set_seed("variant", seed, accuracy, one_class=False)
    set_seed("control", 1, 0.60, one_class=False)
    set_seed("control", 2, 0.65, one_class=False)
    set_seed("control", 3, 0.25, one_class=True)  # must leave the mean and the pairing
    grid = load_grid(folder)
    chance = grid["data"]["test_majority_share"]
    control = summarize_role(grid["cells"]["mgk_bert"]["control"], grid["data"])
    assert control["failed"] == [3] and control["learned"] == {1: 0.60, 2: 0.65}
    assert "(1/3 seeds did not learn)" in control["text"]
    row = comparison_table(tmp_path / "out", ["ag_news"]).splitlines()[2]
    # Paired over seeds 1 and 2: differences 0.20 and 0.05, mean 0.125, half-width t(1) · s / √2.
    half = T_975[1] * math.sqrt(((0.20 - 0.125) ** 2 + (0.05 - 0.125) ** 2) / 1) / math.sqrt(2)
    assert f"{100 * 0.125:+.1f} [{100 * (0.125 - half):+.1f}, {100 * (0.125 + half):+.1f}]" in row
    assert "75.0 ± " in row and "62.5 ± " in row
    # The rates each side's seeds chose, read from its seed files, marked at the edge of the two rates swept.
    marks = {1e-3: "0.001†", 3e-3: "0.003*"}
    sides = []
    for role in ("variant", "control"):
        chosen = Counter(json.loads((folder / "mgk_bert" / role / f"seed{seed}.json").read_text())["learning_rate"]
                         for seed in settings.seeds)  # fmt: skip
        sides.append(marks[next(iter(chosen))] if len(chosen) == 1 else
                     ", ".join(f"{marks[rate]} ×{n}" for rate, n in sorted(chosen.items())))  # fmt: skip
    assert f"| {sides[0]} / {sides[1]} |" in row
    # Every control seed one class: the cell says so, with the chance score, and there is no difference.
    for seed in (1, 2):
        set_seed("control", seed, 0.25, one_class=True)
    row = comparison_table(tmp_path / "out", ["ag_news"]).splitlines()[2]
    assert f"did not learn (chance {100 * chance:.1f})" in row and "| — |" in row


def test_a_run_below_the_guessing_bound_is_named_and_left_out(tmp_path: Path) -> None:
    """A run that predicts several classes but scores below a guessing model's 95% bound on the test split
    (``chance + 1.96 · √(chance (1 − chance) / n)``, from the task's ``data.json``) is "at chance": out of the
    mean and the pairing; a run just above the bound counts, even with a loss curve that the main job's plateau
    rule would flag (the grid's test for a run that did not learn is the bound, ``grid.run_outcome``)."""
    learnable_ag_news(tmp_path / "data")
    Grid(tiny_settings(pairs=("mgk_bert",), seeds=(1, 2, 3)), tmp_path / "data", tmp_path / "out").run()
    folder = tmp_path / "out" / "ag_news"
    data = json.loads((folder / "data.json").read_text())
    chance, examples = data["test_majority_share"], data["test_examples"]
    bound = chance + 1.96 * math.sqrt(chance * (1 - chance) / examples)

    def set_accuracy(seed: int, accuracy: float) -> None:
        path = folder / "mgk_bert" / "control" / f"seed{seed}.json"
        record = json.loads(path.read_text())
        total = sum(record["prediction_counts"])
        counts = [total // 2, total - total // 2, 0, 0]
        flat = [{"step": 5 * (i + 1), "loss": 1.386 - 0.01 * i} for i in range(8)]  # ends at 96% of its first
        assert stayed_on_plateau([point["loss"] for point in flat])
        record.update(accuracy=accuracy, predicts_one_class=False, prediction_counts=counts, curve=flat)
        path.write_text(json.dumps(record))

    for seed, accuracy in {1: bound + 0.001, 2: bound - 0.001, 3: 0.9}.items():
        set_accuracy(seed, accuracy)
    control = summarize_role(load_grid(folder)["cells"]["mgk_bert"]["control"], data)
    assert control["learned"] == {1: pytest.approx(bound + 0.001), 3: 0.9} and control["failed"] == [2]
    assert "(1/3 seeds at chance)" in control["text"]
    for seed in (1, 3):
        set_accuracy(seed, bound - 0.002)
    row = comparison_table(tmp_path / "out", ["ag_news"]).splitlines()[2]
    assert f"at chance (chance {100 * chance:.1f})" in row and "| — |" in row


def write_grid_records(folder: Path, pairs: list[str], runs: dict[str, dict[int, dict]]) -> None:
    """A task folder of result files with chosen numbers: ``runs[pair][seed]`` → the variant's record."""
    settings = {"task": "ag_news", "pairs": pairs, "learning_rates": [1e-3], "seeds": [1, 2, 3], "steps": 10}
    folder.mkdir(parents=True)
    (folder / "run_fingerprint.json").write_text(json.dumps(settings))
    (folder / "data.json").write_text(json.dumps({"test_majority_share": 0.25, "test_examples": 400}))
    for pair, seeds in runs.items():
        cell = folder / spec_folder(pair) / "variant"
        cell.mkdir(parents=True)
        for seed, fields in seeds.items():
            record = {"status": "finished", "predicts_one_class": False, "prediction_counts": [100] * 4,
                      "learning_rate": 1e-3, "seed": seed, **fields}  # fmt: skip
            (cell / f"seed{seed}.json").write_text(json.dumps(record))


def test_a_role_with_fewer_seeds_than_its_grid_runs_says_how_many_it_reads_so_far(tmp_path: Path) -> None:
    """A cell still running (two of the grid's three seeds on disk, one of them a failure) is read as it stands, and
    its text says so; once every seed is there, the note goes."""
    runs = {"mgk_bert": {1: {"accuracy": 0.80}, 2: {"accuracy": 0.70, "status": "non_finite"}}}
    write_grid_records(tmp_path / "ag_news", ["mgk_bert"], runs)
    running = summarize_role(load_grid(tmp_path / "ag_news")["cells"]["mgk_bert"]["variant"], {})
    assert running["learned"] == {1: 0.80} and running["failed"] == [2]
    assert running["text"].endswith("(2 of 3 seeds so far)")
    record = {"status": "finished", "predicts_one_class": False, "prediction_counts": [100] * 4, "accuracy": 0.75,
              "learning_rate": 1e-3, "seed": 3}  # fmt: skip
    (tmp_path / "ag_news" / "mgk_bert" / "variant" / "seed3.json").write_text(json.dumps(record))
    finished = summarize_role(load_grid(tmp_path / "ag_news")["cells"]["mgk_bert"]["variant"], {})
    assert finished["learned"] == {1: 0.80, 3: 0.75} and "so far" not in finished["text"]


def test_injective_layer_table_gives_the_trained_alphas_and_what_zeroing_them_costs(tmp_path: Path) -> None:
    runs = {
        "transject": {
            1: {"accuracy": 0.80, "residual_weights": [0.10, -0.20], "accuracy_with_identity_layers": 0.70},
            2: {"accuracy": 0.90, "residual_weights": [0.30, -0.40], "accuracy_with_identity_layers": 0.70},
        },
        "bert_control": {1: {"accuracy": 0.5}, 2: {"accuracy": 0.6}},  # no injective layers: no row
    }
    write_grid_records(tmp_path / "ag_news", ["transject", "bert_control"], runs)
    rows = injective_layer_table(tmp_path, ["ag_news"]).splitlines()[2:]
    assert len(rows) == 1 and rows[0].startswith("| ag_news | `transject` |")
    # α per layer over the seeds: layer 1 from 0.10 to 0.30, layer 2 from -0.40 to -0.20.
    assert "+0.100 … +0.300; -0.400 … -0.200" in rows[0]
    # Zeroing costs 0.10 and 0.20: mean 0.15, half-width t(1) · s / √2 with s = 0.0707.
    half = T_975[1] * math.sqrt((0.05**2 + 0.05**2) / 1) / math.sqrt(2)
    assert f"{100 * 0.15:+.1f} [{100 * (0.15 - half):+.1f}, {100 * (0.15 + half):+.1f}]" in rows[0]
    assert "| 85.0 ± " in rows[0] and "| 70.0 ± 0.0 |" in rows[0]


def test_a_reading_is_paired_by_seed_with_the_default_and_only_on_the_same_grid(tmp_path: Path) -> None:
    default, other = "transject", "transject:embedding_init=standard_normal"
    write_grid_records(tmp_path / "base" / "ag_news", [default],
                       {default: {1: {"accuracy": 0.80}, 2: {"accuracy": 0.84}, 3: {"accuracy": 0.70}}})  # fmt: skip
    write_grid_records(tmp_path / "other" / "ag_news", [other],
                       {other: {1: {"accuracy": 0.70}, 2: {"accuracy": 0.80}, 3: {"accuracy": 0.66}}})  # fmt: skip
    reading = (tmp_path / "other", other)
    row = reading_table((tmp_path / "base", "transject"), [reading], ["ag_news"]).splitlines()[2]
    differences = [-0.10, -0.04, -0.04]  # by seed; unpaired means would give the same mean, not this interval
    interval = mean_interval(differences)
    assert f"{100 * interval.mean:+.1f} [{100 * interval.low:+.1f}, {100 * interval.high:+.1f}]" in row
    # Another data split: seed s is not the same data order, so the table refuses to pair them.
    (tmp_path / "other" / "ag_news" / "data.json").write_text(json.dumps({"test_majority_share": 0.3}))
    with pytest.raises(ValueError, match=r"other/ag_news .* do not pair"):
        reading_table((tmp_path / "base", "transject"), [reading], ["ag_news"])


def test_committed_tables_are_rendered_from_the_committed_results() -> None:
    """The results page's generated blocks and docs/experiments/classification.md equal what the result
    files give."""
    command = [sys.executable, str(ROOT / "tools" / "render_tables.py"), "--check"]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_a_solver_failure_is_recorded_as_the_runs_outcome(tmp_path: Path) -> None:
    """An N-ODE run whose solver gives up (here: a one-step cap at a tight tolerance) is recorded as
    ``solver_failed`` with the solver's message, and the grid goes on."""
    learnable_ag_news(tmp_path / "data")
    sizes = {**tiny_settings().sizes, "max_num_steps": 1, "rtol": 1e-9, "atol": 1e-9}
    settings = tiny_settings(pairs=("node_transformer",), sizes=sizes, learning_rates=(1e-3, 3e-3), seeds=(1,))
    Grid(settings, tmp_path / "data", tmp_path / "out").run()
    cell = tmp_path / "out" / "ag_news" / "node_transformer"
    for rate in ("0.001", "0.003"):
        failed = json.loads((cell / "variant" / f"sweep-lr{rate}-seed1.json").read_text())
        assert failed["status"] == "solver_failed" and failed["failed_at_step"] == 0
        assert "N-ODE block 0: the dopri5 solver failed" in failed["error"]
    # every rate failed: the smallest is chosen and its seed runs show the failure (never averaged in)
    assert load_grid(tmp_path / "out" / "ag_news")["cells"]["node_transformer"]["variant"]["chosen"] == {1: 1e-3}
    assert json.loads((cell / "variant" / "seed1.json").read_text())["status"] == "solver_failed"
    control = json.loads((cell / "control" / "seed1.json").read_text())  # vanilla blocks: no solver
    assert control["status"] == "finished"
    row = comparison_table(tmp_path / "out", ["ag_news"]).splitlines()[2]
    assert "| 1/1 seeds solver_failed |" in row and "| — |" in row


def refuse_an_allocation() -> None:
    """A real refused allocation, as under an address-space cap: torch's CPU allocator asked for 4 EiB."""
    import torch

    torch.empty(1 << 62, dtype=torch.uint8)


def test_a_run_out_of_memory_is_its_outcome_and_the_grid_goes_on(tmp_path: Path, monkeypatch) -> None:
    """An allocation refused at a run's second training step (the fault injected where a growing N-ODE run meets
    the cap of ``--memory_limit_gib``) is recorded as ``out_of_memory`` with the step, not raised; the choice
    reads it as a run without a score, and the other rate's runs go on."""
    from hf_variants.training.run_glue import GlueTrainer

    training_step = GlueTrainer.training_step

    def refusing_at_the_larger_rate(self, *args, **kwargs):
        if self.args.learning_rate == 3e-3 and self.state.global_step == 1:
            refuse_an_allocation()
        return training_step(self, *args, **kwargs)

    monkeypatch.setattr(GlueTrainer, "training_step", refusing_at_the_larger_rate)
    learnable_ag_news(tmp_path / "data", rows=120)
    Grid(tiny_settings(pairs=("macaron_bert",), seeds=(1,)), tmp_path / "data", tmp_path / "out").run()
    cell = tmp_path / "out" / "ag_news" / "macaron_bert"
    for role in ("variant", "control"):
        failed = json.loads((cell / role / "sweep-lr0.003-seed1.json").read_text())
        assert failed["status"] == "out_of_memory" and failed["failed_at_step"] == 1
        assert failed["error"].startswith("out of memory: DefaultCPUAllocator: can't allocate memory")
        assert held_out_run(failed) == HeldOutRun(None)
        assert load_grid(tmp_path / "out" / "ag_news")["cells"]["macaron_bert"][role]["chosen"] == {1: 1e-3}
        assert json.loads((cell / role / "seed1.json").read_text())["status"] == "finished"


def test_a_self_pretraining_out_of_memory_is_the_runs_outcome(tmp_path: Path, monkeypatch) -> None:
    """An allocation refused in a run's self-pretraining is that run's outcome, named as such; any other error
    of the engine is not swallowed."""
    from hf_variants.training import run_mlm

    learnable_ag_news(tmp_path / "data", rows=120)
    settings = tiny_settings(pairs=("macaron_bert",), learning_rates=(1e-3,), seeds=(1,),
                             pretraining=SelfPretraining(steps=2))  # fmt: skip
    monkeypatch.setattr(run_mlm, "run", lambda arguments: refuse_an_allocation())
    Grid(settings, tmp_path / "data", tmp_path / "out", work_dir=tmp_path / "work").run()
    record = json.loads((tmp_path / "out" / "ag_news" / "macaron_bert" / "variant" / "seed1.json").read_text())
    assert record["status"] == "out_of_memory"
    assert record["error"].startswith("self-pretraining: out of memory: DefaultCPUAllocator: can't allocate memory")

    def broken(arguments):
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")

    monkeypatch.setattr(run_mlm, "run", broken)
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        Grid(settings, tmp_path / "data", tmp_path / "other", work_dir=tmp_path / "other-work").run()


def test_a_non_finite_gradient_stops_the_run_before_any_weight_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A finite loss with one parameter's gradient infinite (the AG News N-ODE event): clipping would
    turn it into NaN gradients and AdamW into NaN weights, read later as a solver failure. The grid's
    run (on the fine-tuning engine) stops at that step, recorded as diverged naming that parameter, and
    the optimizer never steps on it."""
    import torch

    from hf_variants.lab import grid_training as training
    from hf_variants.synthetic import synthetic_sentences
    from hf_variants.tokenization import train_wordpiece_tokenizer

    sentences = synthetic_sentences(40, seed=0)
    tokenizer = train_wordpiece_tokenizer(sentences, vocab_size=80, min_frequency=1)
    split = training.EncodedSplit.encode(tokenizer, sentences, [i % 2 for i in range(40)], max_length=16)
    sizes = {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32}
    config = ModelSpec("macaron_bert").config(sizes, vocab_size=len(tokenizer), num_labels=2,
                                              pad_token_id=tokenizer.pad_token_id)  # fmt: skip
    build, poisoned, steps_taken = training.AutoModelForSequenceClassification.from_config, [], []

    def build_poisoned(*args, **kwargs):
        model = build(*args, **kwargs)
        name, parameter = middle_parameter(model)
        poisoned.append((name, poison_gradient(parameter, on_call=3)))
        return model

    monkeypatch.setattr(training.AutoModelForSequenceClassification, "from_config", build_poisoned)
    monkeypatch.setattr(torch.optim.AdamW, "step", lambda self, *a, **k: steps_taken.append(1))
    settings = training.RunSettings(learning_rate=1e-3, warmup_ratio=0.0, steps=6, batch_size=8, seed=0)
    record = training.train_and_evaluate(config, tokenizer, split, split, settings)
    ((name, _),) = poisoned
    assert record["status"] == "diverged" and record["diverged_at_step"] == 2
    assert record["nonfinite_gradients"] == [name] and record["cause"] == f"Step 3: non-finite gradient in {name}"
    assert len(steps_taken) == 2


def test_a_grid_run_is_the_fine_tuning_engine_with_typed_settings() -> None:
    """The grid's run and ``hf-variants finetune`` are one engine: the same model, data and settings give
    the same weights through ``grid_training.train_and_evaluate`` as through ``GlueTrainer`` built here
    from the same ``TrainingArguments`` (and the record's accuracy is what those weights predict; its loss
    curve is what the Trainer logs every ``steps / CURVE_POINTS`` steps)."""
    import tempfile

    import torch

    from hf_variants.lab import grid_training as training
    from hf_variants.synthetic import synthetic_sentences
    from hf_variants.tokenization import train_wordpiece_tokenizer
    from hf_variants.training.run_glue import GlueTrainer

    sentences = synthetic_sentences(48, seed=1)
    tokenizer = train_wordpiece_tokenizer(sentences, vocab_size=80, min_frequency=1)
    labels = [int("the" in s.split()[:2]) for s in sentences]
    split = training.EncodedSplit.encode(tokenizer, sentences, labels, max_length=16)
    config = ModelSpec("bert_control").config(
        {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32},
        vocab_size=len(tokenizer), num_labels=2, pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    settings = training.RunSettings(learning_rate=3e-3, warmup_ratio=0.25, steps=2 * training.CURVE_POINTS,
                                    batch_size=8, seed=4)  # fmt: skip
    trained = {}
    original = training.AutoModelForSequenceClassification.from_config

    def keep(*args, **kwargs):
        trained["grid"] = original(*args, **kwargs)
        return trained["grid"]

    training.AutoModelForSequenceClassification.from_config = keep
    try:
        record = training.train_and_evaluate(config, tokenizer, split, split, settings)
    finally:
        training.AutoModelForSequenceClassification.from_config = original
    torch.manual_seed(settings.seed)
    model = original(config)
    with tempfile.TemporaryDirectory() as folder:
        arguments = settings.training_arguments(folder)
        arguments.logging_steps = 2  # the Trainer logs the mean loss of the steps since its last log
        engine = GlueTrainer(model=model, args=arguments, train_dataset=split,
                             data_collator=training.TokenCountingCollator(tokenizer))  # fmt: skip
        engine.train()
    logged = [(entry["step"], entry["loss"]) for entry in engine.state.log_history if "loss" in entry]
    assert len(record["curve"]) == len(logged) == training.CURVE_POINTS
    for point, (step, loss) in zip(record["curve"], logged, strict=True):
        assert point["step"] == step and point["loss"] == pytest.approx(loss, abs=2e-4)  # the Trainer rounds
    grid_weights, engine_weights = trained["grid"].state_dict(), model.state_dict()
    assert all(torch.equal(grid_weights[k], engine_weights[k]) for k in engine_weights)
    assert record["status"] == "finished" and sum(record["prediction_counts"]) == len(labels)
    with torch.no_grad():
        batch = training.TokenCountingCollator(tokenizer)([split[i] for i in range(len(split))])
        predicted = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits.argmax(-1)
    assert record["accuracy"] == (predicted == batch["labels"]).float().mean().item()


def test_a_transject_grid_run_records_its_trained_alphas_and_the_accuracy_without_its_layers() -> None:
    """A TransJect run's record carries α_l of each layer (sigmoid: moved from 0.5 by training) and the
    accuracy with every α_l set to 0, recomputed here from the trained weights; other models' do not."""
    import torch

    from hf_variants.core.schemes.injective.modeling_injective import layers_as_identity
    from hf_variants.lab import grid_training as training
    from hf_variants.synthetic import synthetic_sentences
    from hf_variants.tokenization import train_wordpiece_tokenizer

    sentences = synthetic_sentences(48, seed=1)
    tokenizer = train_wordpiece_tokenizer(sentences, vocab_size=80, min_frequency=1)
    labels = [int(s.split()[2].endswith("s")) for s in sentences]
    split = training.EncodedSplit.encode(tokenizer, sentences, labels, max_length=16)
    settings = training.RunSettings(learning_rate=3e-2, warmup_ratio=0.25, steps=8, batch_size=8, seed=4)
    sizes = {"hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 1}
    trained = {}
    original = training.AutoModelForSequenceClassification.from_config

    def keep(*args, **kwargs):
        trained["model"] = original(*args, **kwargs)
        return trained["model"]

    records = {}
    training.AutoModelForSequenceClassification.from_config = keep
    try:
        for spec in ("transject:residual_weight=sigmoid", "control of transject"):
            config = ModelSpec.parse(spec).config(sizes, vocab_size=len(tokenizer), num_labels=2,
                                                  pad_token_id=tokenizer.pad_token_id)  # fmt: skip
            records[spec] = training.train_and_evaluate(config, tokenizer, split, split, settings)
            trained[spec] = trained.pop("model")
    finally:
        training.AutoModelForSequenceClassification.from_config = original
    record, model = records["transject:residual_weight=sigmoid"], trained["transject:residual_weight=sigmoid"]
    assert len(record["residual_weights"]) == 2 and all(abs(a - 0.5) > 1e-4 for a in record["residual_weights"])
    batch = training.TokenCountingCollator(tokenizer)([split[i] for i in range(len(split))])
    with torch.no_grad(), layers_as_identity(model.eval()):
        predicted = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits.argmax(-1)
    assert record["accuracy_with_identity_layers"] == (predicted == batch["labels"]).float().mean().item()
    assert "residual_weights" not in records["control of transject"]


def test_which_variant_reads_cost_as_shares_of_the_matched_control(tmp_path: Path) -> None:
    """The "Which variant?" cost column divides each variant's row by its control's at the same shape, and a
    shape the benchmark did not run is left out rather than guessed."""
    benchmark_costs = load_script("tools/which_variant").benchmark_costs

    rows = [{"model": "mgk_bert", "hidden": 256, "length": 128, "throughput_vs_control": 0.8,
             "training_state_bytes": 300},
            {"model": "control of mgk_bert", "hidden": 256, "length": 128, "training_state_bytes": 200},
            {"model": "mgk_bert", "hidden": 256, "length": 512, "throughput_vs_control": 0.5,
             "training_state_bytes": 900}]  # fmt: skip
    (tmp_path / "bench.json").write_text(json.dumps({"rows": rows}))
    expected = {"mgk_bert": ["128 tokens: 0.80× the tokens/s, 1.50× the memory"]}
    assert benchmark_costs(tmp_path / "bench.json") == expected
