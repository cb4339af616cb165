"""What a study's grids show: each task's calibration (its controls' verdicts, :func:`calibration_checks`) and its
pairs' verdicts, made only where that calibration passed (:func:`grid_comparisons`) — the rules of the main job's
report (:mod:`.evidence`) applied to the grid's records (:func:`~.grid.load_grid`).

A grid recorded before the calibration controls existed has none: its pairs keep their verdicts, and whoever shows
them says they are uncalibrated (the findings page keeps such records apart).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..storage.run_folder import FINGERPRINT_FILE
from . import verdicts
from .grid import load_grid, run_outcome

#: What each calibration control must show for its task to be calibrated (:func:`~.spec.calibration_pairs`).
CALIBRATION_PASSES = {"positive": verdicts.BELOW, "negative": verdicts.EQUIVALENT}


def cell_outcomes(grid: dict[str, Any], pair: str, role: str) -> dict[int, verdicts.RunOutcome]:
    """Seed → the final run of ``pair``'s ``role`` as the verdicts read it, scored against the test split's size
    and majority share (the task folder's ``data.json``)."""
    return {seed: run_outcome(record, grid["data"]) for seed, record in grid["cells"][pair][role]["seeds"].items()}


def calibration_checks(grid: dict[str, Any]) -> list[tuple[str, bool, verdicts.Verdict]]:
    """``(control, passed, verdict)`` for each calibration control the grid ran, as the main job judges its
    own (:func:`~.evidence.calibration_checks`): the positive control (every finished run counts: a model that
    cannot learn the task is what it shows) passes when it comes out below the BERT control; the negative control
    (the runs that learned, as every verdict counts) when it is equivalent to it within the margin. A control
    without two seeds to compare is not comparable, so it fails: no verdict before the calibration has run."""
    checks = []
    for kind, pair in grid["calibration"].items():
        counted = verdicts.finished_values if kind == "positive" else verdicts.learned_values
        verdict = verdicts.compare_pair(cell_outcomes(grid, pair, "variant"), cell_outcomes(grid, pair, "control"),
                                        counted=counted).per_protocol  # fmt: skip
        checks.append((kind, verdict.outcome == CALIBRATION_PASSES[kind], verdict))
    return checks


def calibration_summary(grid: dict[str, Any]) -> tuple[bool, str]:
    """Whether the grid is calibrated, and each control's verdict in words (``positive control below its
    control: …; negative control …``): the one account of a grid's calibration that a table or a command gives."""
    checks = calibration_checks(grid)
    return all(passed for _, passed, _ in checks), "; ".join(f"{kind} control {v.text}" for kind, _, v in checks)


def not_calibrated(grid: dict[str, Any]) -> str | None:
    """Why no pair of the grid gets a verdict (a calibration control failed); None when none did, or when the grid
    ran none."""
    failed = [f"the {kind} control failed ({verdict.text})" for kind, passed, verdict in calibration_checks(grid)
              if not passed]  # fmt: skip
    return f"this task is not calibrated: {'; '.join(failed)}" if failed else None


def grid_comparisons(grid_dir: Path, tasks: Sequence[str], keep: Callable[[str], bool] = lambda spec: True
                     ) -> dict[tuple[str, str], verdicts.PairComparison]:  # fmt: skip
    """(pair, task) → its comparison, for the study's pairs that ``keep`` keeps (never a calibration control's) and
    have final runs on both sides: the pairs over all ``tasks`` one family (Holm), each task's failures counted at
    its test split's majority share, and every pair of a task whose calibration failed not comparable, its reason
    given (:func:`not_calibrated`)."""
    pairs, guessing, why_not = {}, {}, {}
    for task in tasks:
        if not (grid_dir / task / FINGERPRINT_FILE).is_file():
            continue
        grid = load_grid(grid_dir / task)
        reason = not_calibrated(grid)
        for spec, roles in grid["cells"].items():
            if spec in grid["calibration"].values() or not keep(spec):
                continue
            if not roles["variant"]["seeds"] or not roles["control"]["seeds"]:
                continue
            pairs[spec, task] = tuple(cell_outcomes(grid, spec, role) for role in ("variant", "control"))
            guessing[spec, task] = grid["data"].get("test_majority_share")
            why_not[spec, task] = reason
    return verdicts.compare_pairs(pairs, guessing=guessing, why_not=why_not)
