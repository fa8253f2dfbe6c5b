"""The failure watcher keeps its own rules inside a platform DAG: one_failed, no retry, no alert."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from airflow.sdk import DAG
from airflow.sdk.exceptions import AirflowException

from revenue_platform.airflow.dag_defaults import platform_default_args
from revenue_platform.airflow.failure_watcher import FailureWatcherOperator


def test_the_dags_default_args_do_not_give_the_watcher_retries_or_an_alert() -> None:
    with DAG(
        "watched",
        schedule=None,
        start_date=datetime(2026, 1, 1, tzinfo=UTC),
        default_args=platform_default_args(),
    ):
        watcher = FailureWatcherOperator(task_id="fail_if_any_failed", message="a task failed")

    assert watcher.trigger_rule == "one_failed"
    assert watcher.retries == 0
    assert not watcher.on_failure_callback, "the task that failed has alerted already"
    assert watcher.owner == "platform", "the other default_args still apply"


def test_the_watcher_fails_with_its_message() -> None:
    watcher = FailureWatcherOperator(task_id="fail_if_any_failed", message="a task of the replay failed")

    with pytest.raises(AirflowException, match="a task of the replay failed"):
        watcher.execute({})
