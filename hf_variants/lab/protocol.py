"""The lab's one comparison protocol: the run graph every comparison of the package runs by — the main job
(:mod:`.compare`), ``hf-variants study`` (:mod:`.grid`) and the GLUE studies beside the library.

For each model and seed (a replicate):

1. its pretraining, where the comparison has one (``pretrained``);
2. per task, its held-out runs: one per learning rate, trained on the training split less a held-out slice and
   scored on that slice, never on the split the results are read on;
3. the rate those runs choose (:func:`~.verdicts.choose_learning_rate`);
4. the final run at that rate (or, with ``every_rate``, a final run at every rate), scored on the task's dev or
   test split.

The choice is made inside each replicate, as its initialisation and data order are, so an interval over the seeds
holds the choice's noise (:data:`RATE_CHOICE`); with one rate there is nothing to choose, and both sides of every
pair train at it. The runs go to the lab's executor (:func:`~.execution.executor`), ``workers`` at a time, each
started as soon as what it needs has finished. What a run is and where it records its result is the caller's
``train`` function, which returns a finished run's recorded result instead of training it again: the protocol
resumes wherever ``train`` does.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, wait
from dataclasses import dataclass, field
from typing import Any

from .execution import executor
from .verdicts import HeldOutRun, choose_learning_rate

#: The rule by which a final run's learning rate is chosen, recorded with every comparison: each seed makes its own
#: held-out choice for each model. (Records made before it chose once per model, at one seed: "once per model".)
RATE_CHOICE = "each seed"
#: The rule of the records made before :data:`RATE_CHOICE`: one held-out sweep per model and task, at one seed,
#: whose choice every seed reused; such a record is read, never resumed.
RATE_CHOSEN_ONCE = "once per model"


@dataclass(frozen=True)
class Run:
    """One run of the graph: a model's pretraining at one seed (no ``task``), one of a seed's held-out runs, or a
    final run at one seed (from that seed's pretraining, where there is one)."""

    model: Hashable  # what the caller trains: a model spec, a grid's cell
    task: str | None = None
    learning_rate: float | None = None
    seed: int | None = None
    heldout: bool = False
    every_rate: bool = False  # a final run of ``every_rate``: its name holds its rate

    @property
    def name(self) -> str:
        """Its name within its model and task: ``mlm-seed<s>``, ``sweep-lr<rate>-seed<s>``, ``seed<s>`` (or
        ``lr<rate>-seed<s>`` for a final run at every rate)."""
        if self.task is None:
            return f"mlm-seed{self.seed}"
        if self.heldout:
            return f"sweep-lr{self.learning_rate:g}-seed{self.seed}"
        return f"lr{self.learning_rate:g}-seed{self.seed}" if self.every_rate else f"seed{self.seed}"


#: A seed's choice: the chosen rate, and every held-out rate's score (None for a run that failed or whose score is
#: undefined, never chosen; empty when one rate left nothing to choose).
Choice = tuple[float, dict[float, float | None]]


@dataclass
class Outcomes:
    """Every run's result, and every seed's choice keyed ``(model, task, seed)``."""

    results: dict[Run, dict[str, Any]] = field(default_factory=dict)
    choices: dict[tuple[Hashable, str, int], Choice] = field(default_factory=dict)

    def final_runs(self, model: Hashable, task: str, seeds: Sequence[int]) -> dict[int, dict[str, Any]]:
        """Seed → the result of its final run at its chosen rate (a graph run without ``every_rate``)."""
        return {seed: self.results[Run(model, task, self.choices[model, task, seed][0], seed)] for seed in seeds}

    def held_out_runs(self, model: Hashable, task: str, seed: int) -> dict[float, dict[str, Any]]:
        """Rate → the result of the seed's held-out run at that rate (none with one rate)."""
        return {rate: self.results[Run(model, task, rate, seed, heldout=True)]
                for rate in self.choices[model, task, seed][1]}  # fmt: skip


def choose(sweep: Mapping[float, HeldOutRun]) -> Choice:
    """A seed's choice among its held-out runs (:func:`~.verdicts.choose_learning_rate`), with every rate's
    score."""
    return choose_learning_rate(sweep), {rate: run.score if run.finished else None
                                         for rate, run in sorted(sweep.items())}  # fmt: skip


def run_protocol(
    replicates: Sequence[tuple[Hashable, int]],
    tasks: Sequence[str],
    learning_rates: Sequence[float],
    train: Callable[[Run], dict[str, Any]],
    held_out: Callable[[str, dict[str, Any]], HeldOutRun],
    *,
    pretrained: bool,
    workers: int = 1,
    every_rate: bool = False,
    finished: Callable[[Run, dict[str, Any]], None] | None = None,
) -> Outcomes:
    """Every run of ``replicates`` (``(model, seed)``, started in that order) on every task, ``workers`` at a time.
    ``train(run)`` trains or reads back one run (a picklable function with ``workers`` > 1); ``held_out(task,
    result)`` reads a held-out run's result as the choice sees it; ``finished(run, result)`` is called as each run
    ends, in this process.
    A run that raises ends the graph: runs not started are dropped, those training finish."""
    outcomes = Outcomes()
    rates = sorted(learning_rates)

    def chosen(model: Hashable, task: str, seed: int, choice: Choice) -> list[Run]:
        """Records the seed's choice; its final run follows (none with every rate's final runs, started already)."""
        outcomes.choices[model, task, seed] = choice
        return [] if every_rate else [Run(model, task, choice[0], seed)]

    def first_runs(model: Hashable, seed: int, task: str) -> list[Run]:
        """A replicate's first runs on a task: its held-out runs (with one rate, its final run)."""
        follow = [Run(model, task, rate, seed, every_rate=True) for rate in rates] if every_rate else []
        if len(rates) == 1:
            return follow + chosen(model, task, seed, (rates[0], {}))
        return follow + [Run(model, task, rate, seed, heldout=True) for rate in rates]

    def runs_after(run: Run) -> list[Run]:
        if run.task is None:  # pretrained: per task its held-out runs
            return [follow for task in tasks for follow in first_runs(run.model, run.seed, task)]
        if run.heldout:
            sweep = {rate: outcomes.results.get(Run(run.model, run.task, rate, run.seed, heldout=True))
                     for rate in rates}  # fmt: skip
            if all(result is not None for result in sweep.values()):
                return chosen(run.model, run.task, run.seed,
                              choose({rate: held_out(run.task, result) for rate, result in sweep.items()}))  # fmt: skip
        return []

    starts = [Run(model, seed=seed) for model, seed in replicates] if pretrained else [
        run for model, seed in replicates for task in tasks for run in first_runs(model, seed, task)]
    with executor(workers) as pool:
        pending = {}
        try:
            for run in starts:
                pending[pool.submit(train, run)] = run
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in [future for future in pending if future in done]:  # in the order submitted
                    run = pending.pop(future)
                    outcomes.results[run] = future.result()
                    if finished is not None:
                        finished(run, outcomes.results[run])
                    for follow in runs_after(run):
                        pending[pool.submit(train, follow)] = follow
        except BaseException:  # runs not started yet are dropped; those training finish and are recorded
            for future in pending:
                future.cancel()
            raise
    return outcomes
