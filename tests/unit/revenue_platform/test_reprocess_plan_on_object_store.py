"""Where a reprocess run's report and job config go, and what its submit adds, for a lake on the object
store next to a local one (pure logic: the run itself is
tests/integration/test_reprocess_on_object_store.py)."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from revenue_platform.reprocessing import (
    job_config_path,
    object_store_credentials_environment,
    report_path,
    spark_jars_csv,
)

START = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
END = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def test_a_report_on_the_object_store_keeps_its_scheme_and_its_job_config_is_a_local_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLATFORM_STATE_DIR", str(tmp_path / "state"))
    report = report_path("s3a://lake/team/", "blue", START, END)
    assert report == "s3a://lake/team/reports/reconciliation/blue/20261122T090000_20261122T100000.json"
    config = job_config_path(report)
    assert config == (
        tmp_path / "state/reprocess/lake/team/reports/reconciliation/blue/20261122T090000_20261122T100000"
        ".config.json"
    )


def test_a_local_lake_keeps_report_and_job_config_side_by_side(tmp_path: Path) -> None:
    report = report_path(str(tmp_path / "lake"), "blue", START, END)
    assert report == str(tmp_path / "lake/reports/reconciliation/blue/20261122T090000_20261122T100000.json")
    assert job_config_path(report) == Path(report).with_suffix(".config.json")


def test_a_local_lake_exports_no_credentials_and_adds_no_jars(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY", raising=False)
    before = dict(os.environ)
    assert object_store_credentials_environment(str(tmp_path / "lake")) == {}
    assert dict(os.environ) == before
    assert spark_jars_csv(["/jars/hadoop-aws.jar"]).endswith(",/jars/hadoop-aws.jar")
    assert spark_jars_csv() == spark_jars_csv([])
