"""
Check a deployment's windowed revenue (gold) with Great Expectations: schema, non-null keys, known
order types, positive counts, revenue in `[0, revenue_ceiling)`, window duration and alignment,
unique window keys, freshness against the run's data interval end, an exact reconciliation of every
closed window with the valid, deduplicated raw orders in bronze, and the interval's DLQ and late
shares. Runs hourly over the previous hour, and whenever the `revenue_windows_gold` asset is updated
over the range the event says was rewritten (for the deployment named in the event). Skipped while no
deployment is live (a fresh stack). Fails, without retrying, when an expectation fails; the
task log names each failed check, its row count and sample window keys, and the Data Docs path.
`airflow dags trigger revenue_quality_checks --conf '{"deployment_id": "green"}'`; docs/quality.md
explains every check, threshold and where results go.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow.sdk import AssetOrTimeSchedule, CronDataIntervalTimetable, dag

from revenue_platform.airflow.assets import revenue_gold_asset
from revenue_platform.airflow.dag_defaults import platform_default_args
from revenue_platform.airflow.params import params_from_model
from revenue_platform.airflow.quality_tasks import quality_gate
from revenue_platform.quality.request import QUALITY_SCHEDULE, QualityRequest


@dag(
    # Hourly over the previous hour, plus a run per gold update (reprocessing, replay) so a bad
    # rewrite is caught before anyone reads it.
    schedule=AssetOrTimeSchedule(
        timetable=CronDataIntervalTimetable(QUALITY_SCHEDULE, timezone="UTC"),
        assets=[revenue_gold_asset()],
    ),
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    doc_md=__doc__,
    tags=["quality", "revenue", "great_expectations"],
    default_args=platform_default_args(timedelta(minutes=2)),
    params=params_from_model(QualityRequest),
)
def revenue_quality_checks() -> None:
    quality_gate()


revenue_quality_checks()
