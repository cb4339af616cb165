"""The lab's one comparison protocol (``hf_variants.lab.protocol``): its run graph against a recording train
function, and the rule that no other module drives held-out sweep → rate → final runs."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from hf_variants.lab import verdicts
from hf_variants.lab.protocol import Run, run_protocol

from .helpers import REPO_ROOT

TASK = "attractor"


class Recorder:
    """A train function that logs each run and returns a held-out score from ``scores[(model, seed, rate)]``."""

    def __init__(self, scores: dict[tuple[str, int, float], float], failing: Run | None = None) -> None:
        self.scores, self.failing, self.log = scores, failing, []

    def __call__(self, run: Run) -> dict:
        self.log.append(run)
        if run == self.failing:
            raise RuntimeError(f"{run.name} failed")
        if run.heldout:
            return {"score": self.scores[run.model, run.seed, run.learning_rate]}
        return {"trained": run.name}


def held_out(task: str, result: dict) -> verdicts.HeldOutRun:
    assert task == TASK
    return verdicts.HeldOutRun(result["score"])


#: Model "a" scores best at 1e-3 at seed 1 and at 3e-3 at seed 2; "b" the other way round.
SCORES = {("a", 1, 1e-3): 0.8, ("a", 1, 3e-3): 0.6, ("a", 2, 1e-3): 0.5, ("a", 2, 3e-3): 0.7,
          ("b", 1, 1e-3): 0.4, ("b", 1, 3e-3): 0.9, ("b", 2, 1e-3): 0.9, ("b", 2, 3e-3): 0.3}  # fmt: skip


def test_each_seed_trains_its_final_run_at_the_rate_its_own_held_out_runs_chose() -> None:
    train = Recorder(SCORES)
    finished: list[Run] = []
    outcomes = run_protocol([("a", 1), ("b", 1), ("a", 2), ("b", 2)], [TASK], [3e-3, 1e-3], train, held_out,
                            pretrained=True, finished=lambda run, result: finished.append(run))  # fmt: skip
    expected = {("a", 1): 1e-3, ("a", 2): 3e-3, ("b", 1): 3e-3, ("b", 2): 1e-3}
    assert {key[0::2]: choice[0] for key, choice in outcomes.choices.items()} == expected
    assert outcomes.choices["a", TASK, 2] == (3e-3, {1e-3: 0.5, 3e-3: 0.7})
    finals = [run for run in train.log if run.task is not None and not run.heldout]
    assert sorted((run.model, run.seed, run.learning_rate) for run in finals) == sorted(
        (model, seed, rate) for (model, seed), rate in expected.items())
    for run in train.log:  # each run after what it needs: its seed's pretraining, then its seed's held-out runs
        index = train.log.index(run)
        if run.task is not None:
            assert train.log.index(Run(run.model, seed=run.seed)) < index
        if run.task is not None and not run.heldout:
            assert all(train.log.index(Run(run.model, TASK, rate, run.seed, heldout=True)) < index
                       for rate in (1e-3, 3e-3))  # fmt: skip
    assert sorted(finished, key=train.log.index) == train.log and len(outcomes.results) == len(train.log) == 4 * 4
    assert outcomes.final_runs("a", TASK, [1, 2]) == {1: {"trained": "seed1"}, 2: {"trained": "seed2"}}


def test_one_rate_is_no_choice_and_every_rate_trains_a_final_run_at_each() -> None:
    train = Recorder({})
    outcomes = run_protocol([("a", 1)], [TASK], [1e-3], train, held_out, pretrained=False)
    assert train.log == [Run("a", TASK, 1e-3, 1)] and outcomes.choices == {("a", TASK, 1): (1e-3, {})}
    train = Recorder(SCORES)
    outcomes = run_protocol([("a", 2)], [TASK], [1e-3, 3e-3], train, held_out, pretrained=False, every_rate=True)
    finals = {run for run in train.log if not run.heldout}
    assert finals == {Run("a", TASK, rate, 2, every_rate=True) for rate in (1e-3, 3e-3)}  # no run beside them
    assert outcomes.choices["a", TASK, 2][0] == 3e-3 and {run.name for run in finals} == {"lr0.001-seed2",
                                                                                          "lr0.003-seed2"}


def test_a_run_that_raises_ends_the_graph() -> None:
    failing = Run("a", TASK, 3e-3, 1, heldout=True)
    train = Recorder(SCORES, failing)
    with pytest.raises(RuntimeError, match=r"sweep-lr0\.003-seed1 failed"):
        run_protocol([("a", 1)], [TASK], [1e-3, 3e-3], train, held_out, pretrained=False)
    assert not [run for run in train.log if not run.heldout]  # no final run without its seed's choice


#: Where the package's comparisons live: a driver of the protocol anywhere here is a second driver.
DRIVER_FOLDERS = ("hf_variants", "experiments", "tools", "benchmarks")
#: The protocol's own module, and where the choice rule it calls is defined.
PROTOCOL = Path("hf_variants/lab/protocol.py")
RULE = Path("hf_variants/lab/verdicts.py")


def names_used(path: Path) -> set[str]:
    """The names a module reads (``name`` and ``module.name`` alike), not those it defines."""
    tree = ast.parse(path.read_text(), filename=str(path))
    used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    used |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    used |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names}
    return used


def test_no_module_but_the_protocol_chooses_a_rate_or_schedules_runs() -> None:
    """The choice among held-out runs (``choose_learning_rate``) and the lab's executor, which runs a comparison's
    runs side by side, are used by the protocol alone: a module that uses either drives sweep → rate → seeds a
    second way, which is how a fix to the protocol once had to be made three times."""
    modules = [path for folder in DRIVER_FOLDERS for path in sorted((REPO_ROOT / folder).rglob("*.py"))]
    assert len(modules) > 50
    drivers = {path.relative_to(REPO_ROOT).as_posix() for path in modules
               if path.relative_to(REPO_ROOT) not in (PROTOCOL, RULE)
               and names_used(path) & {"choose_learning_rate", "executor"}}  # fmt: skip
    assert drivers == set()
    assert {"choose_learning_rate", "executor"} <= names_used(REPO_ROOT / PROTOCOL)
