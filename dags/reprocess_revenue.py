"""
Recompute the closed revenue windows of each data interval from the raw orders, reconcile them
with the live gold table and repair it (the batch result wins). Reads Kafka (offsets found by
append time) or, when retention already removed part of the range, the bronze archive; calls the
same transformations as the streaming app (spark_apps/reprocess_revenue_job.py, submitted with
SparkSubmitOperator on `spark_default`). Idempotent: rerunning an interval changes nothing.

Each scheduled run waits until its interval's windows are closed (interval end + watermark),
then reprocesses [data_interval_start, data_interval_end). Backfill past hours with
`airflow backfill create --dag-id reprocess_revenue --from-date 2026-11-22T09:00:00
--to-date 2026-11-22T11:00:00 --max-active-runs 2` (one run per hour whose START is in the range,
both ends inclusive: this one covers [09:00, 12:00)); at most two Spark jobs run at once whatever the
backfill's concurrency. Recompute a range shorter than an hour, or not on the hour, from the trigger
form (`range_start`, `range_end`, `source`): backfill only creates whole hourly intervals that ended.
The reconciliation report of every range is written under `<lake>/reports/reconciliation/` (objects
in the bucket for a lake on the object store: the submit task then adds S3A's jars and settings, and
the store's credentials to spark-submit's environment only) and summarized in the
`summarize_reconciliation` task log; the gold Asset event triggers the checks.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import CronDataIntervalTimetable, dag, get_current_context, task

from revenue_platform.airflow import reprocess_tasks
from revenue_platform.airflow.assets import revenue_gold_asset
from revenue_platform.airflow.dag_defaults import platform_default_args
from revenue_platform.airflow.params import params_from_model
from revenue_platform.airflow.spark_submit_operator import PlatformSparkSubmitOperator
from revenue_platform.connections import SPARK_CONN_ID
from revenue_platform.errors import ConfigError
from revenue_platform.reprocessing import REPROCESS_JOB, ReprocessRequest, spark_env, spark_jars_csv

# Each reprocessing job is a local Spark driver with two cores' worth of work; more at once only queue.
SPARK_JOBS_AT_ONCE = 2


def _plan_field(name: str) -> str:
    """Jinja for one field of the plan_reprocessing XCom (rendered as a native object)."""
    return "{{ ti.xcom_pull(task_ids='plan_reprocessing')['" + name + "'] }}"


@dag(
    # Hourly by default; REPROCESS_SCHEDULE (a cron expression) changes it per environment. A data-
    # interval timetable, because each run reprocesses [data_interval_start, data_interval_end): Airflow
    # 3's default cron timetable gives runs a zero-length interval.
    schedule=CronDataIntervalTimetable(os.environ.get("REPROCESS_SCHEDULE", "@hourly"), timezone="UTC"),
    start_date=datetime(2026, 11, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=2,
    doc_md=__doc__,
    tags=["spark", "reprocessing", "revenue"],
    # Lets the Spark task take a list of arguments straight from the plan's XCom.
    render_template_as_native_obj=True,
    user_defined_macros={"spark_jars_csv": spark_jars_csv, "spark_env": spark_env},
    default_args=platform_default_args(timedelta(minutes=2), non_retryable=(ConfigError,)),
    params=params_from_model(ReprocessRequest),
)
def reprocess_revenue() -> None:
    @task(multiple_outputs=False)
    def plan_reprocessing() -> dict[str, Any]:
        return reprocess_tasks.plan_reprocessing(get_current_context())

    @task.sensor(poke_interval=30, timeout=2 * 3600, mode="reschedule")
    def wait_until_windows_closed(plan: dict[str, Any]) -> bool:
        """The app may still update windows its watermark has not passed; repair only closed ones."""
        from revenue_platform.reprocessing import windows_closed

        return windows_closed(plan)

    # The provider's operator, but spark-submit gets the allow-listed environment, not the worker's.
    submit_reprocess_job = PlatformSparkSubmitOperator(
        task_id="submit_reprocess_job",
        conn_id=SPARK_CONN_ID,
        application=str(REPROCESS_JOB),
        name="reprocess-revenue",
        application_args=_plan_field("spark_args"),
        # The connector jars, plus S3A's for a lake on the object store (the plan's; nothing secret).
        jars="{{ spark_jars_csv(ti.xcom_pull(task_ids='plan_reprocessing')['object_store_jars']) }}",
        env_vars="{{ spark_env() }}",
        # The job's Kafka login and the object store's credentials reach spark-submit's environment
        # only: neither a template field nor the task process's environment.
        secret_environment=reprocess_tasks.job_secrets,
        # The UI off, plus S3A's settings (no credentials) for a lake on the object store.
        conf=_plan_field("spark_conf"),
        # At most SPARK_JOBS_AT_ONCE spark-submits across every run, backfills included: Airflow 3's
        # backfill has its own max_active_runs (default 10) and ignores the DAG's.
        max_active_tis_per_dag=SPARK_JOBS_AT_ONCE,
    )

    @task(outlets=[revenue_gold_asset()], multiple_outputs=False)
    def summarize_reconciliation(plan: dict[str, Any]) -> dict[str, Any]:
        return reprocess_tasks.summarize_reconciliation(get_current_context(), plan)

    # At parse time this is an XComArg standing in for the plan dict (see provision_topics).
    plan: Any = plan_reprocessing()
    wait_until_windows_closed(plan) >> submit_reprocess_job >> summarize_reconciliation(plan)


reprocess_revenue()
