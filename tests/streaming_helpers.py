"""Helpers for tests that run streaming deployments through the DAGs: drivers, topics, gold, XComs.

Shared by the deploy/supervise/stop and the blue-green integration tests, so both judge
processes, gold tables and task outcomes the same way.
"""

from __future__ import annotations

import time
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from revenue_platform import processes
from revenue_platform.orders_generator import GeneratedRecord, expected_windows
from revenue_platform.registry import DeploymentRegistry
from tests.kafka_helpers import app_topic_overrides, create_app_topics

# Every deploy_streaming_app param besides deployment_id and config_overrides (dag.test keeps params
# between runs in one process, so tests always pass all of them).
DEPLOY_DEFAULTS: dict[str, Any] = {
    "colour": None,
    "version": "itest-1",
    "starting_offsets": "earliest",
    "start_timeout_s": 150,
}


# Every supervise_streaming_apps param (restarts without backoff, a heartbeat counts as stale after 60 s).
SUPERVISE_DEFAULTS: dict[str, Any] = {
    "deployment_ids": [],
    "max_restarts": 3,
    "window_minutes": 10,
    "backoff_base_s": 0,
    "heartbeat_stale_s": 60,
    "start_timeout_s": 150,
}


def supervise(dags: dict[str, Any], deployment_id: str, **params: Any) -> Any:
    """One supervise_streaming_apps run over `deployment_id` (`dags` from `load_dags`)."""
    conf = {**SUPERVISE_DEFAULTS, "deployment_ids": [deployment_id], **params}
    return dags["supervise_streaming_apps"].test(run_conf=conf)


def load_dags(*dag_ids: str) -> dict[str, Any]:
    """The DAG objects of `dags/<dag_id>.py`, asserting each file imports cleanly."""
    from airflow.dag_processing.dagbag import DagBag

    from revenue_platform.paths import DAGS_DIR

    found = {}
    for dag_id in dag_ids:
        bag = DagBag(dag_folder=str(DAGS_DIR / f"{dag_id}.py"))
        assert bag.import_errors == {}
        found[dag_id] = bag.dags[dag_id]
    return found


def spark_drivers(lake_root: str) -> list[int]:
    """Live spark-submit JVMs whose command line names this test's registry (independent of the code)."""
    found = []
    for cmdline_path in Path("/proc").glob("[0-9]*/cmdline"):
        pid = int(cmdline_path.parent.name)
        command = processes.cmdline(pid)
        if (
            "org.apache.spark.deploy.SparkSubmit" in command
            and lake_root in command
            and processes.is_alive(pid)
        ):
            found.append(pid)
    return found


def topic_overrides(bootstrap: str, suffix: str) -> dict[str, Any]:
    """Create the app's test-private topics and return the config overrides pointing at them."""
    create_app_topics(bootstrap, suffix)
    return {**app_topic_overrides(suffix), "trigger.interval": "2 seconds", "shuffle_partitions": 2}


def task_states(dag_run: Any) -> dict[str, str]:
    return {ti.task_id: ti.state for ti in dag_run.get_task_instances()}


def xcom(dag_run: Any, task_id: str) -> Any:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.scalars(
            XComModel.get_many(
                run_id=dag_run.run_id, dag_ids=dag_run.dag_id, task_ids=task_id, key="return_value"
            )
        ).first()
        assert row is not None, f"no XCom from {task_id}"
        return XComModel.deserialize_value(row)


def gold(
    registry: DeploymentRegistry, deployment_id: str
) -> dict[tuple[str, str, datetime], tuple[int, Decimal]]:
    return gold_windows(registry.get(deployment_id).gold_table)


def gold_windows(gold_table: str) -> dict[tuple[str, str, datetime], tuple[int, Decimal]]:
    """(location, type, window start) -> (orders, revenue) of the gold table at `gold_table` ({} if none),
    on a local lake or on the object store (the platform's own reader, with the lake's store settings)."""
    from revenue_platform.gold_table import read_gold

    return {
        (r["location_id"], r["order_type"], r["window_start"].replace(tzinfo=None)): (
            r["order_count"],
            r["revenue"],
        )
        for r in read_gold(gold_table).to_pylist()
    }


def oracle_windows(records: list[GeneratedRecord]) -> dict[tuple[str, str, datetime], tuple[int, Decimal]]:
    """What gold must hold for `records`, in `gold_windows`' shape (15 s windows, each order once)."""
    return {key: (w.order_count, w.revenue) for key, w in expected_windows(records, 15).items()}


def wait_for_gold(
    registry: DeploymentRegistry, deployment_id: str, records: list[GeneratedRecord], timeout_s: float = 150
) -> None:
    expected = oracle_windows(records)
    deadline = time.monotonic() + timeout_s
    actual = gold(registry, deployment_id)
    while actual != expected and time.monotonic() < deadline:
        time.sleep(2)
        actual = gold(registry, deployment_id)
    record = registry.get(deployment_id)
    log = processes.tail(Path(record.driver_log_path), 30) if record.driver_log_path else ""
    assert actual == expected, f"gold differs from the oracle; driver log tail:\n{log}"


def wait_for_published_lag(
    registry: DeploymentRegistry, deployment_id: str, expected: int = 0, timeout_s: float = 30
) -> int | None:
    """The deployment's published lag once it is `expected` (else the last one seen, at the timeout).

    Gold's Delta commit is visible before the listener publishes that batch's progress (events are
    asynchronous): right after `wait_for_gold` the file may still hold no lag, or an earlier batch's.
    """
    from revenue_platform.streaming.supervisor import progress_summary

    deadline = time.monotonic() + timeout_s
    behind = progress_summary(registry.get(deployment_id))["offsets_behind_latest"]
    while behind != expected and time.monotonic() < deadline:
        time.sleep(0.5)
        behind = progress_summary(registry.get(deployment_id))["offsets_behind_latest"]
    return None if behind is None else int(behind)
