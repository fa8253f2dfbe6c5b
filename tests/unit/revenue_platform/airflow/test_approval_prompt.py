"""The promotion prompt a person decides on: which green, which version, and the gates' numbers."""

from __future__ import annotations

from revenue_platform.airflow.approval import promotion_prompt
from tests.approval_helpers import CAUGHT_UP, DIFF, QUALITY, REQUEST


def test_the_question_names_green_its_version_and_the_blue_it_replaces() -> None:
    prompt = promotion_prompt(REQUEST, CAUGHT_UP, QUALITY, DIFF)
    assert prompt.question == "Promote green green-2 (version 2.1.0) to live in place of blue?"


def test_the_body_shows_windows_differences_totals_quality_and_catch_up() -> None:
    body = promotion_prompt(REQUEST, CAUGHT_UP, QUALITY, DIFF).body

    assert "**Diff** over 48 closed windows both cover (2026-11-22T09:00:00 to 2026-11-22T10:00:00)" in body
    assert "0 beyond tolerance (per window: revenue ±0.01, orders ±0)" in body
    assert "| | blue (live) | green-2 (replay) | difference |" in body
    assert "| orders | 1200 | 1200 | +0 |" in body
    # A difference the per-window tolerance let through is visible in the totals.
    assert "| revenue | 12345.67 | 12345.68 | +0.01 |" in body
    assert "**Quality**: passed: 23 expectations, 0 failed" in body
    assert "bronze records read 1200" in body
    assert "gold windows in interval 48" in body
    assert "**Catch-up**: 7 offsets behind the latest (allowed 100)" in body
    assert "see the task logs" not in body


def test_the_evidence_repeats_the_numbers_as_fields_without_the_mismatch_sample() -> None:
    evidence = promotion_prompt(REQUEST, CAUGHT_UP, QUALITY, DIFF).evidence
    assert evidence["version"] == "2.1.0"
    assert evidence["diff"]["windows_compared"] == 48
    assert evidence["diff"]["green_orders"] == 1200
    assert "sample" not in evidence["diff"]
    assert evidence["quality"]["success"] is True
    assert evidence["caught_up"] == CAUGHT_UP


def test_a_failed_check_and_missing_totals_are_shown_not_hidden() -> None:
    quality = {**QUALITY, "success": False, "failed_checks": ["revenue_non_negative"]}
    older_diff = {k: v for k, v in DIFF.items() if k not in ("blue_orders", "green_orders")}

    body = promotion_prompt(REQUEST, None, quality, older_diff).body

    assert "**Quality**: FAILED: 23 expectations, 1 failed (revenue_non_negative)" in body
    assert "| orders | ? | ? | ? |" in body
    assert "**Catch-up**: ? offsets behind" in body
