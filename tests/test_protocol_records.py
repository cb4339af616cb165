"""The one learning-rate rule (``hf_variants.lab.verdicts.choose_learning_rate``) against every committed
study: compare, the classification grids and the GLUE studies each chose their rates with a rule of their
own before; each cell's seed runs must have been trained at the rate the shared rule picks from the
cell's committed held-out runs, so the committed numbers stand unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hf_variants.lab import protocol, verdicts
from hf_variants.lab.grid import held_out_run, load_grid
from hf_variants.lab.protocol import RATE_CHOSEN_ONCE

from .helpers import committed_records, load_script

glue_study = load_script("experiments/glue_after_pretraining/glue_study")

ROOT = Path(__file__).resolve().parents[1]
#: The committed grids (their records unpacked) and the GLUE studies' cells.
GRID_STUDIES = {name: committed_records(name)
                for name in ("classification", "transject_residual", "transject_embedding")}  # fmt: skip
GLUE_STUDIES = {name: committed_records(f"glue_after_pretraining/{name}")
                for name in ("pretraining_budget", "pretraining_budget_long")}  # fmt: skip
GRIDS = sorted(path.parent for folder in GRID_STUDIES.values() for path in folder.glob("*/run_fingerprint.json"))
GLUE_CELLS = sorted({path.parent for folder in GLUE_STUDIES.values() for path in folder.glob("runs/**/seed*.json")})


def shown(path: Path) -> str:
    """A committed cell's name in the test id: its study and its path in the study."""
    for name, folder in {**GRID_STUDIES, **GLUE_STUDIES}.items():
        if path.is_relative_to(folder):
            return f"{name}/{path.relative_to(folder).as_posix()}"
    return path.name
COMPARISONS = sorted(ROOT.glob("experiments/compare/**/results.json"))


def test_there_are_committed_studies_of_each_kind() -> None:
    assert len(GRIDS) >= 9 and len(GLUE_CELLS) >= 20 and COMPARISONS


@pytest.mark.parametrize("folder", GRIDS, ids=shown)
def test_every_grid_cell_was_run_at_the_protocols_rate(folder: Path) -> None:
    """Each committed grid chose once per cell (the rule before the protocol), from its one sweep: every seed ran
    at the rate the shared rule picks from that sweep, and the grid is read as such."""
    for spec, roles in load_grid(folder)["cells"].items():
        for role, cell in roles.items():
            if not cell["seeds"]:
                continue
            assert cell["rate_choice"] == RATE_CHOSEN_ONCE and len(cell["sweeps"]) == 1, (spec, role)
            (sweep,) = cell["sweeps"].values()
            chosen = verdicts.choose_learning_rate({lr: held_out_run(r) for lr, r in sweep.items()})
            assert set(cell["chosen"].values()) == {chosen}, (spec, role)
            assert {r["learning_rate"] for r in cell["seeds"].values()} == {chosen}, (spec, role)


@pytest.mark.parametrize("folder", GLUE_CELLS, ids=shown)
def test_every_glue_cell_was_run_at_the_protocols_rate(folder: Path) -> None:
    sweep = {float(p.stem.removeprefix("sweep-lr")): json.loads(p.read_text()) for p in folder.glob("sweep-lr*.json")}
    seeds = [json.loads(p.read_text()) for p in folder.glob("seed*.json")]
    trained_at = {float(r["command"].split("--learning_rate ")[1].split()[0]) for r in seeds}
    assert trained_at == {protocol.choose({rate: glue_study.held_out(folder.name, r) for rate, r in sweep.items()})[0]}


@pytest.mark.parametrize("results", COMPARISONS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_compared_model_was_run_at_the_protocols_rate(results: Path) -> None:
    for name, model in json.loads(results.read_text())["models"].items():
        for task, tuned in model.get("fine_tuning", {}).items():
            if "rate_choice" in tuned:  # each seed chose its own rate
                choices = [(tuned["learning_rates"][seed], scores, tuned["heldout_losses"][seed],
                            {rate: why for key, why in tuned["heldout_left_out"].items()
                             for rate, _, of in [key.partition(", seed ")] if of == seed})
                           for seed, scores in tuned["heldout_scores"].items()]  # fmt: skip
            else:
                choices = [(tuned["learning_rate"], tuned.get("heldout_scores_by_learning_rate") or {},
                            tuned.get("heldout_losses_by_learning_rate", {}), tuned.get("heldout_left_out", {}))]
            for chosen, scores, losses, left_out in choices:
                if len(scores) < 2:
                    continue
                sweep = {float(rate): verdicts.HeldOutRun(score, left_out.get(rate, "").startswith(verdicts.ONE_CLASS),
                                                          losses.get(rate)) for rate, score in scores.items()}
                assert chosen == verdicts.choose_learning_rate(sweep), (name, task)


@pytest.mark.parametrize("study", ["pretraining_budget", "pretraining_budget_long"])
def test_committed_glue_runs_are_recognised_from_the_studys_typed_settings(study: str) -> None:
    """Every committed run of a GLUE study (recorded by command line) is the run its typed settings ask for, at
    the rate the shared rule chooses from the one sweep those studies ran per model and task (at seed 0, the rule
    before the protocol): the records are what the study's settings say they are."""
    fine_tuning, work = glue_study.FineTuning(), Path("runs") / study.replace("_", "-")
    records = sorted((GLUE_STUDIES[study] / "runs").glob("*/*/*.json"))
    assert len(records) >= 50
    for record in records:
        model, task, run = record.parent.parent.name, record.parent.name, record.stem
        heldout = run.startswith("sweep-lr")
        if heldout:
            rate, seed = float(run.removeprefix("sweep-lr")), 0
        else:
            sweep = {float(p.stem.removeprefix("sweep-lr")): glue_study.held_out(task, json.loads(p.read_text()))
                     for p in record.parent.glob("sweep-lr*.json")}  # fmt: skip
            rate, seed = protocol.choose(sweep)[0], int(run.removeprefix("seed"))
        settings = fine_tuning.run_settings(
            Path("../shared/data/glue"), work / "mlm" if model == "step0" else work / "models" / model, task, rate,
            seed, work / "glue" / model / task / run, random_init=model == "step0", heldout=heldout,
        )  # fmt: skip
        assert glue_study.finished_run(record, settings) == json.loads(record.read_text()), record


@pytest.mark.parametrize(("study", "steps", "every"), [("pretraining_budget", 3000, 500),
                                                      ("pretraining_budget_long", 10000, 1000)])  # fmt: skip
def test_committed_pretraining_runs_are_recognised_from_the_studys_typed_settings(
    study: str, steps: int, every: int
) -> None:
    """The committed budget studies' pretraining (recorded by command line) is the run the study's typed
    settings ask for, so a resumed study does not pretrain again."""
    from hf_variants.training import run_mlm

    record = GLUE_STUDIES[study] / "pretraining.json"
    work = Path("runs") / study.replace("_", "-")
    sizes, data = glue_study.PRETRAINING_SIZES, Path("../shared/data")
    settings = glue_study.mlm_settings("bert_control", sizes, data, work / "tokenizer", steps, every, work / "mlm")
    recorded = run_mlm.recorded_arguments({"command": json.loads(record.read_text())["command"]}, record)
    assert recorded == run_mlm.requested_arguments(settings)
    other = glue_study.mlm_settings("bert_control", sizes, data, work / "tokenizer", steps, 2 * every, work / "mlm")
    assert run_mlm.requested_arguments(other) != recorded


@pytest.mark.parametrize("results", COMPARISONS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_compared_run_has_the_status_of_the_one_rule_and_the_report_reads_them(results: Path) -> None:
    """Each committed final run's recorded status is what ``verdicts.run_status`` gives its record, and the
    committed report is what the report renders from the committed records (so the verdicts over seeds
    read the runs through the one rule)."""
    from hf_variants.lab.evidence import declared_guessing_levels, run_outcomes
    from hf_variants.lab.report import report_markdown

    recorded = json.loads(results.read_text())
    statuses = [
        (tuned["runs"][seed]["status"], verdicts.run_status(outcome))
        for model in recorded["models"].values()
        for task, tuned in model.get("fine_tuning", {}).items()
        for seed, outcome in run_outcomes(tuned.get("runs", {}), task, declared_guessing_levels(recorded)[task]).items()
    ]
    if not statuses:
        pytest.skip(f"{results.relative_to(ROOT)} predates the per-seed records")
    assert [recorded for recorded, _ in statuses] == [derived for _, derived in statuses]
    assert report_markdown(recorded) == (results.parent / "report.md").read_text()
