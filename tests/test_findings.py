"""The findings page (docs/findings.md): first in the site's navigation after the home page, short, rendered from
the committed records (``tools/findings.py``), and its reading of a verdict against a paper's claim."""

from __future__ import annotations

import re

import pytest
import yaml

from hf_variants.lab import verdicts
from hf_variants.lab.statistics import mean_interval

from .helpers import REPO_ROOT, load_script

findings = load_script("tools/findings")


def test_the_findings_page_is_first_after_home_and_under_two_thousand_words() -> None:
    class Loader(yaml.SafeLoader):
        pass

    nav = yaml.load((REPO_ROOT / "mkdocs.yml").read_text(), Loader=Loader)["nav"]
    assert nav[:2] == [{"Home": "index.md"}, {"Findings": "findings.md"}]
    page = (REPO_ROOT / "docs" / "findings.md").read_text()
    assert len(page.split()) <= 2000
    assert len([line for line in page.split("## What it found")[1].split("##")[0].splitlines()
                if line.startswith("- ")]) <= 10  # fmt: skip


def test_the_current_protocols_table_holds_only_records_made_under_it() -> None:
    """A condition shown apart as run under the current protocol is one: every model chose its rate inside each
    replicate (or had one rate), its record declares each task's margin with its reason and date, and it carries both
    calibration controls, its negative control sharing the data of the seed it is paired with."""
    import json

    from hf_variants.lab.protocol import RATE_CHOICE

    current = [(label, folder) for label, folder, _ in findings.CONDITIONS if label in findings.CURRENT_PROTOCOL]
    assert current
    for label, folder in current:
        results = json.loads((REPO_ROOT / folder / "results.json").read_text(encoding="utf-8"))
        for name, model in results["models"].items():
            assert {entry["rate_choice"] for entry in model["fine_tuning"].values()} == {RATE_CHOICE}, (label, name)
        assert all({"points", "reason", "declared"} <= set(results["margins"][task]) for task in results["tasks"])
        assert {"positive", "negative", "negative_shares"} <= set(results["calibration"]), label


def test_the_committed_page_and_plot_are_what_the_records_give() -> None:
    """Re-derived: the page and the forest plot equal their rendering from the records, and every row of the table
    is a comparison of a committed condition, one panel per condition in the plot."""
    rendered = findings.rendered()
    for path, text in rendered.items():
        assert path.read_text(encoding="utf-8") == text, f"{path} is out of date: run tools/render_tables.py"
    rows = findings.findings()
    table = [line for line in rendered[findings.FINDINGS_PAGE].splitlines()
             if line.startswith("| ") and not line.startswith("| idea")]  # fmt: skip
    assert len(table) == len(rows) > 0
    plot = rendered[findings.FOREST]
    for condition in {row.condition for row in rows}:
        assert f'font-weight="bold">{condition}</text>' in plot
    assert plot.count("<text x=\"4\" y=") == len(rows) + len({row.condition for row in rows})


def verdict_of(differences: list[float], margin: float = 0.02) -> verdicts.Verdict:
    return verdicts.verdict(mean_interval(differences), margin)


@pytest.mark.parametrize(
    ("differences", "claim", "expected"),
    [
        # +6.0 [+3.5, +8.5] points: a claimed +6.8 inside it, +11.9 above it, a claimed loss below it
        ([0.05, 0.06, 0.07], findings.Claim("gain", +1, 6.8), findings.INSIDE),
        ([0.05, 0.06, 0.07], findings.Claim("gain", +1, 11.9), findings.ABOVE_IT),
        ([0.05, 0.06, 0.07], findings.Claim("loss", -1, -1.0), findings.BELOW_IT),
        # equivalent within ±2 (-0.0 [-0.2, +0.2]): a claimed +6.8 lies above, a claimed +0.0 inside — by effect,
        # whatever the verdict's word
        ([0.001, -0.002, 0.0, 0.001], findings.Claim("+6.8", +1, 6.8), findings.ABOVE_IT),
        ([0.001, -0.002, 0.0, 0.001], findings.Claim("none", 0, 0.0), findings.INSIDE),
        ([0.05, -0.06, 0.01], findings.Claim("gain elsewhere", +1), findings.ELSEWHERE),
        ([0.05], findings.Claim("gain", +1, 6.8), findings.NO_INTERVAL),  # one seed: no interval
        ([0.05, -0.06, 0.01], None, findings.NO_CLAIM),
    ],
)
def test_the_claimed_effect_is_placed_against_the_interval(differences, claim, expected) -> None:
    assert findings.reading(verdict_of(differences), claim) == expected


def test_the_claims_match_their_papers_tables() -> None:
    """Each claimed effect is the difference of the two numbers its text quotes from the paper."""
    for claim in findings.CLAIMS.values():
        if claim.points is None:
            continue
        idea, control = map(float, re.findall(r"(\d+\.\d+) vs (\d+\.\d+)", claim.text)[0])
        assert claim.points == pytest.approx(idea - control, abs=1e-9)
