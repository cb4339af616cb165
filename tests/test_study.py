"""Studies as data files (:mod:`hf_variants.lab.study`): the shipped ones are the committed grids' settings, a
wrong field is named with its file before anything runs, and docs/extending.md's worked example runs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from hf_variants.lab.grid import Grid
from hf_variants.lab.protocol import RATE_CHOICE
from hf_variants.lab.spec import calibration_pairs
from hf_variants.lab.study import load_study

from .helpers import REPO_ROOT, committed_records, load_script, run_python
from .test_experiments import learnable_ag_news

COMMITTED_GRID = committed_records("classification")


@pytest.mark.parametrize("task", ["ag_news", "listops", "imdb"])
def test_the_from_scratch_study_is_the_committed_grids_settings(task: str) -> None:
    """The shipped file declares what the committed grid was run with. Since then the engine that trains each run,
    the rate rule and the calibration controls came (the grid's fingerprint names each): the committed grid swept
    once, at its ``sweep_seed``, ran no calibration control, and is read under that rule; the study run again is
    another grid, with its controls."""
    (settings,) = [s for _, s in load_study("classification_from_scratch").grids if s.task == task]
    committed = json.loads((COMMITTED_GRID / task / "run_fingerprint.json").read_text())
    assert "rate_choice" not in committed and "calibration" not in committed and committed.pop("sweep_seed") == 0
    assert {k: v for k, v in settings.fingerprint().items() if k not in ("engine", "calibration")} == committed
    again = Grid(settings, Path("data"), Path("out")).fingerprint()
    assert again["rate_choice"] == RATE_CHOICE and again["calibration"] == calibration_pairs()


def test_the_pilot_studys_committed_folders_are_its_study_files_settings() -> None:
    """Every committed condition of the never-from-scratch pilot is its study file's settings under the rule it ran
    by (one sweep per cell, at ``sweep_seed``): a switch added since (``sparse_prediction``, off there) leaves an old
    fingerprint unchanged."""
    pilot = committed_records("never_from_scratch_pilot")
    study_file = REPO_ROOT / "experiments" / "never_from_scratch_pilot" / "pilot.toml"
    grids = [(c, s) for c, s in load_study(study_file).grids if s.task == "ag_news"]  # --tasks ag_news
    assert len(sorted(pilot.glob("*/*/run_fingerprint.json"))) == len(grids) >= 5
    for condition, settings in grids:
        fingerprint = json.loads((pilot / condition / settings.task / "run_fingerprint.json").read_text())
        assert "rate_choice" not in fingerprint and fingerprint.pop("sweep_seed") == 0
        assert "calibration" not in fingerprint and settings.calibration  # ran without; run again, with them
        assert replace(settings, calibration=False).fingerprint() == fingerprint, condition
    sparse = replace(grids[-1][1], pretraining=replace(grids[-1][1].pretraining, sparse_prediction=True))
    assert sparse.fingerprint()["pretraining"]["sparse_prediction"] is True  # a sparse grid is another grid


def test_the_committed_calibration_of_the_from_scratch_budget_is_its_study_files_grid() -> None:
    """The from-scratch condition's calibration controls, run again under the current protocol: the committed folder is
    the grid its study file makes (the shipped study, the BERT control as its one pair), with both controls, and the
    findings page reads it."""
    from hf_variants.lab.grid import load_grid
    from hf_variants.lab.grid_evidence import calibration_checks

    folder = committed_records("never_from_scratch_calibration") / "scratch" / "ag_news"
    study_file = REPO_ROOT / "experiments" / "never_from_scratch_calibration" / "calibration.toml"
    (settings,) = [s for c, s in load_study(study_file).grids if (c, s.task) == ("scratch", "ag_news")]
    made = Grid(settings, Path("data"), Path("out")).fingerprint()
    assert json.loads((folder / "run_fingerprint.json").read_text()) == made
    grid = load_grid(folder)
    checks = calibration_checks(grid)
    assert [kind for kind, _, _ in checks] == ["positive", "negative"]
    assert all(len(grid["cells"][pair][role]["seeds"]) == 5 for pair in grid["calibration"].values()
               for role in ("variant", "control"))  # fmt: skip
    page = (REPO_ROOT / "docs" / "findings.md").read_text()
    told = "calibrated" if all(passed for _, passed, _ in checks) else "**not calibrated**"
    positive = checks[0][2].difference.difference_text(100, bold=False)
    assert f"{told} on ag_news (positive {positive}; A/A " in page
    assert "`experiments/never_from_scratch_calibration/scratch`" in page


def test_conditions_and_extends_give_one_grid_per_condition_and_task() -> None:
    study = load_study("never_from_scratch")
    assert [(condition, s.task) for condition, s in study.grids][:2] == [("scratch", "ag_news"), ("scratch", "listops")]
    assert {s.task for _, s in study.grids} == {"ag_news", "listops", "imdb", "sst2"}
    scratch = {s.task: s for c, s in study.grids if c == "scratch"}
    pretrained = {s.task: s for c, s in study.grids if c == "self_pretrained"}
    for task, settings in scratch.items():  # one thing changes between the conditions
        assert settings.pretraining is None and pretrained[task].pretraining.steps == 10 * settings.steps
        assert {k: v for k, v in pretrained[task].fingerprint().items() if k != "pretraining"} == settings.fingerprint()
        assert settings.seeds == (1, 2, 3, 4, 5)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("pairs = ['mgk_bert']\nlearning_rate = [1e-3]\n", r"bad\.toml: a study has no field 'learning_rate'"),
        ("pairs = ['mgk_bert']\n[tasks.ag_news]\nsteps = 3\nmax_lenght = 9\n",
         r"bad\.toml: \[tasks\.ag_news\] has no field 'max_lenght'"),
        ("pairs = ['mgk_bert']\n[tasks.glue]\nsteps = 3\n", r"bad\.toml: \[tasks\.glue\]: choose tasks among"),
        ("pairs = ['mgk_bert']\nlearning_rates = [1e-3]\nseeds = [1]\nbatch_size = 8\n[tasks.ag_news]\nsteps = 3\n"
         "max_length = 9\n[pretraining]\nstep = 3\n", r"bad\.toml: \[pretraining\] has no field 'step'"),
        ("pairs = ['mgk_bert']\n[tasks.ag_news]\nsteps = 3\n", r"bad\.toml: \[tasks\.ag_news\] misses a field"),
        ("pairs = ['mgk_bert'\n", r"bad\.toml: not valid TOML"),
        ("pairs = ['mgk_bert']\n[tasks.ag_news]\nsteps = 3\n[conditions.fast]\nstepz = 3\n",
         r"bad\.toml: \[conditions\.fast\] has no field 'stepz'"),
        ("extends = 'bad'\n", r"bad\.toml: extends itself"),
        ("pairs = ['mgk_bert']\nlearning_rates = [1e-3]\nseeds = [1]\nbatch_size = 8\n[tasks.ag_news]\n"
         "steps = '300'\nmax_length = 9\n", r"bad\.toml: \[tasks\.ag_news\]: steps = '300' is not int"),
        ("pairs = ['mgk_bert']\nlearning_rates = 1e-3\nseeds = [1]\nbatch_size = 8\n[tasks.ag_news]\nsteps = 3\n"
         "max_length = 9\n", r"learning_rates = 0\.001 is not tuple\[float, \.\.\.\]"),
        ("pairs = ['mgk_bert']\nlearning_rates = [1e-3]\nseeds = [1]\nbatch_size = 8\n[tasks.ag_news]\nsteps = 3\n"
         "max_length = 9\n[pretraining]\nsteps = true\n", r"\[pretraining\]: steps = True is not int"),
    ],
)
def test_a_wrong_study_file_is_named_before_anything_runs(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text.replace("'bad'", repr(str(path))))
    with pytest.raises(ValueError, match=message):
        load_study(path)


def test_extends_reads_a_path_beside_its_file_and_a_folder_never_hides_a_shipped_study(tmp_path: Path,
                                                                                      monkeypatch) -> None:  # fmt: skip
    """A study that extends ``base.toml`` reads the file beside it, wherever the command runs; a folder in the working
    directory named like a shipped study (a study's own output folder, say) is not a study and hides nothing."""
    (tmp_path / "studies").mkdir()
    (tmp_path / "studies" / "base.toml").write_text("extends = 'never_from_scratch'\nseeds = [7]\n")
    (tmp_path / "studies" / "child.toml").write_text("extends = 'base.toml'\npairs = ['mgk_bert']\n")
    (tmp_path / "never_from_scratch" / "scratch").mkdir(parents=True)  # an output folder of that name
    monkeypatch.chdir(tmp_path)
    grids = load_study(tmp_path / "studies" / "child.toml").grids
    assert {(s.seeds, s.pairs) for _, s in grids} == {((7,), ("mgk_bert",))}
    assert tmp_path not in load_study("never_from_scratch").path.parents  # the shipped one
    assert {s.seeds for _, s in load_study("never_from_scratch").grids} == {(1, 2, 3, 4, 5)}


def test_an_unknown_study_name_lists_the_shipped_ones() -> None:
    with pytest.raises(FileNotFoundError, match=r"No study 'never'.*classification_from_scratch, never_from_scratch"):
        load_study("never")


def test_the_worked_example_of_a_new_study_runs(tmp_path: Path) -> None:
    """docs/extending.md's study file and the Python that runs it, as a user would: two conditions, their
    results paired by seed in the comparison table, the pretrained models outside the results."""
    page = (REPO_ROOT / "docs" / "extending.md").read_text()
    (study,) = re.findall(r"```toml\n(.*?)```", page, flags=re.DOTALL)
    (code,) = [block for block in re.findall(r"```python\n(.*?)```", page, flags=re.DOTALL) if "run_study" in block]
    (tmp_path / "my_study.toml").write_text(study)
    learnable_ag_news(tmp_path / "data", rows=120)
    result = run_python(code, cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "| ag_news | MGK attention vs softmax (same heads, head_dim) |" in result.stdout, result.stdout[-3000:]
    assert re.search(r"\nag_news: (calibrated|\*\*not calibrated\*\*) \(positive control ", result.stdout)
    for condition in ("scratch", "self_pretrained"):
        cell = tmp_path / "results" / condition / "ag_news" / "mgk_bert" / "variant"
        records = sorted(path.name for path in cell.iterdir())
        assert records == ["seed1.json", "seed2.json"]  # one rate: nothing to choose, no held-out runs
    seed = json.loads((tmp_path / "results" / "self_pretrained" / "ag_news" / "mgk_bert" / "control" / "seed2.json")
                      .read_text())  # fmt: skip
    assert seed["pretraining"]["corpus"] == "train" and seed["status"] in ("finished", "diverged")
    replica = tmp_path / "models" / "self_pretrained" / "ag_news" / "bert_control_other_seeds" / "variant"
    pretraining = json.loads((replica / "pretrained-train-seed1" / "run_fingerprint.json").read_text())
    assert (pretraining["seed"], pretraining["data_seed"]) == (1001, 1)  # the A/A replica: other weights, same masks
    assert not list((tmp_path / "results").rglob("*.safetensors"))  # models live under models/, not the results
    assert list((tmp_path / "models" / "self_pretrained").rglob("model.safetensors"))


def write_cell(folder: Path, spec: str, role: str, accuracies: dict[int, float | None]) -> None:
    """A finished cell's seed records as the grid writes them (None: a run that predicted one class)."""
    cell = folder / spec / role
    cell.mkdir(parents=True, exist_ok=True)
    for seed, accuracy in accuracies.items():
        record = {"status": "finished", "accuracy": 0.5 if accuracy is None else accuracy,
                  "predicts_one_class": accuracy is None, "learning_rate": 1e-3, "seed": seed}  # fmt: skip
        (cell / f"seed{seed}.json").write_text(json.dumps(record))
    (cell / "choice.json").write_text(json.dumps({"chosen_learning_rate": 1e-3}))


#: A grid's settings as its ``run_fingerprint.json`` holds them, as far as the tables read them.
GRID_SETTINGS = {"pairs": ["mgk_bert"], "learning_rates": [1e-3], "seeds": [1, 2, 3]}


def test_the_two_answers_pair_each_model_by_seed_across_conditions(tmp_path: Path) -> None:
    """Self-pretrained − scratch per model, and variant − control in each condition, from the result files:
    paired by seed, against hand-computed means, intervals and detectable differences; a one-class run left out."""
    from scipy import optimize, stats

    study = load_script("tools/never_from_scratch")
    payoff_table, scratch_table, verdict_table = study.payoff_table, study.scratch_table, study.verdict_table

    scratch = {"variant": {1: 0.70, 2: 0.72, 3: 0.74}, "control": {1: 0.71, 2: 0.71, 3: 0.75}}
    pretrained = {"variant": {1: 0.80, 2: 0.84, 3: 0.86}, "control": {1: 0.78, 2: None, 3: 0.83}}
    for condition, cells in (("scratch", scratch), ("self_pretrained", pretrained)):
        folder = tmp_path / condition / "ag_news"
        folder.mkdir(parents=True)
        (folder / "run_fingerprint.json").write_text(json.dumps(GRID_SETTINGS))
        (folder / "data.json").write_text(json.dumps({"test_majority_share": 0.25}))
        for role, accuracies in cells.items():
            write_cell(folder, "mgk_bert", role, accuracies)

    def interval(differences: list[float]) -> tuple[float, float, float]:
        n, mean = len(differences), sum(differences) / len(differences)
        sd = (sum((d - mean) ** 2 for d in differences) / (n - 1)) ** 0.5
        critical, error = stats.t.ppf(0.975, n - 1), sd / n**0.5
        # the detectable difference: where the noncentral t exceeds the critical value with probability 0.8
        found = lambda effect: stats.nct.sf(critical, n - 1, effect / error) - 0.8  # noqa: E731
        return mean, critical * error, optimize.brentq(found, 0.0, 20 * error)

    payoff = payoff_table(tmp_path, ["ag_news"])
    mean, half, detectable = interval([0.80 - 0.70, 0.84 - 0.72, 0.86 - 0.74])  # the variant, self-pretrained − scratch
    assert (f"| ag_news | mgk_bert | 72.0 ± {100 * interval([0.70, 0.72, 0.74])[1]:.1f} | "
            in payoff)  # fmt: skip
    bold = f"**{100 * mean:+.1f} [{100 * (mean - half):+.1f}, {100 * (mean + half):+.1f}]**"
    assert f"{bold} | {100 * detectable:.1f} |" in payoff
    control_row = next(line for line in payoff.splitlines() if "control of mgk_bert" in line)
    mean, half, _ = interval([0.78 - 0.71, 0.83 - 0.75])  # seed 2 predicted one class: out of the pair
    assert "(1/3 seeds did not learn)" in control_row
    assert f"{100 * mean:+.1f} [{100 * (mean - half):+.1f}" in control_row
    verdicts = verdict_table(tmp_path, ["ag_news"])
    row = next(line for line in verdicts.splitlines() if line.startswith("| ag_news"))
    before = interval([0.70 - 0.71, 0.72 - 0.71, 0.74 - 0.75])
    after = interval([0.80 - 0.78, 0.86 - 0.83])

    def interval_text(mean_half: tuple[float, ...]) -> str:
        mean, half = mean_half[0], mean_half[1]
        return f"{100 * mean:+.1f} [{100 * (mean - half):+.1f}, {100 * (mean + half):+.1f}]"

    assert interval_text(before) in row
    assert interval_text(after) in row
    (scratch_row,) = [line for line in scratch_table(tmp_path, ["ag_news"]).splitlines() if line.startswith("| ag_")]
    assert scratch_row.startswith("| ag_news | MGK attention vs softmax (same heads, head_dim) | 72.0 ± ")
    assert f"| {interval_text(before)} | {100 * before[2]:.1f} | 0.001* / 0.001* |" in scratch_row
    # A condition with only the variant's cell finished: its payoff row, and its verdict not run yet beside scratch's.
    folder = tmp_path / "self_pretrained_3x" / "ag_news"
    folder.mkdir(parents=True)
    (folder / "run_fingerprint.json").write_text(json.dumps(GRID_SETTINGS))
    (folder / "data.json").write_text(json.dumps({"test_majority_share": 0.25}))
    write_cell(folder, "mgk_bert", "variant", {1: 0.75, 2: 0.77, 3: 0.78})
    partial = payoff_table(tmp_path, ["ag_news"]).split("self_pretrained_3x acc.")[1]
    assert "| ag_news | mgk_bert |" in partial and "control of mgk_bert" not in partial
    assert (f"| ag_news | MGK attention vs softmax (same heads, head_dim) | {interval_text(before)} | "
            f"{100 * before[2]:.1f} | not run yet | — |") in verdict_table(tmp_path, ["ag_news"]).split(
        "self_pretrained_3x")[1]  # fmt: skip


def test_the_tally_counts_the_differences_that_exclude_zero_against_chance_alone(tmp_path: Path) -> None:
    """Per condition and answer, the rendered differences, those whose paired 95% interval (scipy's t) excludes 0,
    and the binomial tail P(at least k of n) at 5%; a pair with one role missing has no verdict, a one-class seed is
    left out of its pair, and a verdict whose control did not learn in a seed is counted apart."""
    from math import comb

    from scipy import stats

    tally_table = load_script("tools/never_from_scratch").tally_table

    cells = {  # (condition, pair, role) → accuracies by seed
        ("scratch", "mgk_bert", "variant"): {1: 0.80, 2: 0.82, 3: 0.84},
        ("scratch", "mgk_bert", "control"): {1: 0.70, 2: 0.71, 3: 0.72},  # +0.10, +0.11, +0.12: excludes 0
        ("scratch", "transject", "variant"): {1: 0.70, 2: 0.75, 3: 0.72},
        ("scratch", "transject", "control"): {1: 0.72, 2: 0.71, 3: 0.74},  # −0.02, +0.04, −0.02: holds 0
        ("self_pretrained", "mgk_bert", "variant"): {1: 0.81, 2: 0.85, 3: None},  # two learned seeds
        ("self_pretrained", "mgk_bert", "control"): {1: 0.80, 2: 0.82, 3: 0.90},
        ("self_pretrained", "transject", "variant"): {1: 0.90, 2: 0.95, 3: 0.93},
        ("self_pretrained", "transject", "control"): {1: 0.72, 2: None, 3: 0.70},  # its control failed a seed
    }
    for (condition, spec, role), accuracies in cells.items():
        folder = tmp_path / condition / "sst2"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "run_fingerprint.json").write_text(json.dumps({**GRID_SETTINGS, "pairs": ["mgk_bert", "transject"]}))
        write_cell(folder, spec, role, accuracies)

    def excludes_zero(a: list[float], b: list[float]) -> bool:
        low, high = stats.ttest_rel(a, b).confidence_interval(0.95)
        return low > 0 or high < 0

    def at_least(k: int, n: int) -> float:
        return 100 * (1 - sum(comb(n, i) * 0.05**i * 0.95 ** (n - i) for i in range(k)))

    payoffs = [excludes_zero([0.81, 0.85], [0.80, 0.82]), excludes_zero([0.80, 0.82, 0.90], [0.70, 0.71, 0.72]),
               excludes_zero([0.90, 0.95, 0.93], [0.70, 0.75, 0.72]), excludes_zero([0.72, 0.70], [0.72, 0.74])]
    pretrained = int(excludes_zero([0.81, 0.85], [0.80, 0.82]))
    rows = {tuple(cell.strip() for cell in line.split("|")[1:3]): [cell.strip() for cell in line.split("|")[3:7]]
            for line in tally_table(tmp_path, ["sst2"]).splitlines()[2:]}  # fmt: skip
    expected = {
        ("scratch", "variant − control"): (2, 1, at_least(1, 2), "0"),
        ("self_pretrained", "variant − control"): (1, pretrained, at_least(pretrained, 1), "1"),
        ("self_pretrained", "self_pretrained − scratch"): (4, sum(payoffs), at_least(sum(payoffs), 4), "—"),
    }
    assert rows.keys() == expected.keys()
    for key, (n, k, chance, apart) in expected.items():
        assert rows[key][:2] == [str(n), str(k)] and rows[key][3] == apart
        assert float(rows[key][2].removesuffix("%")) == pytest.approx(chance, abs=0.05 + 1e-9)  # one decimal


def test_the_plateau_table_gives_each_seeds_exit_step_from_its_recorded_curve(tmp_path: Path) -> None:
    """Per condition, pair and role, each seed's step off its starting loss (:func:`left_plateau_at`), ``never``
    within its budget, ``no curve`` for a record without one, a stopped run's status; a copied cell names its twin.
    Its counts (:func:`plateau_exit_counts`) count a copied cell once and tell a one-class run from one that learned."""
    study = load_script("tools/never_from_scratch")
    plateau_exit_counts, plateau_exit_table = study.plateau_exit_counts, study.plateau_exit_table

    def curve(first_low: int | None) -> list[dict[str, float]]:  # on ln 10 until the point first_low (1-based)
        return [{"step": 15 * i, "loss": 2.30 if first_low is None or i < first_low else 1.9} for i in range(1, 21)]

    exits = {"scratch": {1: 7, 2: None, 3: 18}, "self_pretrained": {1: None, 2: 2, 3: None}}
    for condition, by_seed in exits.items():
        folder = tmp_path / condition / "listops"
        folder.mkdir(parents=True)
        (folder / "run_fingerprint.json").write_text(json.dumps({**GRID_SETTINGS, "pairs": ["mgk_bert", "transject"]}))
        (folder / "data.json").write_text(json.dumps({"test_majority_share": 0.11}))
        for spec in ("mgk_bert", "transject"):
            for role in ("variant", "control"):
                write_cell(folder, spec, role, {seed: 0.2 for seed in by_seed})
                for seed, first_low in by_seed.items():
                    path = folder / spec / role / f"seed{seed}.json"
                    record = {**json.loads(path.read_text()), "steps": 300, "curve": curve(first_low)}
                    if spec == "transject" and role == "control":
                        record["same_model_as"] = "mgk_bert control"
                    if condition == "scratch" and spec == "transject" and role == "variant" and seed == 3:
                        del record["curve"]
                    if condition == "scratch" and spec == "transject" and role == "variant" and seed == 2:
                        record = {"status": "diverged", "seed": 2, "learning_rate": 1e-3, "curve": []}
                    if condition == "self_pretrained" and spec == "mgk_bert" and (role, seed) in {
                            ("variant", 1), ("control", 2)}:  # one that never left, one that left: both one class
                        record["predicts_one_class"] = True
                    path.write_text(json.dumps(record))
    rows = {tuple(cell.strip() for cell in line.split("|")[1:4]): line.split("|")[4].strip()
            for line in plateau_exit_table(tmp_path, "listops").splitlines()[2:]}  # fmt: skip
    assert rows[("scratch", "mgk_bert", "variant")] == "1: 105 · 2: never (of 300) · 3: 270"
    assert rows[("scratch", "transject", "variant")] == "1: 105 · 2: diverged · 3: no curve"
    assert rows[("self_pretrained", "mgk_bert", "control")] == "1: never (of 300) · 2: 30 · 3: never (of 300)"
    assert rows[("self_pretrained", "transject", "control (the runs of mgk_bert control)")].startswith("1: never")
    assert len(rows) == 8
    counts = {line.split("|")[1].strip(): [cell.strip() for cell in line.split("|")[2:-1]]
              for line in plateau_exit_counts(tmp_path, "listops").splitlines()[2:]}  # fmt: skip
    # the copied control (same_model_as) is counted once, with its twin: 3 cells × 3 seeds in each condition
    assert counts["scratch"] == ["9", "5", "105–270", "2", "0", "0", "1", "1"]
    assert counts["self_pretrained"] == ["9", "3", "30", "6", "1", "1", "0", "0"]


def test_which_variant_reads_each_condition_of_the_study(tmp_path: Path) -> None:
    """The "Which variant?" table's study column: the variant's verdict per task in each condition, scratch first,
    from the cells on disk (a pair without both cells is not shown)."""
    study_verdicts = load_script("tools/which_variant").study_verdicts

    for condition, variant in (("self_pretrained", {1: 0.80, 2: 0.82, 3: 0.84}), ("scratch", {1: 0.70, 2: 0.72})):
        folder = tmp_path / condition / "sst2"
        folder.mkdir(parents=True)
        (folder / "run_fingerprint.json").write_text(json.dumps({**GRID_SETTINGS, "pairs": ["mgk_bert", "transject"]}))
        write_cell(folder, "mgk_bert", "variant", variant)
        write_cell(folder, "mgk_bert", "control", {1: 0.70, 2: 0.71, 3: 0.70})
        write_cell(folder, "transject", "variant", {1: 0.70})
    found = study_verdicts(tmp_path, ["sst2"])
    assert list(found) == ["mgk_bert"]
    scratch, pretrained = found["mgk_bert"]
    assert scratch.startswith("sst2 (scratch): ") and "+0.5 [" in scratch  # (0 + 1) / 2, over 2 seeds
    assert pretrained.startswith("sst2 (self_pretrained): ") and "+11.7 [" in pretrained  # (10 + 11 + 14) / 3
    assert "(learned" not in pretrained  # every run learned: no count shown
    assert study_verdicts(tmp_path / "absent", ["sst2"]) == {}


CLI = Path(sys.executable).with_name("hf-variants")


def test_the_study_command_runs_the_smallest_cell_of_the_from_scratch_study(tmp_path: Path) -> None:
    """``hf-variants study`` as a user types it: one pair, one role, one learning rate, one seed of the shipped
    from-scratch study; its records in the folder given, read back (not rerun) by the same command."""
    learnable_ag_news(tmp_path / "data", rows=120)
    command = [str(CLI), "study", "classification_from_scratch", "--tasks", "ag_news", "--pairs", "mgk_bert",
               "--roles", "control", "--seeds", "1", "--learning_rates", "1e-3", "--data_dir", "data",
               "--output_dir", "records"]  # fmt: skip
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    cell = tmp_path / "records" / "ag_news" / "mgk_bert" / "control"
    assert sorted(path.name for path in cell.iterdir()) == ["seed1.json"]  # one rate: no held-out runs
    seed = json.loads((cell / "seed1.json").read_text())
    assert seed["status"] == "finished" and seed["learning_rate"] == 1e-3 and seed["seed"] == 1
    (settings,) = [s for _, s in load_study("classification_from_scratch").grids if s.task == "ag_news"]
    fingerprint = json.loads((tmp_path / "records" / "ag_news" / "run_fingerprint.json").read_text())
    assert fingerprint["steps"] == settings.steps and fingerprint["pairs"] == ["mgk_bert"]
    assert not (tmp_path / "records" / "ag_news" / "mgk_bert" / "variant").exists()  # --roles control only
    # its last line: no verdict yet, the calibration controls' variants not having run
    assert result.stdout.splitlines()[-1].startswith(f"{Path('records') / 'ag_news'}: not calibrated (positive control "
                                                     "not comparable: fewer than 2 seeds")  # fmt: skip
    modified = (cell / "seed1.json").stat().st_mtime_ns
    again = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and (cell / "seed1.json").stat().st_mtime_ns == modified  # resumed, not rerun


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["nothing"], "argument STUDY: No study 'nothing'"),
        (["classification_from_scratch", "--tasks", "sst2"],
         "argument --tasks: classification_from_scratch.toml has the tasks ag_news, listops, imdb, not sst2"),
        (["classification_from_scratch", "--conditions", "scratch"], "argument --conditions: "),
        (["classification_from_scratch", "--seeds", "1", "1"], "argument --seeds: names a value twice"),
        (["classification_from_scratch", "--memory_limit_gib", "0"],
         "argument --memory_limit_gib: 0 must be greater than 0"),
        (["classification_from_scratch", "--roles", "treated"], "argument --roles: invalid choice: 'treated'"),
    ],
)
def test_the_study_command_names_a_wrong_argument_in_one_line(tmp_path: Path, arguments: list[str],
                                                               message: str) -> None:  # fmt: skip
    result = subprocess.run([str(CLI), "study", *arguments, "--data_dir", str(tmp_path), "--output_dir",
                             str(tmp_path / "out")], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert message in result.stderr, result.stderr
    assert not (tmp_path / "out").exists()  # refused before anything was written
