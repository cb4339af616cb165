"""Markdown tables of the comparison grids, computed only from their result files.

Each row answers one question — does the variant's idea change accuracy against its matched control? —
with both means and their 95% intervals, the paired difference by seed with its interval (bold where
it excludes 0), the learning rates the held-out sweep chose, "did not learn" wherever a run predicted one
class and "at chance" wherever it scored below a guessing model's 95% bound (such runs are left out of means and
pairs, never averaged in).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from . import verdicts
from .grid import ROLES, load_grid, run_outcome
from .grid_evidence import calibration_summary
from .protocol import RATE_CHOICE, RATE_CHOSEN_ONCE
from .report import counted_rates_text
from .statistics import mean_interval, paired_difference_if_any

#: What each pair compares, in words (the control is the same model with the idea turned off).
PAIR_LABELS = {
    "macaron_bert": "Macaron layer (pre-LN) vs BERT layer (pre-LN)",
    "macaron_bert:layer_norm_position=post": "Macaron layer (post-LN) vs BERT layer (post-LN)",
    "mgk_bert": "MGK attention vs softmax (same heads, head_dim)",
    "transject": "TransJect (orthogonal attention + injective layers) vs softmax BERT layers, same embeddings",
    "node_transformer": "N-ODE blocks vs vanilla eq. (1) blocks (same modules)",
}
#: What each calibration control's pair compares (:func:`~.spec.calibration_pairs`), and what it must show.
CALIBRATION_LABELS = {
    "bert_control:attention_type=mean": "calibration, positive: no token mixing vs BERT control (must be below)",
    "bert_control (other seeds)": "calibration, A/A: BERT control from other seeds vs BERT control (must be "
    "equivalent)",
}
#: The pairs every comparison runs: each variant at its default (paper) settings, and Macaron at both
#: LayerNorm placements; each is compared with its matched control (``core.composition.matched_control``).
PAIRS = tuple(PAIR_LABELS)
#: The papers' numbers for the same comparison, where they report one (accuracy %, theirs vs their baseline).
PAPER_NUMBERS = {
    ("mgk_bert", "listops"): "LRA ListOps (2K tokens): MGK 2 heads 36.88 vs softmax 2 heads 36.76 (Table 1)",
    ("mgk_bert", "imdb"): "LRA Text (byte-level IMDb, 4K): MGK 2 heads 65.37 vs softmax 2 heads 64.90 (Table 1)",
    ("transject", "imdb"): "IMDb (512 tokens): TransJect 88.1 vs Transformer 81.3 (Table 2)",
    ("transject", "ag_news"): "AG News (256 tokens): TransJect 88.8 vs Transformer 88.8 (Table 2)",
    ("transject", "listops"): "ListOps (1024 tokens): TransJect 48.3 vs Transformer 36.4 (Table 3)",
}


def summarize_role(role: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    """Accuracies of the seeds that learned (:func:`~.verdicts.run_status`), and the seeds that did not: one
    class, at chance (below a guessing model's 95% bound on the test split, whose size and majority share
    ``data`` gives: the task folder's ``data.json``), or failed (a non-finite stop or a solver failure) and
    named by their record's status. A role with fewer seed records than its grid runs (``planned_seeds``, from
    :func:`~.grid.load_grid`) is a cell still running: its text says how many seeds it reads so far."""
    seeds = {seed: run_outcome(record, data) for seed, record in role["seeds"].items()}
    statuses = {seed: verdicts.run_status(outcome) for seed, outcome in seeds.items()}
    learned = {s: outcome.value for s, outcome in seeds.items() if statuses[s] == verdicts.LEARNED}
    failed = sorted(s for s in seeds if s not in learned)
    crashed = [s for s in failed if statuses[s] == verdicts.FAILED]
    # why the other runs do not count, in the order run_status tests them; with none learned, the first leads
    reasons = [r for r in (verdicts.ONE_CLASS, verdicts.ON_PLATEAU, verdicts.AT_CHANCE) if r in statuses.values()]
    if learned:
        text, notes = mean_interval(list(learned.values())).mean_text(100), reasons
    else:
        chance = data.get("test_majority_share", math.nan)
        text, notes = (f"{reasons[0]} (chance {100 * chance:.1f})", reasons[1:]) if reasons else ("", [])
    text += "".join(f" ({list(statuses.values()).count(r)}/{len(seeds)} seeds {r})" for r in notes)
    if crashed:
        statuses_text = f"{len(crashed)}/{len(seeds)} seeds {', '.join(sorted({seeds[s].failed for s in crashed}))}"
        text = f"{text} ({statuses_text})" if text else statuses_text
    if len(seeds) < role["planned_seeds"]:
        text += f" ({len(seeds)} of {role['planned_seeds']} seeds so far)"
    return {"learned": learned, "failed": failed, "text": text}


def difference_text(variant: dict[int, float], control: dict[int, float]) -> str:
    interval = paired_difference_if_any(variant, control)
    return "—" if interval is None else interval.difference_text(100)


def task_grids(grid_dir: Path, tasks: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """``(task, load_grid(...))`` for each task that has a grid folder, in ``tasks`` order."""
    present = [task for task in tasks if (grid_dir / task / "run_fingerprint.json").is_file()]
    return [(task, load_grid(grid_dir / task)) for task in present]


def rate_text(chosen: float, swept: list[float]) -> str:
    """The chosen learning rate, marked when it is at an edge of the sweep (``*`` the largest, ``†`` the
    smallest), where a rate beyond the sweep might have scored higher."""
    mark = "*" if chosen == max(swept) else "†" if chosen == min(swept) else ""
    return f"{chosen:g}{mark}"


def chosen_rates_text(cell: dict[str, Any], swept: list[float]) -> str:
    """The rates a cell's seeds were trained at as its sweeps chose them (:func:`rate_text`), each with how many
    seeds chose it when they differ; ``—`` before any choice."""
    return counted_rates_text(cell["chosen"].values(), lambda rate: rate_text(rate, swept))


def comparison_table(grid_dir: Path, tasks: list[str]) -> str:
    """The answer table: one row per task and pair."""
    lines = [
        "| task | comparison | variant acc. % | control acc. % | variant − control (paired, 95% CI) | chosen lr "
        "(variant / control) | paper (their setting) |",
        "|---|---|---:|---:|---:|---|---|",
    ]
    grids = task_grids(grid_dir, tasks)
    for task, grid in grids:
        for spec, roles in grid["cells"].items():
            label = {**PAIR_LABELS, **CALIBRATION_LABELS}.get(spec, spec)
            if not roles["variant"]["seeds"] or not roles["control"]["seeds"]:
                lines.append(f"| {task} | {label} | not run yet | not run yet | — | | |")
                continue
            variant, control = (summarize_role(roles[r], grid["data"]) for r in ROLES)
            swept = grid["settings"]["learning_rates"]
            rates = " / ".join(chosen_rates_text(roles[r], swept) for r in ROLES)
            lines.append(
                f"| {task} | {label} | {variant['text']} | {control['text']} | "
                f"{difference_text(variant['learned'], control['learned'])} | {rates} | "
                f"{PAPER_NUMBERS.get((spec.partition(':')[0], task), '—')} |"
            )
    lines += ["", "\\* the largest learning rate swept: a larger one might have scored higher on the held-out slice; "
              "† the smallest: a smaller one might have."]
    lines += [calibration_text(task, grid) for task, grid in grids if grid["calibration"]]
    uncalibrated = [task for task, grid in grids if not grid["calibration"]]
    if uncalibrated:  # ``calibration = false``, or a grid made before every study ran its controls
        lines.append(f"\nNo calibration controls ran on {', '.join(uncalibrated)}: nothing shows that this budget "
                     "sees an effect the size of no token mixing's, or that its seeds' noise stays inside the margin.")
    return "\n".join(lines) + "\n"


def calibration_text(task: str, grid: dict[str, Any]) -> str:
    """Whether a task's grid is calibrated, each control's verdict with it
    (:func:`~.grid_evidence.calibration_summary`); a task that is not makes no verdict."""
    passed, said = calibration_summary(grid)
    if passed:
        return f"\n{task}: calibrated ({said})."
    return f"\n{task}: **not calibrated** ({said}): no pair on it gets a verdict."


def sweep_table(grid_dir: Path, tasks: list[str]) -> str:
    """Held-out accuracy of every swept learning rate (the chosen one in bold), and the training speed."""
    lines = [
        "| task | comparison | role | held-out acc. % by learning rate | median train tokens/s (load-dependent) |",
        "|---|---|---|---|---:|",
    ]
    for task, grid in task_grids(grid_dir, tasks):
        for spec, roles in grid["cells"].items():
            for role_name, role in roles.items():
                finished = [r for r in role["seeds"].values() if r["status"] == "finished"]
                speeds = sorted(r["train_tokens_per_second"] for r in finished)
                speed = f"{speeds[len(speeds) // 2]:,.0f}" if speeds else "—"
                once = role["rate_choice"] == RATE_CHOSEN_ONCE  # one sweep, its choice every seed's
                for seed, sweep in sorted(role["sweeps"].items()):
                    chosen = next(iter(role["chosen"].values()), None) if once else role["chosen"].get(seed)
                    cells = []
                    for lr, record in sorted(sweep.items()):
                        ran = record["status"] == "finished"
                        score = f"{100 * record['accuracy']:.1f}" if ran else record["status"]
                        cell = f"{lr:g}: {score}"
                        cells.append(f"**{cell}**" if lr == chosen else cell)
                    who = role_name if once else f"{role_name}, seed {seed}"
                    lines.append(f"| {task} | {spec} | {who} | {'; '.join(cells)} | {speed} |")
    return "\n".join(lines) + "\n"


def swept_at(settings: dict[str, Any]) -> str:
    """When a grid's sweep ran: at each seed (:data:`~.protocol.RATE_CHOICE`), or once, at its ``sweep_seed``."""
    return "at each seed" if settings.get("rate_choice") == RATE_CHOICE else f"at seed {settings.get('sweep_seed', 0)}"


def settings_text(grid_dir: Path, tasks: list[str]) -> str:
    """One line per task: data split, budget, sizes, swept rates and seeds, from the grid's fingerprint."""
    lines = []
    for task, grid in task_grids(grid_dir, tasks):
        s, d = grid["settings"], grid["data"]
        sizes = ", ".join(f"{k} {v}" for k, v in s["sizes"].items())
        lines.append(
            f"- **{task}**: {d.get('split')}; {d.get('held_out_examples')} training examples held out for the "
            f"learning-rate sweep; {s['max_length']} tokens ({100 * d.get('truncated_train_share', 0):.0f}% of "
            f"training texts truncated), WordPiece vocabulary {d.get('tokenizer_vocab_size')} trained on the "
            f"training split; {s['steps']} steps of {s['batch_size']}, AdamW, warmup {s['warmup_ratio']:g} then "
            f"linear decay; learning rates {', '.join(f'{x:g}' for x in s['learning_rates'])} swept "
            f"{swept_at(s)}; seeds {', '.join(map(str, s['seeds']))}; {sizes}; chance (majority class of the "
            f"test split) {100 * d.get('test_majority_share', math.nan):.1f}%."
        )
    return "\n".join(lines) + "\n"
