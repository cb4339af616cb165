"""Every study's record read into the protocol's run outcome by one reader (``hf_variants.lab.outcomes``):
the same run written in each of the three formats the package writes reads the same; a failure, an undefined
score and a chance level each read by the format's declared field map."""

from __future__ import annotations

import math

import pytest

from hf_variants.lab import verdicts
from hf_variants.lab.grid import run_outcome
from hf_variants.lab.outcomes import ENGINE_RESULTS, GRID_RUN, MAIN_JOB_RUN, RecordFields, field, read_outcome

CURVE = [{"step": 10 * (i + 1), "loss": loss} for i, loss in enumerate((0.69, 0.5, 0.3, 0.2, 0.1, 0.05))]


def one_run_in_each_format(value: float, one_class: bool, failed: str | None = None) -> dict[str, dict]:
    """One run, as run_glue's results.json, the main job's final-run record and the grid's record say it."""
    if failed:
        return {"engine": {"failed": failed}, "main_job": {"failed": failed, "status": verdicts.FAILED},
                "grid": {"status": "diverged", "error": failed}}  # fmt: skip
    share = 1.0 if one_class else 0.6
    return {
        "engine": {"eval": {"validation": {"accuracy": value, "largest_class_share": share, "loss": 0.4}}},
        "main_job": {"metric": "accuracy", "value": value, "did_not_learn": one_class, "chance": 0.5,
                     "dev_examples": 400, "curve": CURVE},
        "grid": {"status": "finished", "phase": "final", "accuracy": value, "predicts_one_class": one_class},
    }  # fmt: skip


def read_each(records: dict[str, dict], task: str = "sst2") -> dict[str, verdicts.RunOutcome]:
    grid_data = {"test_majority_share": 0.5, "test_examples": 400}
    return {"engine": read_outcome(records["engine"], ENGINE_RESULTS, task),
            "main_job": read_outcome(records["main_job"], MAIN_JOB_RUN, task),
            "grid": run_outcome(records["grid"], grid_data)}  # fmt: skip


@pytest.mark.parametrize(
    ("value", "one_class", "failed", "status"),
    [(0.8, False, None, verdicts.LEARNED), (0.5, True, None, verdicts.ONE_CLASS),
     (0.0, False, "Step 3: non-finite gradient", verdicts.FAILED)],
)  # fmt: skip
def test_one_run_reads_the_same_in_every_format(value, one_class, failed, status) -> None:
    outcomes = read_each(one_run_in_each_format(value, one_class, failed))
    assert {name: verdicts.run_status(outcome) for name, outcome in outcomes.items()} == dict.fromkeys(outcomes, status)
    scores = {outcome.held_out().score for outcome in outcomes.values()}
    assert scores == ({None} if failed else {value})


def test_a_score_at_a_constant_guess_is_at_chance_where_the_format_knows_the_split() -> None:
    """0.52 on 400 examples of a half-and-half split is within a guessing model's bound: the main job's record
    and the grid's (with its data.json) say so; the engine's results keep no chance level, so it learned."""
    outcomes = read_each(one_run_in_each_format(0.52, one_class=False))
    assert verdicts.run_status(outcomes["main_job"]) == verdicts.AT_CHANCE
    assert verdicts.run_status(outcomes["grid"]) == verdicts.AT_CHANCE
    assert verdicts.run_status(outcomes["engine"]) == verdicts.LEARNED


def test_the_highest_guessing_level_is_used_and_only_for_an_accuracy() -> None:
    record = {"metric": "accuracy", "value": 0.62, "chance": 0.5, "dev_examples": 400}
    assert read_outcome(record, MAIN_JOB_RUN, "sst2").chance == 0.5
    assert read_outcome(record, MAIN_JOB_RUN, "sst2", chance=0.6).chance == 0.6  # a declared level above the share
    assert verdicts.run_status(read_outcome(record, MAIN_JOB_RUN, "sst2", chance=0.6)) == verdicts.AT_CHANCE
    assert read_outcome(record, MAIN_JOB_RUN, "sst2", chance=0.3).chance == 0.5
    mcc = {**record, "metric": "matthews_correlation"}
    assert read_outcome(mcc, MAIN_JOB_RUN, "cola").chance is None  # no constant guess is known for a correlation


def test_an_undefined_correlation_is_one_constant_score_never_chosen() -> None:
    results = {"eval": {"validation": {"pearson": None, "prediction_std": 0.0, "loss": 1.2}}}
    outcome = read_outcome(results, ENGINE_RESULTS, "stsb")
    assert math.isnan(outcome.value) and outcome.one_class
    assert verdicts.run_status(outcome) == verdicts.ONE_CLASS
    assert not outcome.held_out().finished
    learned = {"eval": {"validation": {"pearson": 0.3, "prediction_std": 0.4, "loss": 0.9}}}
    sweep = {rate: read_outcome(r, ENGINE_RESULTS, "stsb").held_out() for rate, r in ((1e-4, results), (1e-3, learned))}
    assert verdicts.choose_learning_rate(sweep) == 1e-3


def test_a_tie_of_held_out_scores_goes_to_the_lower_recorded_loss() -> None:
    def held_out(loss: float) -> dict:
        return {"eval": {"validation": {"accuracy": 0.9, "largest_class_share": 0.5, "loss": loss}}}

    sweep = {rate: read_outcome(held_out(loss), ENGINE_RESULTS, "sst2").held_out()
             for rate, loss in ((1e-4, 0.5), (1e-3, 0.3))}  # fmt: skip
    assert verdicts.choose_learning_rate(sweep) == 1e-3


def test_the_grid_reads_its_sweep_on_the_held_out_split() -> None:
    data = {"held_out_majority_share": 0.9, "held_out_examples": 200, "test_majority_share": 0.5, "test_examples": 200}
    record = {"status": "finished", "accuracy": 0.8, "predicts_one_class": False}
    assert verdicts.run_status(run_outcome({**record, "phase": "sweep"}, data)) == verdicts.AT_CHANCE  # 0.8 < 0.9
    assert verdicts.run_status(run_outcome({**record, "phase": "final"}, data)) == verdicts.LEARNED


def test_a_new_format_is_a_field_map() -> None:
    """A format not written today reads by declaring where its fields are, nothing more."""
    nested = RecordFields(value="scores.{metric}", failed="outcome.error", one_class="outcome.constant",
                          curve="history", chance="split.share", examples="split.size")  # fmt: skip
    record = {"scores": {"accuracy": 0.55}, "outcome": {"constant": False}, "history": CURVE,
              "split": {"share": 0.5, "size": 40}}  # fmt: skip
    outcome = read_outcome(record, nested, "sst2")
    assert (outcome.value, outcome.chance, outcome.examples, list(outcome.losses)) == (
        0.55, 0.5, 40, [point["loss"] for point in CURVE])
    assert verdicts.run_status(outcome) == verdicts.AT_CHANCE  # 0.55 on 40 examples is within the bound
    assert read_outcome({"outcome": {"error": "solver"}}, nested, "sst2").failed == "solver"


def test_field_paths_and_a_missing_task() -> None:
    assert field({"a": {"b": 1}}, "a.b") == 1
    assert field({"a": {"b": 1}}, "a.c") is None
    assert field({"a": 3}, "a.b") is None
    assert field({"a": 3}, None) is None
    with pytest.raises(ValueError, match="name the task"):
        read_outcome({"value": 1.0}, MAIN_JOB_RUN)
    assert read_outcome({"status": "finished", "accuracy": 0.7}, GRID_RUN).value == 0.7  # the grid scores accuracy
