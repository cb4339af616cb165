"""The findings page (docs/findings.md) and its forest plot (docs/findings/forest.svg), rendered from the committed
records by ``python tools/render_tables.py``: every pair of every condition (the main job, the self-pretraining
study from scratch and self-pretrained, the same at GPU size) through the one verdict rule
(:func:`hf_variants.lab.verdicts.compare_pairs`), beside what the idea's paper claims in its own setting."""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from records import unpacked
from which_variant import VARIANTS, main_job_comparisons

from hf_variants.lab import verdicts
from hf_variants.lab.grid_evidence import grid_comparisons
from hf_variants.lab.report import verdict_words

ROOT = Path(__file__).resolve().parent.parent
DOCS, EXPERIMENTS = ROOT / "docs", ROOT / "experiments"
FINDINGS_PAGE = DOCS / "findings.md"
FOREST = DOCS / "findings" / "forest.svg"
STUDY, GPU_STUDY = EXPERIMENTS / "never_from_scratch", EXPERIMENTS / "never_from_scratch_gpu"
STUDY_TASKS = ["ag_news", "listops", "imdb", "sst2"]
MODEL_BENCHMARK = ROOT / "benchmarks" / "records" / "model_benchmark.json"


def records_folder(folder: str) -> Path:
    """Where a condition's records are read: a main-job report's folder as committed, a study's condition from its
    unpacked JSON-lines records (``tools/records.py``)."""
    parts = Path(folder).parts
    if parts[:2] == ("experiments", "compare"):
        return ROOT / folder
    return unpacked(ROOT.joinpath(*parts[:2])).joinpath(*parts[2:])


@dataclass(frozen=True)
class Claim:
    """What a paper claims for its idea against its baseline, in the paper's own setting."""

    text: str
    direction: int  # +1: the idea helps; −1: it hurts; 0: no difference claimed
    points: float | None = None  # the claimed effect on this task, in points, where the paper ran it

    @property
    def short(self) -> str:
        """The claim in a table cell: the claimed effect on this task, else the claimed direction in general."""
        if self.points is not None:
            return f"{self.points:+.1f} ({self.text.rpartition('(')[2].rstrip(')')})"
        return {1: "gain", -1: "loss", 0: "none"}[self.direction] + " elsewhere"


#: (idea, task) → the paper's claim on that task; (idea, None) → its claim in general.
CLAIMS: dict[tuple[str, str | None], Claim] = {
    ("macaron_bert", None): Claim("GLUE average 79.7 vs 77.4 after BERT-base pretraining (Table 2)", +1),
    ("macaron_bert", "sst2"): Claim("SST-2 94.0 vs 92.8 after BERT-base pretraining (Table 2)", +1, 1.2),
    ("mgk_bert", None): Claim("LRA average 61.36 vs 60.25 at 2 heads (Table 1)", +1),
    ("mgk_bert", "listops"): Claim("LRA ListOps 36.88 vs 36.76 at 2 heads (Table 1)", +1, 0.12),
    ("mgk_bert", "imdb"): Claim("LRA byte-level IMDb 65.37 vs 64.90 at 2 heads (Table 1)", +1, 0.47),
    ("transject", None): Claim("+3.1 (short) and +11 (long sequences) points on average (abstract of the reviewed "
                               "manuscript; the published version: up to +6.8 and +5.9)", +1),
    ("transject", "imdb"): Claim("IMDb 88.1 vs 81.3 at 512 tokens (Table 2)", +1, 6.8),
    ("transject", "ag_news"): Claim("AG News 88.8 vs 88.8 (Table 2)", 0, 0.0),
    ("transject", "listops"): Claim("ListOps 48.3 vs 36.4 at 1,024 tokens (Table 3)", +1, 11.9),
    ("node_transformer", None): Claim("less accurate and slower than the Transformer on parity at equal weights "
                                      "(Table 1)", -1),
}
#: Where a paper's claimed effect on a task lies against this row's 95% interval, at this size (:func:`reading`).
INSIDE, ABOVE_IT, BELOW_IT = "inside the interval", "above the interval", "below the interval"
ELSEWHERE, NO_INTERVAL, NO_CLAIM = "claimed elsewhere", "no interval", "no claim"


def claim_of(spec: str, task: str) -> Claim | None:
    idea = spec.partition(":")[0]
    if idea == "mgk_bert" and "attention_type=mlk" in spec:
        return None  # MLK's paper compares it with linear attention; its matched control here is softmax
    return CLAIMS.get((idea, task), CLAIMS.get((idea, None)))


def reading(verdict: verdicts.Verdict, claim: Claim | None) -> str:
    """Where the paper's claimed effect on this task lies against the row's 95% interval: *inside* it (the data
    allow it at this size), *above* or *below* it (at this size the difference is smaller or larger than claimed).
    No row "supports" or "contradicts" a claim: the paper made it in its own setting (size, tokens, pretraining),
    which the row did not run. A claim made only on other tasks, or a row without an interval, is said so."""
    if claim is None:
        return NO_CLAIM
    if claim.points is None:
        return ELSEWHERE
    d = verdict.difference
    if d is None or not d.spread:
        return NO_INTERVAL
    claimed = claim.points / 100
    return ABOVE_IT if claimed > d.high else BELOW_IT if claimed < d.low else INSIDE


def main_job(folder: str) -> Callable[[], dict[tuple[str, str], verdicts.PairComparison]]:
    return lambda: main_job_comparisons(EXPERIMENTS / "compare" / folder / "results.json")


def study(folder: Path, condition: str) -> Callable[[], dict[tuple[str, str], verdicts.PairComparison]]:
    return lambda: grid_comparisons(unpacked(folder) / condition, STUDY_TASKS,
                                    keep=lambda spec: spec.partition(":")[0] in VARIANTS)  # fmt: skip


#: Each condition: its label, where its records are, and its comparisons (one Holm family each). The main job's
#: rows are its default run and its 16-seed run (``--preset power``), each pair at the rates each seed chose.
CONDITIONS = [
    ("main job, default", "experiments/compare/default", main_job("default")),
    ("main job, 16 seeds", "experiments/compare/power", main_job("power")),
    ("from scratch", "experiments/never_from_scratch/scratch", study(STUDY, "scratch")),
    ("self-pretrained", "experiments/never_from_scratch/self_pretrained", study(STUDY, "self_pretrained")),
    ("from scratch, GPU size", "experiments/never_from_scratch_gpu/scratch", study(GPU_STUDY, "scratch")),
    ("self-pretrained, GPU size", "experiments/never_from_scratch_gpu/self_pretrained",
     study(GPU_STUDY, "self_pretrained")),
]  # fmt: skip
#: The conditions whose records ran under the current protocol (each seed's own rate choice, or one rate common to
#: both sides; the margin declared before the first run; both calibration controls): a table of their own, apart from
#: the older records'. ``tests/test_findings.py`` checks each against its record.
CURRENT_PROTOCOL = ("main job, default", "main job, 16 seeds")


@dataclass(frozen=True)
class Finding:
    condition: str
    spec: str
    task: str
    comparison: verdicts.PairComparison

    @property
    def verdict(self) -> verdicts.Verdict:
        return self.comparison.per_protocol

    @property
    def reading(self) -> str:
        return reading(self.verdict, claim_of(self.spec, self.task))


def findings() -> list[Finding]:
    """Every pair of every condition whose records are committed, in the order of :data:`CONDITIONS`."""
    found = []
    for label, folder, comparisons in CONDITIONS:
        if not records_folder(folder).exists():
            continue
        for (spec, task), comparison in comparisons().items():
            found.append(Finding(label, spec, task, comparison))
    return found


def effect_text(verdict: verdicts.Verdict | None) -> str:
    d = None if verdict is None else verdict.difference
    return "—" if d is None else d.difference_text(100, bold=False) if d.spread else f"{100 * d.mean:+.1f}"


def counting_every_run(row: Finding) -> str:
    """The intention-to-treat verdict and interval where it reads otherwise than the paired one; empty where not."""
    itt = row.comparison.intention_to_treat
    if itt is None or itt.outcome == row.verdict.outcome:
        return ""
    return f"{verdict_words(itt)}, {effect_text(itt)}"


def table(rows: list[Finding]) -> str:
    lines = ["| idea | task | condition | difference [95% interval] | learned | verdict | counting every run | "
             "paper's claim | claim vs interval |",
             "|---|---|---|---:|---|---|---|---|---|"]  # fmt: skip
    for row in rows:
        learned = ", ".join(f"{k}/{n}" for k, n in row.comparison.learned.values())
        claim = claim_of(row.spec, row.task)
        lines.append(f"| {row.spec} | {row.task} | {row.condition} | {effect_text(row.verdict)} | {learned} | "
                     f"{verdict_words(row.verdict)} | {counting_every_run(row)} | "
                     f"{'—' if claim is None else claim.short} | {'—' if row.reading == ELSEWHERE else row.reading} |")
    return "\n".join(lines) + "\n"


def forest_svg(rows: list[Finding], limit: float = 25.0) -> str:
    """One panel per condition: each pair's 95% interval (a line, its mean a dot) against 0 (solid) and ±margin
    (dashed), in points, coloured by verdict; an interval past ±``limit`` ends in an arrow at the edge (and a mean
    past it has no dot)."""
    width, label_width, row_height, top = 760, 300, 16, 24
    plot = width - label_width - 20
    conditions = list(dict.fromkeys(row.condition for row in rows))

    def x(points: float) -> float:
        return label_width + plot * (max(-limit, min(limit, points)) + limit) / (2 * limit)

    colours = {verdicts.ABOVE: "#1a7f37", verdicts.BELOW: "#cf222e", verdicts.EQUIVALENT: "#0969da"}
    parts, y = [], 0.0
    for condition in conditions:
        group = [row for row in rows if row.condition == condition]
        margin = 100 * group[0].verdict.margin
        height = top + row_height * len(group) + 8
        parts.append(f'<text x="4" y="{y + 16:.0f}" font-weight="bold">{escape(condition)}</text>')
        for value, dash in ((0.0, ""), (-margin, ' stroke-dasharray="4 3"'), (margin, ' stroke-dasharray="4 3"')):
            parts.append(f'<line x1="{x(value):.1f}" y1="{y + top - 6:.0f}" x2="{x(value):.1f}" '
                         f'y2="{y + height - 4:.0f}" stroke="#888"{dash}/>')  # fmt: skip
        for index, row in enumerate(group):
            middle = y + top + row_height * index + row_height / 2
            parts.append(f'<text x="4" y="{middle + 4:.1f}">{escape(f"{row.spec}, {row.task}")}</text>')
            d = row.verdict.difference
            if d is None:
                parts.append(f'<text x="{label_width:.0f}" y="{middle + 4:.1f}" fill="#888">not comparable</text>')
                continue
            colour = colours.get(row.verdict.outcome, "#57606a")
            low, high = (100 * d.low, 100 * d.high) if d.spread else (100 * d.mean, 100 * d.mean)
            parts.append(f'<line x1="{x(low):.1f}" y1="{middle:.1f}" x2="{x(high):.1f}" y2="{middle:.1f}" '
                         f'stroke="{colour}" stroke-width="2"/>')  # fmt: skip
            if abs(100 * d.mean) <= limit:
                parts.append(f'<circle cx="{x(100 * d.mean):.1f}" cy="{middle:.1f}" r="3.5" fill="{colour}"/>')
            for end, edge in ((low, -limit), (high, limit)):
                if (end < edge) if edge < 0 else (end > edge):
                    tip, back = x(edge), x(edge) + (6 if edge < 0 else -6)
                    parts.append(f'<path d="M{tip:.1f},{middle:.1f} L{back:.1f},{middle - 4:.1f} '
                                 f'L{back:.1f},{middle + 4:.1f} Z" fill="{colour}"/>')  # fmt: skip
        y += height
    for value in (-limit, -margin, 0.0, margin, limit):
        parts.append(f'<text x="{x(value):.1f}" y="{y + 14:.0f}" text-anchor="middle">{value:+.0f}</text>')
    parts.append(f'<text x="{label_width + plot / 2:.0f}" y="{y + 30:.0f}" text-anchor="middle">variant − control, '
                 f"points (95% interval; dashed: ±margin; clipped at ±{limit:.0f})</text>")  # fmt: skip
    legend = [("above", verdicts.ABOVE), ("below", verdicts.BELOW), ("equivalent", verdicts.EQUIVALENT),
              ("not resolved", verdicts.NOT_RESOLVED)]  # fmt: skip
    for index, (word, outcome) in enumerate(legend):
        left = label_width + index * 110
        parts.append(f'<circle cx="{left:.0f}" cy="{y + 44:.0f}" r="3.5" fill="{colours.get(outcome, "#57606a")}"/>'
                     f'<text x="{left + 8:.0f}" y="{y + 48:.0f}">{word}</text>')  # fmt: skip
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y + 56:.0f}" font-family="sans-serif" '
            f'font-size="11">\n<rect width="100%" height="100%" fill="white"/>\n'
            + "\n".join(parts) + "\n</svg>\n")  # fmt: skip


def main_job_sentence() -> str:
    """Whether the main job's budgets are calibrated (experiments/compare/default, then its other conditions), and
    the older conditions calibrated afterwards."""
    from hf_variants.lab.evidence import calibration_checks

    def calibrated(results: dict) -> str:
        failed = [kind for kind, _, passed, _ in calibration_checks(results) if not passed]
        return "calibrated" if not failed else f"not calibrated (its {' and '.join(failed)} control failed)"

    default = json.loads((EXPERIMENTS / "compare" / "default" / "results.json").read_text(encoding="utf-8"))
    sentence = f"At its default {default['settings']['num_seeds']} seeds the main job is {calibrated(default)}"
    for _, folder, _ in CONDITIONS:
        if folder.startswith("experiments/compare/") and folder != "experiments/compare/default":
            results = json.loads((ROOT / folder / "results.json").read_text(encoding="utf-8"))
            sentence += (f"; `--preset {results['settings']['preset']}` ({results['settings']['num_seeds']} seeds) "
                         f"is {calibrated(results)}")  # fmt: skip
    later = {label: calibration_afterwards(folder) for label, folder, _ in CONDITIONS
             if folder in CALIBRATED_AFTERWARDS}  # fmt: skip
    for label, told in later.items():
        calibrated = [task for task, (passed, _) in told.items() if passed]
        not_calibrated = [task for task, (passed, _) in told.items() if not passed]
        sentence += (f"; the {label} budget is not calibrated on {' or '.join(not_calibrated)}" if not_calibrated
                     else "") + (f", calibrated on {' and '.join(calibrated)}" if calibrated else "")  # fmt: skip
    return sentence + "."


def throughput_sentence() -> str:
    rows = json.loads(MODEL_BENCHMARK.read_text(encoding="utf-8"))["rows"]
    shares = {row["model"]: row["throughput_vs_control"] for row in rows
              if row["hidden"] == 256 and row["length"] == 128 and row.get("throughput_vs_control")}  # fmt: skip
    shown = ", ".join(f"{name} {shares[name]:.2f}×" for name in VARIANTS if name in shares)
    return f"Training speed (tokens/s) against the matched control (hidden 256, 128 tokens, CPU): {shown}."


def count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def claims_list() -> str:
    """Every claim of the table's column, in full, by idea."""
    lines = []
    for idea in VARIANTS:
        claims = [(task, claim) for (name, task), claim in CLAIMS.items() if name == idea]
        lines.append(f"- **{idea}**: " + "; ".join(f"{task or 'in general'}: {claim.text}" for task, claim in claims)
                     + ".")  # fmt: skip
    return "\n".join(lines) + "\n"


def sentences(rows: list[Finding]) -> list[str]:
    """At most ten plain sentences, each computed from the rows or a record."""
    outcomes = Counter(row.verdict.outcome for row in rows)
    readings = Counter(row.reading for row in rows)
    above = [row for row in rows if row.verdict.outcome == verdicts.ABOVE]
    below = [row for row in rows if row.verdict.outcome == verdicts.BELOW]
    failures = [row for row in rows if row.comparison.learned_p < 0.05]
    said = [
        f"Of {len(rows)} comparisons, {outcomes[verdicts.ABOVE]} came out above the matched control, "
        f"{outcomes[verdicts.BELOW]} below, {outcomes[verdicts.EQUIVALENT]} equivalent within the margin, "
        f"{outcomes[verdicts.NOT_RESOLVED]} not resolved and {outcomes[verdicts.NOT_COMPARABLE]} not comparable.",
        ("No idea came out above its matched control in any condition at these sizes." if not above else
         "Above its control: " + "; ".join(f"{r.spec} on {r.task} ({r.condition})" for r in above) + "."),
    ]
    if below:
        said.append("Below its control: " + "; ".join(f"{r.spec} on {r.task} ({r.condition}, "
                                                       f"{r.verdict.difference.difference_text(100, bold=False)})"
                                                       for r in below) + ".")  # fmt: skip
    placed = readings[ABOVE_IT] + readings[INSIDE] + readings[BELOW_IT]
    said.append(f"Of the {count(placed, 'row', 'rows')} whose paper claims an effect on its task, the claimed effect "
                f"lies above the interval in {readings[ABOVE_IT]}, inside it in {readings[INSIDE]} and below it in "
                f"{readings[BELOW_IT]}, at these sizes.")  # fmt: skip
    if failures:
        said.append("Where the two sides learned at different rates (Fisher's exact p < 0.05), the failure rate is "
                    "the finding: " + "; ".join(f"{r.spec} on {r.task} ({r.condition}: "
                                               + " against ".join(f"{k}/{n}" for k, n in r.comparison.learned.values())
                                               + ")" for r in failures) + ".")  # fmt: skip
    said.append(main_job_sentence())
    said.append(throughput_sentence())
    said.append("For your own data and size: `hf-variants compare --data_dir DIR --models ...`.")
    return said[:10]


INTRO = """\
# Findings

What the committed records found about each idea against its **matched control** (the same model without the
idea); [Results](results.md) has each study.

**How to read a row.** The difference: variant − control in accuracy points, paired by seed (a *seed*: one whole
replicate), with its 95% interval. Verdicts: *above* or *below its control* (paired t-test, Holm-adjusted over a
condition's pairs, p < 0.05); *equivalent within ±2* (two one-sided tests, Holm-adjusted the same way); *not
resolved* (neither; not evidence of no effect); *not comparable* (fewer than two seeds where both learned, or a
failed calibration). *Learned*: variant's and control's runs that learned
([Concepts](concepts.md#what-a-run-shows)). *Counting every run* scores a run that did not learn at the guessing
level; shown where it reads otherwise. *Gain elsewhere*: the paper claims a gain, on other tasks only. The last
column places the paper's claimed effect against the interval; the papers' models were larger, so no row settles a
claim.

"""
#: What sets the older records apart (the second table).
OLDER = """\
**These records predate the current protocol** ([Concepts](concepts.md)): each side chose its learning rate once,
the ±2 margin was fixed after the runs, and the studies ran no calibration controls.
"""


def condition_text(labels: list[str], folder: str) -> str:
    """Conditions' size and budget, read from their records (one folder's)."""
    label = ", ".join(labels)
    from hf_variants.lab.grid import load_grid

    if folder.startswith("experiments/compare/"):
        results = json.loads((records_folder(folder) / "results.json").read_text(encoding="utf-8"))
        settings = results["settings"]
        return (f"*{label}*: `{results['command']}` on the embedded task, "
                f"{count(settings['num_layers'], 'layer', 'layers')}, hidden {settings['hidden_size']}, "
                f"{settings['max_seq_length']} tokens, "
                f"{settings['pretrain_steps']} MLM steps and {settings['finetune_steps']} fine-tuning steps, "
                f"{settings['num_seeds']} seeds.")  # fmt: skip
    grids = {task: load_grid(records_folder(folder) / task)["settings"] for task in STUDY_TASKS
             if (records_folder(folder) / task / "run_fingerprint.json").is_file()}  # fmt: skip
    first = next(iter(grids.values()))
    lengths = ", ".join(f"{task} {grid['max_length']}" for task, grid in grids.items())
    pretrained = " after MLM on each task's own training inputs" if "self_pretrained" in folder else ""
    return (f"*{label}*: {first['sizes']['num_hidden_layers']} layers, hidden {first['sizes']['hidden_size']}, "
            f"{first['steps']} fine-tuning steps{pretrained}, {len(first['seeds'])} seeds; tokens: "
            f"{lengths}.")  # fmt: skip


#: An older condition whose budget was calibrated afterwards, under the current protocol: its folder → the folder of
#: the study run again with its calibration controls alone (``--pairs bert_control``; the command in its study file).
CALIBRATED_AFTERWARDS = {"experiments/never_from_scratch/scratch": "experiments/never_from_scratch_calibration/scratch"}


@functools.cache  # read by the page's sentence and by its condition's line
def calibration_afterwards(folder: str) -> dict[str, tuple[bool, str]]:
    """What the calibration controls said of an older condition's budget, run afterwards
    (:data:`CALIBRATED_AFTERWARDS`): task → whether that budget is calibrated there, and its controls' intervals (with,
    for an A/A not resolved, the seeds that would pass it)."""
    from hf_variants.lab.evidence import SEEDS_NEEDED_PROBABILITY
    from hf_variants.lab.grid import load_grid
    from hf_variants.lab.grid_evidence import calibration_checks
    from hf_variants.lab.statistics import seeds_for_equivalence

    def said(kind: str, verdict: verdicts.Verdict) -> str:
        text = f"{'A/A' if kind == 'negative' else kind} {verdict.difference.difference_text(100, bold=False)}"
        if kind == "negative" and verdict.outcome == verdicts.NOT_RESOLVED:  # what would make it pass
            needed = seeds_for_equivalence(verdict.difference.sd, verdict.margin, SEEDS_NEEDED_PROBABILITY)
            text += f" ({'over 1,000' if needed is None else needed} seeds would pass it)"
        return text

    later = CALIBRATED_AFTERWARDS.get(folder)
    told = {}
    for task in STUDY_TASKS if later else []:
        if (records_folder(later) / task / "run_fingerprint.json").is_file():
            checks = calibration_checks(load_grid(records_folder(later) / task))
            told[task] = (all(p for _, p, _ in checks), "; ".join(said(kind, verdict) for kind, _, verdict in checks))
    return told


def calibration_clause(folder: str) -> str:
    """A condition's calibration, run afterwards (:func:`calibration_afterwards`), after its description."""
    told = calibration_afterwards(folder)
    if not told:
        return ""
    return " Its calibration controls, run afterwards under the current protocol: " + ", ".join(
        f"{'calibrated' if passed else '**not calibrated**'} on {task} ({text})"
        for task, (passed, text) in told.items()) + "."  # fmt: skip


def findings_page(rows: list[Finding]) -> str:
    shown = {row.condition for row in rows}
    by_folder: dict[str, list[str]] = {}
    for label, folder, _ in CONDITIONS:
        if label in shown:
            by_folder.setdefault(folder, []).append(label)
    conditions = [condition_text(labels, folder) + calibration_clause(folder) for folder, labels in by_folder.items()]
    shown_folders = [folder for label, folder, _ in CONDITIONS if label in shown]
    sources = ", ".join(dict.fromkeys(f"`{folder}`" for folder in [*shown_folders, *(
        CALIBRATED_AFTERWARDS[folder] for folder in shown_folders if folder in CALIBRATED_AFTERWARDS)]))  # fmt: skip
    return (f"{INTRO}\n## What it found\n\n" + "\n".join(f"- {sentence}" for sentence in sentences(rows))
            + "\n\n## Every comparison\n\n**Conditions.**\n\n" + "\n".join(f"- {text}" for text in conditions)
            + "\n\n![Forest plot: each pair's interval against 0 and the margin]"
            "(findings/forest.svg)\n\n### Under the current protocol\n\n"
            + table([row for row in rows if row.condition in CURRENT_PROTOCOL])
            + f"\n### Older records\n\n{OLDER}\n"
            + table([row for row in rows if row.condition not in CURRENT_PROTOCOL])
            + "\n**The papers' claims**, in their own settings (TransJect's from its reviewed manuscript; MLK's paper "
            "compares it with linear attention):\n\n" + claims_list()
            + f"\nRendered by `python tools/render_tables.py` from {sources} and "
            "`benchmarks/records/model_benchmark.json`.\n")  # fmt: skip


def rendered() -> dict[Path, str]:
    """The page and its figure, as the committed records give them."""
    rows = findings()
    return {FINDINGS_PAGE: findings_page(rows), FOREST: forest_svg(rows)}


def calibration_sentence(results: dict) -> str:
    """``Calibration: the positive control passed (…); the negative control failed (…).`` from a comparison's record."""
    from hf_variants.lab.evidence import calibration_checks

    return "Calibration: " + "; ".join(f"the {kind} control {'passed' if passed else 'failed'} ({text})"
                                       for kind, _, passed, text in calibration_checks(results)) + "."  # fmt: skip


def pair_verdict_lines(results: dict) -> list[str]:
    """``- **variant**: its verdict.`` for every pair of a comparison's record, as its report judges it; where a run
    did not learn, with the learned counts and the verdict counting every run (the report's conclusion)."""
    from hf_variants.lab.evidence import pair_comparisons

    def said(comparison: verdicts.PairComparison) -> str:
        every_run_learned = all(k == n for k, n in comparison.learned.values())
        return comparison.per_protocol.text if every_run_learned else comparison.text

    return [f"- **{variant}**: {said(comparison)}."
            for (variant, _, _), comparison in pair_comparisons(results).items()]  # fmt: skip


def default_report_block(folder: Path = EXPERIMENTS / "compare" / "default") -> str:
    """README's account of the committed default `hf-variants compare`: its time, its calibration and each pair's
    verdict, read from its results.json, so that the front door says what its report says."""
    from hf_variants.lab.evidence import not_calibrated

    results = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    minutes, seconds = divmod(round(results["wall_seconds"]), 60)
    why = not_calibrated(results)
    verdict = (f"**{why[0].upper()}{why[1:]}**, so its report calls no pair above, below or equivalent and shows what "
               "each interval still allows:" if why else "Its budget is calibrated; each pair's verdict:")  # fmt: skip
    outlook = record_outlook(results)
    lines = [f"The committed default run took {minutes} min {seconds} s inside the comparison on a 2-core CPU. "
             f"{calibration_sentence(results)} {outlook} {verdict}", "", *pair_verdict_lines(results)]  # fmt: skip
    aa = aa_records()
    drawn = ", ".join(f"{len(results['models'][results['calibration']['baseline']]['pretraining_runs'])} seeds at "
                      f"`--seed` {results['settings']['seed']}" for results in aa)  # fmt: skip
    outlook = default_outlook(aa[0])
    lines += ["", f"How often the default calibrates (the A/A records at its budget: {drawn}). On the default's data, "
              f"{outlook[:1].lower()}{outlook[1:]} {pooled_aa_sentence(aa)} "
              f"{calibrated_runs(default_runs())}"]  # fmt: skip
    return "\n".join(lines) + ("\n\nRendered by `python tools/render_tables.py` from "
                               f"`experiments/compare/default/results.json`, {aa_sources()} and the default command's "
                               "runs at other seeds.\n")  # fmt: skip


#: The A/A records: the BERT control and its two calibration controls over many seeds at the default budget, each
#: on its own data draw (``--seed``): the default's, then another.
AA_RECORDS = ("aa", "aa-seed1000")


def aa_records(folders: tuple[str, ...] = AA_RECORDS) -> list[dict]:
    """The committed A/A records (``experiments/compare/<folder>/results.json``)."""
    return [json.loads((EXPERIMENTS / "compare" / name / "results.json").read_text(encoding="utf-8"))
            for name in folders]  # fmt: skip


def aa_sources(folders: tuple[str, ...] = AA_RECORDS) -> str:
    """The A/A records' files, as a rendered block names its sources."""
    return ", ".join(f"`experiments/compare/{name}/results.json`" for name in folders)


def pooled_aa_sentence(records: list[dict]) -> str:
    """The default's false-positive rate over every A/A record's disjoint default-size groups
    (:func:`~hf_variants.lab.evidence.aa_false_positives`), with its exact interval."""
    from hf_variants.lab.evidence import aa_false_positives, default_seeds
    from hf_variants.lab.statistics import proportion_interval

    said, groups = aa_false_positives(records)
    low, high = proportion_interval(said, groups)
    draws = ", ".join(str(results["settings"]["seed"]) for results in records)
    return (f"Over the A/A records' {groups} disjoint groups of {default_seeds(records[0])} seeds (data drawn at "
            f"`--seed` {draws}; no two groups share a run, a record's groups share its data), *above* or *below* was "
            f"said {said} times: the default's false-positive rate is **{100 * said / groups:.1f}% "
            f"[{100 * low:.1f}%, {100 * high:.1f}%]** (95% exact interval), against the test's nominal "
            f"{100 * verdicts.ALPHA:.0f}%.")  # fmt: skip


def record_outlook(results: dict, seeds: int | None = None) -> str:
    """A record's calibration outlook on each of its tasks (its measured spreads): for a comparison of its own seed
    count, or of ``seeds``."""
    from hf_variants.lab.report import calibration_outlook

    return " ".join(filter(None, (calibration_outlook(results, task, seeds) for task in results["tasks"])))


def default_outlook(results: dict) -> str:
    """A record's calibration outlook for a comparison of the default's seed count when the record was made."""
    from hf_variants.lab.evidence import default_seeds

    return record_outlook(results, default_seeds(results))


def run_counts(results: dict) -> str:
    """``33 pretrainings, 66 held-out runs and 33 final runs`` of a comparison's record."""
    from hf_variants.lab.evidence import final_runs_by_rate, heldout_sweeps

    tuned = [entry for model in results["models"].values() for entry in model["fine_tuning"].values()]
    pretrainings = sum(len(model.get("pretraining_runs", {})) for model in results["models"].values())
    heldout = sum(len(sweep) for entry in tuned for sweep in heldout_sweeps(entry).values())
    final = sum(len(runs) for entry in tuned for runs in final_runs_by_rate(entry).values())
    return f"{pretrainings} pretrainings, {heldout} held-out runs and {final} final runs"


#: The committed runs of the default command: at its own seed, then at other ``--seed`` values (other data draws).
DEFAULT_RUNS = ("default", "seed7", "seed11", "seed13")


def default_runs(folders: tuple[str, ...] = DEFAULT_RUNS) -> list[dict]:
    """The committed default runs' records."""
    return [json.loads((EXPERIMENTS / "compare" / name / "results.json").read_text(encoding="utf-8"))
            for name in folders]  # fmt: skip


def calibrated_runs(records: list[dict]) -> str:
    """``Calibrated in **k of n** runs (seeds …).`` of the default runs' records, and the probability that a
    default-size comparison calibrates at the spreads each run measured on its own data draw, with their mean."""
    from hf_variants.lab.evidence import calibration_across_draws, default_seeds, not_calibrated

    calibrated = sum(not_calibrated(results) is None for results in records)
    lines = [f"Calibrated in **{calibrated} of {len(records)}** runs of the default command (seeds "
             f"{', '.join(str(results['settings']['seed']) for results in records)}; another seed draws other "
             "data)."]  # fmt: skip
    seeds = default_seeds(records[0])
    for task in records[0]["tasks"]:
        chances = calibration_across_draws(records, task, seeds)
        if chances:
            lines.append(f"At the spreads each of these runs measured on its own data ({task}), a comparison of "
                         f"{seeds} seeds passes its calibration with probability "
                         f"{', '.join(f'{chance:.0%}' for chance in chances)}: {sum(chances) / len(chances):.0%} "
                         "for a draw taken at random among these.")  # fmt: skip
    return " ".join(lines)


def default_runs_block(folders: tuple[str, ...] = DEFAULT_RUNS) -> str:
    """docs/main-job.md's account of the committed default-budget runs: how many passed their calibration, then per
    run its command, its runs, calibration with the record's own calibration outlook, and each pair's verdict, and for
    the first (the default, timed with nothing else running) its time (all read from its results.json)."""
    from hf_variants.lab.report import without_output_folder

    records = default_runs(folders)
    paragraphs = [calibrated_runs(records), ""]
    for index, record in enumerate(records):
        results = without_output_folder(record)
        minutes, seconds = divmod(round(results["wall_seconds"]), 60)
        longest = max(results["models"].items(), key=lambda item: item[1]["training_seconds"])
        clocks = sum(model["training_seconds"] for model in results["models"].values())
        outlook = record_outlook(results)
        timed = (f"**{minutes} min {seconds} s** inside the comparison, " if index == 0 else "")
        paragraphs += [f"`{results['command']}`: {timed}{run_counts(results)}, {results['settings']['workers']} at a "
                       f"time on a 2-core CPU ({longest[0]}'s pretrainings and final runs took "
                       f"{longest[1]['training_seconds']:.0f} s of the {clocks:.0f} s that all models' took by their "
                       f"own clocks). {calibration_sentence(results)} {outlook}", "", *pair_verdict_lines(results),
                       ""]  # fmt: skip
    sources = ", ".join(f"`experiments/compare/{name}/results.json`" for name in folders)
    return "\n".join(paragraphs) + f"\nRendered by `python tools/render_tables.py` from {sources}.\n"


def aa_record_block(folders: tuple[str, ...] = AA_RECORDS) -> str:
    """docs/main-job.md's account of the committed A/A records (the BERT control and its two calibration controls
    over many seeds at the default budget, each on its own data draw): per record, the false-positive rate of its
    disjoint default-size groups and the probability that a default comparison passes its calibration at the spreads
    it measured; then the rate over all of them."""
    from hf_variants.lab.report import aa_check_lines

    records, lines = aa_records(folders), []
    for results in records:
        clocks = sum(model["training_seconds"] for model in results["models"].values())
        aa = [line for line in aa_check_lines(results) if line and not line.startswith("#")]  # says what A/A shares
        lines += [f"`{results['command']}`: {run_counts(results)}, {clocks / 60:.0f} min of training by the runs' "
                  f"own clocks. {calibration_sentence(results)}", "", *aa, "", default_outlook(results),
                  ""]  # fmt: skip
    lines.append(pooled_aa_sentence(records))
    return "\n".join(lines) + f"\n\nRendered by `python tools/render_tables.py` from {aa_sources(folders)}.\n"


def power_preset_block(folder: Path = EXPERIMENTS / "compare" / "power") -> str:
    """docs/main-job.md's account of the committed `--preset power` run: its wall time, calibration, each pair's
    verdict at the chosen rates and at every common rate, and its A/A check (all read from its results.json)."""
    from hf_variants.lab.evidence import final_rates, pair_comparisons
    from hf_variants.lab.report import aa_check_lines

    results = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    minutes, seconds = divmod(round(results["wall_seconds"]), 60)
    outlook = record_outlook(results)
    lines = [f"`{results['command']}` took **{minutes} min {seconds} s** ({run_counts(results)}, "
             f"{results['settings']['workers']} at a time, on a 2-core CPU; "
             f"its report: `experiments/compare/power/report.md` in the repository). {calibration_sentence(results)} "
             f"{outlook}", "", *pair_verdict_lines(results)]  # fmt: skip
    rates = final_rates(results)
    if rates:
        at_rate = pair_comparisons(results, rates)
        lines += ["", "With both sides at the same rate (one Holm family; each rate calibrated on its own, with every "
                  "model at that rate): " + "; ".join(
            f"{variant} at {rate}: {verdict_words(comparison.per_protocol)}"
            + (f" {comparison.per_protocol.difference.difference_text(100, bold=False)}"
               if comparison.per_protocol.difference is not None and comparison.per_protocol.difference.spread else "")
            for (variant, _, _, rate), comparison in at_rate.items()) + "."]  # fmt: skip
    aa = [line for line in aa_check_lines(results) if line and not line.startswith("#")]
    lines += ["", *aa]
    source = "`experiments/compare/power/results.json`"
    return "\n".join(lines) + f"\n\nRendered by `python tools/render_tables.py` from {source}.\n"
