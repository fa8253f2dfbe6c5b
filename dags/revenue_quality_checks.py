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

from airflow.sdk import AssetOrTimeSchedule, CronDataIntervalTimetable, Param, dag

from revenue_platform.assets import revenue_gold_asset
from revenue_platform.dag_defaults import platform_default_args
from revenue_platform.forms import MAX_DATETIME_TEXT, MAX_QUALITY_SPAN
from revenue_platform.quality.airflow_tasks import quality_gate
from revenue_platform.quality.config import QualityConfig
from spark_apps.contract.config_rules import MAX_ROOT_LENGTH
from spark_apps.contract.naming import DEPLOYMENT_ID_PATTERN

_DEFAULTS = QualityConfig()


@dag(
    # Hourly over the previous hour, plus a run per gold update (reprocessing, replay) so a bad
    # rewrite is caught before anyone reads it.
    schedule=AssetOrTimeSchedule(
        timetable=CronDataIntervalTimetable("0 * * * *", timezone="UTC"),
        assets=[revenue_gold_asset()],
    ),
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    doc_md=__doc__,
    tags=["quality", "revenue", "great_expectations"],
    default_args=platform_default_args(timedelta(minutes=2)),
    params={
        "deployment_id": Param(
            None,
            type=["null", "string"],
            pattern=DEPLOYMENT_ID_PATTERN.pattern,
            description="Deployment whose gold table is checked; empty = the live deployment from the "
            "registry (the run is skipped while none is live). An asset-triggered run checks the "
            "deployment named in the event.",
        ),
        "interval_start": Param(
            None,
            type=["null", "string"],
            format="date-time",
            maxLength=MAX_DATETIME_TEXT,
            description="Start (UTC, inclusive) of the checked interval; empty = the range the "
            f"triggering gold event rewrote, else the run's data interval. A form's interval spans at "
            f"most {MAX_QUALITY_SPAN}.",
        ),
        "interval_end": Param(
            None,
            type=["null", "string"],
            format="date-time",
            maxLength=MAX_DATETIME_TEXT,
            description="End (UTC, exclusive); empty = the run's data interval end. Freshness is "
            "measured against it, never against the current time.",
        ),
        "freshness_max_lag": Param(
            _DEFAULTS.freshness_max_lag,
            type="string",
            maxLength=40,
            description="Max age of the newest closed window at the interval end, e.g. '15 minutes' "
            "(at most 7 days).",
        ),
        "revenue_ceiling": Param(
            str(_DEFAULTS.revenue_ceiling),
            type="string",
            pattern=r"^[0-9]{1,14}(\.[0-9]{1,2})?$(?!\n)",
            description="A window's revenue must be below this (exact decimal, e.g. '1000000.00').",
        ),
        "max_dlq_share": Param(
            _DEFAULTS.max_dlq_share,
            type="number",
            minimum=0,
            maximum=1,
            description="Max share of the interval's records that are dead letters.",
        ),
        "max_late_share": Param(
            _DEFAULTS.max_late_share,
            type="number",
            minimum=0,
            maximum=1,
            description="Max share of the interval's valid records later than the watermark.",
        ),
        "lake_root": Param(
            None,
            type=["null", "string"],
            maxLength=MAX_ROOT_LENGTH,
            description="Lake root: the platform's lake or a folder inside it; empty = $PLATFORM_LAKE_ROOT "
            "or <state dir>/lake.",
        ),
    },
)
def revenue_quality_checks() -> None:
    quality_gate()


revenue_quality_checks()
