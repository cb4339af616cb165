"""The report of a study with conditions (``never_from_scratch``, :mod:`.study`): two answers, computed only from
the grids' result files under ``study_dir/<condition>/<task>``, each condition against ``scratch``.

* :func:`payoff_table` — *does pretraining pay off?* Per task and model (each variant and each matched control),
  the condition's accuracy minus the same model's from scratch, paired by seed (Amos, Berant & Gupta, ICLR 2024,
  predict large gains for every architecture).
* :func:`verdict_table` — *does it change the verdicts?* Per task and pair, variant − control from scratch beside
  variant − control in the condition, each paired by seed, with the papers' claims.
* :func:`tally_table` — how many of those differences exclude 0 per condition and answer, beside the chance
  that at least one would with no true difference anywhere (the multiplicity a reader should weigh them by).
* :func:`scratch_table` — variant − control from scratch alone, per task and pair: what the study's scratch
  condition says before (and besides) any pairing with a pretrained one.
* :func:`plateau_exit_table` — when each final run left its starting loss (:func:`~.verdicts.left_plateau_at`),
  per condition, pair and role: whether runs that did not learn were cut short by the budget;
  :func:`plateau_exit_counts` counts them per condition.
* :func:`compute_table` — what each cell cost (runs trained, minutes of pretraining and fine-tuning), a cell
  copied from its twin (the same model, :meth:`~.grid.Grid.twins`) named as such.

Every difference carries its 95% interval (bold where it excludes 0) and the minimum detectable difference its
seeds allow (:meth:`~.statistics.Interval.detectable_difference`); a run that predicted one class, scored at
chance or failed is named and left out of the pairs (:func:`~.tables.summarize_role`), never averaged in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from hf_variants.lab.grid import PRETRAINING_STOPPED, ROLES, run_outcome
from hf_variants.lab.statistics import Interval, at_least_k_of_n, paired_difference_if_any
from hf_variants.lab.tables import PAIR_LABELS, PAPER_NUMBERS, chosen_rates_text, summarize_role, task_grids
from hf_variants.lab.verdicts import LEARNED, left_plateau_at, run_status

#: The condition every other one is compared with.
SCRATCH = "scratch"


def conditions(study_dir: Path) -> list[str]:
    """The study's conditions on disk other than ``scratch``, in name order (none before the study ran)."""
    if not study_dir.is_dir():
        return []
    return sorted(p.name for p in study_dir.iterdir() if p.is_dir() and p.name != SCRATCH)


def difference_with_power(variant: dict[int, float], control: dict[int, float]) -> tuple[str, str]:
    """``(paired difference ×100 with its interval, minimum detectable difference ×100)``; ``—`` without pairs."""
    interval: Interval | None = paired_difference_if_any(variant, control)
    if interval is None:
        return "—", "—"
    detectable = interval.detectable_difference()
    return interval.difference_text(100), "—" if detectable is None else f"{100 * detectable:.1f}"


def learned_by_role(grid: dict, spec: str, role: str) -> dict:
    return summarize_role(grid["cells"][spec][role], grid["data"])


def paired_cells(study_dir: Path, tasks: list[str]) -> Iterator[tuple[str, str, str, dict, dict]]:
    """``(condition, task, pair, grid in the condition, grid from scratch)`` for every pair of which both
    conditions have finished a role's cell (some seeds)."""
    scratch = dict(task_grids(study_dir / SCRATCH, tasks))
    for condition in conditions(study_dir):
        for task, grid in task_grids(study_dir / condition, tasks):
            for spec in grid["cells"]:
                if task not in scratch or spec not in scratch[task]["cells"]:
                    continue
                cells = (grid["cells"][spec], scratch[task]["cells"][spec])
                if any(all(cell[role]["seeds"] for cell in cells) for role in ROLES):
                    yield condition, task, spec, grid, scratch[task]


def table(study_dir: Path, tasks: list[str], header: Callable[[str], list[str]],
          rows: Callable[[str, str, dict, dict], list[str]]) -> str:  # fmt: skip
    """One markdown table per condition: ``header(condition)``, then ``rows(task, pair, grid, scratch grid)``."""
    lines, current = [], None
    for condition, task, spec, grid, scratch in paired_cells(study_dir, tasks):
        if condition != current:
            lines += ([""] if current else []) + header(condition)
            current = condition
        lines += rows(task, spec, grid, scratch)
    return "\n".join(lines) + "\n"


def payoff_table(study_dir: Path, tasks: list[str]) -> str:
    """Condition minus scratch per task and model (each variant and each control), paired by seed."""

    def header(condition: str) -> list[str]:
        return [f"| task | model | scratch acc. % | {condition} acc. % | {condition} − scratch (paired, 95% CI) | "
                "detectable (80% power) |", "|---|---|---:|---:|---:|---:|"]  # fmt: skip

    def rows(task: str, spec: str, grid: dict, scratch: dict) -> list[str]:
        lines = []
        for role in ROLES:
            if not (grid["cells"][spec][role]["seeds"] and scratch["cells"][spec][role]["seeds"]):
                continue
            after, before = learned_by_role(grid, spec, role), learned_by_role(scratch, spec, role)
            difference, detectable = difference_with_power(after["learned"], before["learned"])
            model = spec if role == "variant" else f"control of {spec}"
            lines.append(f"| {task} | {model} | {before['text']} | {after['text']} | {difference} | {detectable} |")
        return lines

    return table(study_dir, tasks, header, rows)


def verdict_table(study_dir: Path, tasks: list[str]) -> str:
    """Variant − control from scratch beside variant − control in each condition, per task and pair; a side
    whose two roles have not both finished a seed reads "not run yet", the other side still its verdict."""

    def header(condition: str) -> list[str]:
        return [f"| task | comparison | variant − control, scratch | detectable | variant − control, {condition} | "
                "detectable | paper (their setting) |", "|---|---|---:|---:|---:|---:|---|"]  # fmt: skip

    def side(cells: dict, spec: str) -> tuple[str, str]:
        if not all(cells["cells"][spec][role]["seeds"] for role in ROLES):
            return "not run yet", "—"
        return difference_with_power(*(learned_by_role(cells, spec, role)["learned"] for role in ROLES))

    def rows(task: str, spec: str, grid: dict, scratch: dict) -> list[str]:
        before, after = side(scratch, spec), side(grid, spec)
        paper = PAPER_NUMBERS.get((spec.partition(":")[0], task), "—")
        return [f"| {task} | {PAIR_LABELS.get(spec, spec)} | {' | '.join(before)} | {' | '.join(after)} | {paper} |"]

    return table(study_dir, tasks, header, rows)


def tally_table(study_dir: Path, tasks: list[str], level: float = 0.05) -> str:
    """Per condition and answer, how many differences have an interval, how many of those exclude 0, and the
    chance that at least that many of ``n`` independent 95% intervals would exclude 0 if no model differed from any
    other (the binomial tail, :func:`~.statistics.at_least_k_of_n`). Verdicts (variant − control) from scratch too;
    pay-offs (condition − scratch, each variant and each control) per condition. A difference read by two pairs
    (a cell copied from its twin) counts once; a verdict whose control did not learn in some seed is counted
    apart, since a lead over a control that failed measures the control's failure, not the variant's idea."""
    counts: dict[tuple[str, str], list[int]] = {}
    seen: set[tuple] = set()

    def count(condition: str, answer: str, a: dict[int, float], b: dict[int, float], control_failed: bool = False,
              ) -> None:  # fmt: skip
        interval = paired_difference_if_any(a, b)
        identity = (condition, answer, tuple(sorted(a.items())), tuple(sorted(b.items())))
        if interval is None or identity in seen:
            return
        seen.add(identity)
        tally = counts.setdefault((condition, answer), [0, 0, 0])
        if control_failed:
            tally[2] += 1
            return
        tally[0] += 1
        tally[1] += interval.excludes_zero

    for condition in [SCRATCH, *conditions(study_dir)]:
        for _, grid in task_grids(study_dir / condition, tasks):
            for spec, cells in grid["cells"].items():
                if all(cells[role]["seeds"] for role in ROLES):
                    variant, control = (learned_by_role(grid, spec, role) for role in ROLES)
                    failed = len(control["learned"]) < len(cells["control"]["seeds"])
                    count(condition, "variant − control", variant["learned"], control["learned"], failed)
    for condition, _, spec, grid, scratch in paired_cells(study_dir, tasks):
        for role in ROLES:
            if grid["cells"][spec][role]["seeds"] and scratch["cells"][spec][role]["seeds"]:
                after, before = learned_by_role(grid, spec, role), learned_by_role(scratch, spec, role)
                count(condition, f"{condition} − scratch", after["learned"], before["learned"])
    lines = ["| condition | difference | with an interval | excluding 0 | chance of at least that many with no true "
             "difference | left out: the control did not learn in some seed |",
             "|---|---|---:|---:|---:|---:|"]  # fmt: skip
    for (condition, answer), (n, k, apart) in counts.items():
        chance = 100 * at_least_k_of_n(k, n, level)
        lines.append(f"| {condition} | {answer} | {n} | {k} | {f'{chance:.1f}%' if chance >= 0.1 else '< 0.1%'} | "
                     f"{apart if answer == 'variant − control' else '—'} |")
    return "\n".join(lines) + "\n"


def scratch_table(study_dir: Path, tasks: list[str]) -> str:
    """Variant − control from scratch per task and pair (paired by seed, with its detectable difference and the
    chosen rates); a pair whose two cells have not both finished a seed is "not run yet"."""
    lines = ["| task | comparison | variant acc. % | control acc. % | variant − control (paired, 95% CI) | "
             "detectable (80% power) | chosen lr (variant / control) | paper (their setting) |",
             "|---|---|---:|---:|---:|---:|---|---|"]  # fmt: skip
    for task, grid in task_grids(study_dir / SCRATCH, tasks):
        for spec, cells in grid["cells"].items():
            label = PAIR_LABELS.get(spec, spec)
            if not all(cells[role]["seeds"] for role in ROLES):
                lines.append(f"| {task} | {label} | not run yet | not run yet | — | — | | |")
                continue
            variant, control = (learned_by_role(grid, spec, role) for role in ROLES)
            difference, detectable = difference_with_power(variant["learned"], control["learned"])
            rates = " / ".join(chosen_rates_text(cells[role], grid["settings"]["learning_rates"]) for role in ROLES)
            paper = PAPER_NUMBERS.get((spec.partition(":")[0], task), "—")
            lines.append(f"| {task} | {label} | {variant['text']} | {control['text']} | {difference} | {detectable} | "
                         f"{rates} | {paper} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def pretraining_seconds(record: dict) -> float:
    """The time of a run's self-pretraining: the engine's timer (a pretraining resumed in another session counts
    its whole run), or, for one that stopped on a non-finite step or a solver failure (no engine result), the
    run's wall time until it stopped."""
    if record.get("pretraining"):
        return record["pretraining"].get("train_seconds") or 0.0
    stopped = str(record.get("error", "")).startswith(PRETRAINING_STOPPED)
    return (record.get("wall_seconds") or 0.0) if stopped else 0.0


def cell_compute(cell: dict) -> dict[str, float | int | str]:
    """What one role's cell cost, summed over its runs (sweep and seeds): runs trained and minutes of pretraining
    (:func:`pretraining_seconds`) and of fine-tuning. The held-out runs of a seed share one pretraining (on
    the fit split), counted once. A cell copied from its twin (``same_model_as``, :meth:`~.grid.Grid.twins`)
    names the twin."""
    records = [*(record for sweep in cell["sweeps"].values() for record in sweep.values()), *cell["seeds"].values()]
    trained = [record for record in records if "same_model_as" not in record]
    pretrainings: dict[tuple[bool, int], float] = {}  # (held-out run, seed): one pretraining folder of the grid
    for record in trained:
        key = (record.get("phase") == "sweep", record.get("seed", 0))
        pretrainings[key] = max(pretrainings.get(key, 0.0), pretraining_seconds(record))
    return {
        "runs": len(trained),
        "pretraining": sum(pretrainings.values()) / 60,
        "fine_tuning": sum(record.get("train_seconds") or 0.0 for record in trained) / 60,
        "copied_from": ", ".join(sorted({record["same_model_as"] for record in records if "same_model_as" in record})),
    }


def cost_text(costs: list[dict], key: str) -> str:
    """``variant / control`` of one :func:`cell_compute` quantity; a copied cell names its twin."""
    return " / ".join(f"copied from {cost['copied_from']}" if cost["copied_from"] and not cost["runs"]
                      else f"{cost[key]:.0f}" for cost in costs)  # fmt: skip


def compute_table(study_dir: Path, tasks: list[str]) -> str:
    """The compute of every cell on disk, per condition, task and pair (variant / control): runs trained and
    minutes of pretraining (none from scratch) and fine-tuning — what the study's other cells will cost."""
    lines = ["| condition | task | pair | runs trained | pretraining, min | fine-tuning, min |",
             "|---|---|---|---:|---:|---:|"]  # fmt: skip
    for condition in [SCRATCH, *conditions(study_dir)]:
        for task, grid in task_grids(study_dir / condition, tasks):
            for spec, cells in grid["cells"].items():
                costs = [cell_compute(cells[role]) for role in ROLES]
                if any(cost["runs"] or cost["copied_from"] for cost in costs):
                    pretraining = "—" if condition == SCRATCH else cost_text(costs, "pretraining")
                    lines.append(f"| {condition} | {task} | {spec} | {cost_text(costs, 'runs')} | {pretraining} | "
                                 f"{cost_text(costs, 'fine_tuning')} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def plateau_exit_table(study_dir: Path, task: str) -> str:
    """Per condition, pair and role on one task, each final seed's accuracy and the step at which its training
    loss left its starting plateau (:func:`~.verdicts.left_plateau_at`; ``never`` within its budget of steps).
    A seed recorded without a loss curve (runs before 2026-11-27) reads ``no curve``; a cell copied from its twin
    (the same model, :meth:`~.grid.Grid.twins`) names it."""
    lines = ["| condition | pair | role | left the plateau at step, by seed | accuracy %, by seed |",
             "|---|---|---|---|---|"]  # fmt: skip
    for condition in [SCRATCH, *conditions(study_dir)]:
        for _, grid in task_grids(study_dir / condition, [task]):
            for spec, cells in grid["cells"].items():
                for role in ROLES:
                    seeds = sorted(cells[role]["seeds"].items())
                    if not seeds:
                        continue
                    steps = [f"{seed}: {exit_text(record)}" for seed, record in seeds]
                    scores = [f"{seed}: {100 * record['accuracy']:.1f}" for seed, record in seeds
                              if record.get("accuracy") is not None]  # fmt: skip
                    twins = sorted({record["same_model_as"] for _, record in seeds if "same_model_as" in record})
                    model = f"{role} (the runs of {', '.join(twins)})" if twins else role
                    lines.append(f"| {condition} | {spec} | {model} | {' · '.join(steps)} | {' · '.join(scores)} |")
    return "\n".join(lines) + "\n"


def plateau_exit_counts(study_dir: Path, task: str) -> str:
    """Per condition on one task, the counts behind :func:`plateau_exit_table`: the distinct final runs (a cell
    copied from its twin counted once, with its twin), how many left the plateau and between which steps, how
    many never left within their budget and how many of those did not learn (:func:`~.verdicts.run_status`),
    how many left it and still did not learn, how many stopped (a non-finite value, a solver failure) and how
    many were recorded without a loss curve (runs before 2026-11-27)."""
    lines = ["| condition | distinct final runs | left the plateau | at steps | never left | of which did not learn | "
             "left, yet did not learn | stopped | no curve |",
             "|---|---:|---:|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for condition in [SCRATCH, *conditions(study_dir)]:
        left: list[int] = []
        never = never_unlearned = left_unlearned = stopped = no_curve = 0
        for record, data in distinct_final_runs(study_dir / condition, task):
            if record.get("status", "finished") != "finished":
                stopped += 1
            elif not record.get("curve"):
                no_curve += 1
            else:
                learned = run_status(run_outcome(record, data)) == LEARNED
                step = left_plateau_at(record["curve"])
                if step is None:
                    never, never_unlearned = never + 1, never_unlearned + (not learned)
                else:
                    left.append(step)
                    left_unlearned += not learned
        runs = len(left) + never + stopped + no_curve
        if runs:
            steps = "—" if not left else str(left[0]) if min(left) == max(left) else f"{min(left)}–{max(left)}"
            lines.append(f"| {condition} | {runs} | {len(left)} | {steps} | {never} | {never_unlearned} | "
                         f"{left_unlearned} | {stopped} | {no_curve} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def distinct_final_runs(grid_dir: Path, task: str) -> Iterator[tuple[dict, dict]]:
    """``(seed record, the task folder's data)`` for each final run trained in the grid, a cell copied from its
    twin (``same_model_as``) left out."""
    for _, grid in task_grids(grid_dir, [task]):
        for cells in grid["cells"].values():
            for role in ROLES:
                for record in cells[role]["seeds"].values():
                    if "same_model_as" not in record:
                        yield record, grid["data"]


def exit_text(record: dict) -> str:
    """One run's :func:`~.verdicts.left_plateau_at` step, ``never (of N)``, ``no curve``, or a stopped run's status."""
    if record.get("status", "finished") != "finished":
        return record["status"]
    if not record.get("curve"):
        return "no curve"
    step = left_plateau_at(record["curve"])
    return f"never (of {record.get('steps', '?')})" if step is None else str(step)
