"""History of quality runs as two append-only Delta tables under `<lake_root>/quality/`.

`results`: one row per expectation per run (deployment, interval, check, verdict, counts, sample keys).
`failing_windows`: one row per offending window per failed expectation per run, so "which checks has
this window failed, and when" is one filter away. Both are written with delta-rs (no Spark) and an
explicit Arrow schema, so concurrent gates of different deployments append safely to the same tables.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from revenue_platform.lake_storage import delta_storage_options
from revenue_platform.quality.report import QualityReport
from revenue_platform.quality.suites import SUITE_VERSION
from spark_apps.contract.object_store import delta_rs_uri

_TS = pa.timestamp("us", tz="UTC")
RESULTS_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("deployment_id", pa.string(), nullable=False),
        pa.field("suite_version", pa.string(), nullable=False),
        pa.field("checked_at", _TS, nullable=False),
        pa.field("interval_start", _TS, nullable=False),
        pa.field("interval_end", _TS, nullable=False),
        pa.field("dataset", pa.string(), nullable=False),
        pa.field("suite", pa.string(), nullable=False),
        pa.field("check", pa.string(), nullable=False),
        pa.field("expectation_type", pa.string(), nullable=False),
        pa.field("success", pa.bool_(), nullable=False),
        pa.field("element_count", pa.int64()),
        pa.field("unexpected_count", pa.int64()),
        pa.field("observed", pa.string()),
        pa.field("failing_keys_sample", pa.list_(pa.string())),
        pa.field("data_docs_index", pa.string()),
    ]
)
FAILING_WINDOWS_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("deployment_id", pa.string(), nullable=False),
        pa.field("checked_at", _TS, nullable=False),
        pa.field("interval_end", _TS, nullable=False),
        pa.field("check", pa.string(), nullable=False),
        pa.field("location_id", pa.string()),
        pa.field("order_type", pa.string()),
        pa.field("window_start", _TS),
    ]
)


def results_table_path(lake_root: str) -> str:
    return "/".join([lake_root.rstrip("/"), "quality", "results"])


def failing_windows_table_path(lake_root: str) -> str:
    return "/".join([lake_root.rstrip("/"), "quality", "failing_windows"])


def store_report(report: QualityReport, lake_root: str, checked_at: datetime | None = None) -> None:
    """Append the report's rows to both history tables (the failing-windows one only when needed)."""
    from deltalake import write_deltalake

    options = delta_storage_options(lake_root) or None  # the lake's object store, if it is on one
    # checked_at is audit metadata (when the gate ran); no check result depends on it.
    checked = checked_at or datetime.now(UTC)
    rows: list[dict[str, Any]] = [
        {
            "run_id": report.run_id,
            "deployment_id": report.deployment_id,
            "suite_version": SUITE_VERSION,
            "checked_at": checked,
            "interval_start": report.interval_start,
            "interval_end": report.interval_end,
            "dataset": outcome.dataset,
            "suite": outcome.suite,
            "check": outcome.check,
            "expectation_type": outcome.expectation_type,
            "success": outcome.success,
            "element_count": outcome.element_count,
            "unexpected_count": outcome.unexpected_count,
            "observed": outcome.observed,
            "failing_keys_sample": list(outcome.failing_keys),
            "data_docs_index": report.data_docs_index,
        }
        for outcome in report.outcomes
    ]
    write_deltalake(
        delta_rs_uri(results_table_path(lake_root)),
        pa.Table.from_pylist(rows, schema=RESULTS_SCHEMA),
        mode="append",
        storage_options=options,
    )
    windows = [
        {
            "run_id": report.run_id,
            "deployment_id": report.deployment_id,
            "checked_at": checked,
            "interval_end": report.interval_end,
            "check": outcome.check,
            "location_id": location_id,
            "order_type": order_type,
            "window_start": window_start,
        }
        for outcome in report.failures
        for location_id, order_type, window_start in outcome.failing_windows
    ]
    if windows:
        write_deltalake(
            delta_rs_uri(failing_windows_table_path(lake_root)),
            pa.Table.from_pylist(windows, schema=FAILING_WINDOWS_SCHEMA),
            mode="append",
            storage_options=options,
        )
