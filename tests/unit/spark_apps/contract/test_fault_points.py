"""The fault hook fires only where and when the environment arms it, and only under spark-submit."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from spark_apps.contract import fault_points
from spark_apps.contract.fault_points import (
    FAULT_BATCH_ENV,
    FAULT_POINT_ENV,
    FAULT_REPORT_ENV,
    FaultPointError,
)


def test_an_unarmed_point_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FAULT_POINT_ENV, raising=False)
    assert fault_points.armed_point() is None
    fault_points.reached("revenue.after_gold_commit", 5)  # returns: this process is still here


def test_an_unknown_point_is_refused_naming_the_known_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAULT_POINT_ENV, "revenue.after_gold")
    with pytest.raises(FaultPointError, match=re.escape("revenue.after_gold_commit")):
        fault_points.armed_point()


def test_other_points_and_earlier_batches_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAULT_POINT_ENV, "revenue.after_gold_commit")
    monkeypatch.setenv(FAULT_BATCH_ENV, "3")
    fault_points.reached("revenue.before_checkpoint_commit", 7)
    fault_points.reached("revenue.after_gold_commit", 2)


def test_an_armed_point_never_kills_a_process_that_spark_submit_did_not_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(FAULT_POINT_ENV, "revenue.after_gold_commit")
    monkeypatch.setenv(FAULT_BATCH_ENV, "3")
    with pytest.raises(FaultPointError, match="spark-submit"):
        fault_points.reached("revenue.after_gold_commit", 3)


def test_a_point_that_fired_once_stays_quiet_for_the_restarted_driver(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    report = tmp_path / "fault.json"
    report.write_text('{"point": "revenue.after_gold_commit", "batch_id": 3}')
    monkeypatch.setenv(FAULT_POINT_ENV, "revenue.after_gold_commit")
    monkeypatch.setenv(FAULT_REPORT_ENV, str(report))
    fault_points.reached("revenue.after_gold_commit", 3)  # no FaultPointError: it did not try to fire
