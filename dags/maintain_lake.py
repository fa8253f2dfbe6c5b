"""
Keep the lake's disk and read cost flat while apps run for weeks: every hour, for each registered
deployment, compact gold's closed hours and bronze's closed days, VACUUM files no snapshot within the
retention references (gold 24 h, bronze 7 days by default), checkpoint each Delta log and drop expired
log entries; then the same for the registry's and quality results' tables. Runs beside live apps with
delta-rs (no Spark): compaction never touches the hours and day a live batch writes. The task log has
one line per table: files and MiB before and after, files compacted and vacuumed. `dry_run` measures
and lists what VACUUM would delete without changing anything. Example:
`airflow dags trigger maintain_lake --conf '{"deployment_id": "blue", "dry_run": true}'`.
See docs/operations.md ("Lake maintenance").
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import dag, get_current_context, task

from revenue_platform.airflow import operations_tasks
from revenue_platform.airflow.dag_defaults import platform_default_args
from revenue_platform.airflow.params import params_from_model
from revenue_platform.errors import ConfigError
from revenue_platform.lake_maintenance import MaintenanceRequest
from revenue_platform.registry import DeploymentNotFoundError


@dag(
    schedule="35 * * * *",
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    doc_md=__doc__,
    tags=["lake", "maintenance"],
    default_args=platform_default_args(
        timedelta(minutes=5), non_retryable=(ConfigError, DeploymentNotFoundError)
    ),
    params=params_from_model(MaintenanceRequest),
)
def maintain_lake() -> None:
    @task(multiple_outputs=False)
    def maintain() -> list[dict[str, Any]]:
        return operations_tasks.maintain(get_current_context())

    maintain()


maintain_lake()
