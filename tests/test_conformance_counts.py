"""tools/conformance_counts.py: per-model counts from pytest's JUnit report."""

from __future__ import annotations

from pathlib import Path

from .helpers import load_script

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
  <testcase classname="tests.test_transformers_conformance.TestTransJectConformance" name="test_a"/>
  <testcase classname="tests.test_transformers_conformance.TestTransJectConformance" name="test_b">
    <skipped type="pytest.skip" message="Model architecture does not support attentions"/>
  </testcase>
  <testcase classname="tests.test_transformers_conformance.TestMacaronBertConformance" name="test_a">
    <failure message="AssertionError"/>
  </testcase>
  <testcase classname="tests.test_transformers_conformance.TestMacaronBertConformance" name="test_b">
    <error message="fixture error"/>
  </testcase>
  <testcase classname="tests.test_transformers_conformance.TestMacaronBertConformance" name="test_c"/>
</testsuite></testsuites>
"""


def test_counts_passed_not_applicable_and_failed_per_model(tmp_path: Path) -> None:
    report = tmp_path / "report.xml"
    report.write_text(REPORT)
    counts = load_script("tools/conformance_counts").count(report)
    assert counts == {
        "MacaronBert": {"passed": 1, "not applicable": 0, "failed": 2},
        "TransJect": {"passed": 1, "not applicable": 1, "failed": 0},
    }
