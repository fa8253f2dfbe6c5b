"""Triggers that cannot do damage: real Airflow task instances (`dag.test()`), real Delta tables.

A conf key a DAG does not declare, a lake root outside the platform's lake or a hostile store
id fails the run in its first task, naming the key or field, and nothing after it runs:
nothing is registered, no driver is launched, no Spark job is submitted, gold is untouched.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from revenue_platform.registry import DeploymentRegistry
from spark_apps.contract.naming import DeploymentNames
from tests.streaming_helpers import DEPLOY_DEFAULTS, load_dags, spark_drivers, task_states

pytestmark = pytest.mark.integration

FIRST_TASK = {
    "deploy_streaming_app": "validate_request",
    "blue_green_replay": "check_no_replay_in_flight",
    "provision_topics": "load_spec",
    "reprocess_revenue": "plan_reprocessing",
    "revenue_quality_checks": "quality_gate.check_revenue_quality",
    "rollback_live_deployment": "rollback",
    "stop_streaming_app": "stop",
    "supervise_streaming_apps": "supervise",
}


@pytest.fixture(scope="module")
def dags(airflow_db: Any) -> dict[str, Any]:
    return load_dags(*FIRST_TASK)


@pytest.fixture
def lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    root = str(tmp_path / "lake")
    monkeypatch.setenv("PLATFORM_LAKE_ROOT", root)
    return root


def _refused_in_first_task(dag_run: Any, dag_id: str) -> None:
    states = task_states(dag_run)
    assert dag_run.state == "failed", states
    assert states[FIRST_TASK[dag_id]] == "failed", states
    ran = {task for task, state in states.items() if state == "success" and task != "fail_if_any_failed"}
    assert ran == set(), f"tasks ran after a refused trigger: {states}"


@pytest.mark.parametrize("dag_id", sorted(FIRST_TASK))
def test_an_unknown_conf_key_fails_the_first_task_naming_it(
    dags: dict[str, Any], dag_id: str, lake: str, capfd: pytest.CaptureFixture[str]
) -> None:
    dag_run = dags[dag_id].test(run_conf={"deploymnet_id": "green"})

    _refused_in_first_task(dag_run, dag_id)
    assert "unknown conf key(s) 'deploymnet_id'" in "".join(capfd.readouterr())


def test_a_misspelled_deploy_registers_and_launches_nothing(
    dags: dict[str, Any], lake: str, capfd: pytest.CaptureFixture[str]
) -> None:
    dag_run = dags["deploy_streaming_app"].test(run_conf={**DEPLOY_DEFAULTS, "deploymnet_id": "green"})

    _refused_in_first_task(dag_run, "deploy_streaming_app")
    assert "did you mean 'deployment_id'?" in "".join(capfd.readouterr())
    assert DeploymentRegistry(lake).deployments() == []
    assert not Path(lake, "_registry").exists()
    assert spark_drivers(lake) == []


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"lake_root": "/"}, "config_overrides.lake_root"),
        ({"lake_root": "../../../tmp/evil"}, "config_overrides.lake_root"),
        ({"kafka.orders_topic": "../x"}, "kafka.orders_topic"),
        ({"trigger.interval": "-1 seconds"}, "trigger.interval"),
    ],
)
def test_a_bad_deploy_override_is_refused_before_anything_is_registered(
    dags: dict[str, Any], lake: str, overrides: dict[str, Any], field: str, capfd: pytest.CaptureFixture[str]
) -> None:
    conf = {**DEPLOY_DEFAULTS, "deployment_id": "green", "config_overrides": overrides}
    dag_run = dags["deploy_streaming_app"].test(run_conf=conf)

    _refused_in_first_task(dag_run, "deploy_streaming_app")
    assert field in "".join(capfd.readouterr())
    assert DeploymentRegistry(lake).deployments() == []
    assert spark_drivers(lake) == []


def test_a_hostile_store_id_is_refused_at_trigger_time_and_gold_is_untouched(
    dags: dict[str, Any], lake: str, spark: Any
) -> None:
    """plan_reprocessing refuses it too (tests/unit/revenue_platform/airflow/test_trigger_validation.py), for
    callers without the form's schema."""
    from spark_apps.storage.gold import gold_frame
    from spark_apps.validation.schemas import REVENUE_WINDOW_SCHEMA

    start = datetime(2026, 11, 22, 9, 0, 0)
    gold_path = DeploymentNames(lake, "blue").gold_revenue_table
    rows = [
        (
            f"store_{s}",
            "GENERAL",
            start + timedelta(seconds=15 * w),
            start + timedelta(seconds=15 * w + 15),
            1,
            Decimal("2.50"),
        )
        for s in range(1, 4)
        for w in range(8)
    ]
    spark.createDataFrame(rows, REVENUE_WINDOW_SCHEMA).write.format("delta").save(gold_path)
    conf = {
        "range_start": "2026-11-22T09:00:00Z",
        "range_end": "2026-11-22T09:01:00Z",
        "deployment_id": "blue",
        "source": "auto",
        "stores": ["store_1", "x\\') OR true --"],
        "repair": True,
        "lake_root": lake,
    }
    from airflow.sdk.exceptions import ParamValidationError

    # The form's schema refuses it at trigger time: no run is created, so no task can start.
    with pytest.raises(ParamValidationError, match="stores"):
        dags["reprocess_revenue"].test(run_conf=conf)
    assert gold_frame(spark, gold_path).count() == len(rows)
