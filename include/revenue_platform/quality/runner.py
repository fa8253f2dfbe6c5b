"""Run the revenue suites for one deployment and interval with Great Expectations, and judge the result.

`run_revenue_checks` reads gold and bronze with delta-rs, derives the validated frames
(`frames.py`), runs one GX Checkpoint per suite on an ephemeral context whose validation results and
Data Docs live under `<lake_root>/quality/` (so Data Docs show every run, not just the last), appends
the outcomes to the results history and raises `QualityCheckFailed` with a readable summary when an
expectation failed. It is the one entry point DAGs and gates call.
"""

from __future__ import annotations

import logging
import os
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from revenue_platform.errors import ConfigError
from revenue_platform.quality import frames as F
from revenue_platform.quality.config import QualityConfig
from revenue_platform.quality.data_docs import localize_data_docs
from revenue_platform.quality.errors import QualityCheckFailed
from revenue_platform.quality.loaders import bronze_since, load_bronze, load_gold, parse_bronze_orders
from revenue_platform.quality.report import CheckOutcome, QualityReport
from revenue_platform.quality.results import results_table_path, store_report
from revenue_platform.quality.suites import SUITES, build_suite
from spark_apps.contract.naming import DeploymentNames, is_local_location, local_path
from spark_apps.contract.records import GOLD_KEY_COLUMNS

if TYPE_CHECKING:
    import pandas as pd
    from great_expectations.data_context.data_context.abstract_data_context import AbstractDataContext

log = logging.getLogger(__name__)


def quality_root(lake_root: str) -> Path:
    """Local folder of Data Docs and GX validation results (Data Docs need a local filesystem)."""
    if not is_local_location(lake_root):
        raise ConfigError(
            f"lake_root {lake_root!r}: Data Docs are written to a local folder; "
            "run the checks against a local or file: lake root"
        )
    return local_path(lake_root) / "quality"


def data_docs_index(lake_root: str) -> Path:
    return quality_root(lake_root) / "data_docs" / "index.html"


def _as_utc(moment: datetime, name: str) -> datetime:
    # The platform reads zone-less times as UTC (docs/architecture.md, "Time"); do the same here.
    if not isinstance(moment, datetime):
        raise ConfigError(f"{name} must be a datetime, got {type(moment).__name__}")
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def quiet_gx_logging() -> None:
    """GX's INFO lines (~200 per run: stores, data sources, site builders) drown the task log's
    verdict; its warnings and errors still show. The platform's own lines name each failed check."""
    logging.getLogger("great_expectations").setLevel(logging.WARNING)


def gx_context(root: Path) -> AbstractDataContext:
    """An ephemeral GX context: suites come from code; validation results and Data Docs are on disk."""
    # No internet, and no usage statistics wanted: switch analytics off before GX is imported.
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    quiet_gx_logging()
    import great_expectations as gx
    from great_expectations.data_context.types.base import (
        DataContextConfig,
        InMemoryStoreBackendDefaults,
        ProgressBarsConfig,
    )

    config = DataContextConfig(
        store_backend_defaults=InMemoryStoreBackendDefaults(),
        analytics_enabled=False,
        progress_bars=ProgressBarsConfig(globally=False),
        data_docs_sites={
            "local_site": {
                "class_name": "SiteBuilder",
                "show_how_to_buttons": False,
                "store_backend": {
                    "class_name": "TupleFilesystemStoreBackend",
                    "base_directory": str(root / "data_docs"),
                },
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            }
        },
    )
    # Persisting validation results is what lets Data Docs list earlier runs next to this one.
    assert config.stores is not None
    config.stores[config.validation_results_store_name]["store_backend"] = {
        "class_name": "TupleFilesystemStoreBackend",
        "base_directory": str(root / "gx" / "validations"),
    }
    return gx.get_context(project_config=config, mode="ephemeral")


def build_frames(
    gold_rows: pd.DataFrame,
    gold_schema: dict[str, str],
    bronze: pd.DataFrame,
    interval_start: datetime,
    interval_end: datetime,
    config: QualityConfig,
) -> dict[str, pd.DataFrame]:
    """Every dataset the suites validate, keyed by dataset name."""
    orders = parse_bronze_orders(bronze)
    return {
        "gold_schema": F.schema_frame(gold_schema),
        "gold_windows": F.gold_windows_frame(gold_rows, interval_start, interval_end, config),
        "reconciliation": F.reconciliation_frame(gold_rows, orders, interval_start, interval_end, config),
        "freshness": F.freshness_frame(gold_rows, interval_end, config, orders),
        "input_health": F.input_health_frame(bronze, orders, interval_start, interval_end, config),
    }


def _row_label(dataset: str, row: pd.Series) -> str:
    if dataset in ("gold_windows", "reconciliation"):
        return F.window_key(row["location_id"], row["order_type"], row["window_start"])
    if dataset == "gold_schema":
        return f"{row['column_name']} (actual {row['actual_type']}, expected {row['expected_type']})"
    return ", ".join(f"{column}={row[column]}" for column in row.index)


def _outcome(dataset: str, suite: str, result: Any, frame: pd.DataFrame, sample_size: int) -> CheckOutcome:
    import pandas as pd

    expectation = result.expectation_config
    details: dict[str, Any] = dict(result.result or {})
    exception = result.exception_info or {}
    observed = details.get("observed_value")
    if exception.get("raised_exception"):
        observed = f"error: {exception.get('exception_message')}"
    indices = [index for index in details.get("unexpected_index_list") or [] if isinstance(index, int)]
    rows = frame.loc[[index for index in indices if index in frame.index]]
    failing_keys: tuple[str, ...] = ()
    failing_windows: tuple[tuple[str, str, datetime], ...] = ()
    if not result.success:
        labels = [_row_label(dataset, row) for _, row in rows.iterrows()]
        if not labels and dataset in ("freshness", "input_health"):
            labels = [_row_label(dataset, row) for _, row in frame.iterrows()]
        failing_keys = tuple(dict.fromkeys(labels))[:sample_size]
        if set(GOLD_KEY_COLUMNS) <= set(rows.columns):
            failing_windows = tuple(
                (row["location_id"], row["order_type"], pd.Timestamp(row["window_start"]).to_pydatetime())
                for _, row in rows.iterrows()
                if not any(pd.isna(row[column]) for column in GOLD_KEY_COLUMNS)
            )
    unexpected = details.get("unexpected_count")
    return CheckOutcome(
        dataset=dataset,
        suite=suite,
        check=str((expectation.meta or {}).get("check", expectation.type)),
        expectation_type=str(expectation.type),
        description=str(expectation.description or ""),
        success=bool(result.success),
        element_count=details.get("element_count"),
        unexpected_count=int(unexpected) if unexpected is not None else None,
        observed=None if observed is None else str(observed),
        failing_keys=failing_keys,
        failing_windows=failing_windows,
    )


def validate_frames(
    deployment_id: str,
    datasets: dict[str, pd.DataFrame],
    config: QualityConfig,
    root: Path,
    run_id: str,
) -> list[CheckOutcome]:
    """Run one Checkpoint (with a Data Docs update) per suite; return every expectation's outcome."""
    quiet_gx_logging()  # before GX is imported: its import logs ~200 INFO lines registering its API
    import great_expectations as gx
    from great_expectations.checkpoint.actions import UpdateDataDocsAction

    context = gx_context(root)
    outcomes: list[CheckOutcome] = []
    for spec in SUITES:
        frame = datasets[spec.dataset].reset_index(drop=True)
        suite = context.suites.add(build_suite(deployment_id, spec, config))
        asset = context.data_sources.add_pandas(name=suite.name).add_dataframe_asset(name=spec.dataset)
        batch = asset.add_batch_definition_whole_dataframe("whole_frame")
        validation = context.validation_definitions.add(
            gx.ValidationDefinition(name=suite.name, data=batch, suite=suite)
        )
        checkpoint = context.checkpoints.add(
            gx.Checkpoint(
                name=suite.name,
                validation_definitions=[validation],
                actions=[UpdateDataDocsAction(name="update_data_docs")],
                # COMPLETE returns every offending row index, which maps back to window keys.
                result_format={"result_format": "COMPLETE"},
            )
        )
        run = checkpoint.run(batch_parameters={"dataframe": frame}, run_id=gx.RunIdentifier(run_name=run_id))
        for suite_result in run.run_results.values():
            outcomes.extend(
                _outcome(spec.dataset, suite.name, result, frame, config.sample_size)
                for result in suite_result.results
            )
    # GX's pages load their scripts and styles from CDNs; point them at vendored copies (offline).
    localize_data_docs(root / "data_docs")
    return outcomes


def run_revenue_checks(
    deployment_id: str,
    lake_root: str,
    interval_start: datetime,
    interval_end: datetime,
    config: QualityConfig | None = None,
    *,
    run_name: str | None = None,
    raise_on_failure: bool = True,
    store_results: bool = True,
    tables: DeploymentNames | None = None,
) -> QualityReport:
    """Check deployment `deployment_id`'s gold table for `[interval_start, interval_end)`.

    Returns the report when every expectation passed (or `raise_on_failure` is False); otherwise
    raises `QualityCheckFailed` (its `report` attribute has the details). `tables` (default: the
    deployment's tables under `lake_root`) are its registered ones when known. Results are appended to
    `<lake_root>/quality/results` and Data Docs rebuilt under `<lake_root>/quality/data_docs/`.
    Raises `QualityInputMissing` when gold or bronze does not exist, `ConfigError` on bad arguments.
    """
    config = config or QualityConfig()
    try:
        names = tables or DeploymentNames(lake_root, deployment_id)
    except ValueError as error:
        raise ConfigError(str(error)) from error
    start, end = _as_utc(interval_start, "interval_start"), _as_utc(interval_end, "interval_end")
    if start >= end:
        raise ConfigError(f"interval_start {start.isoformat()} must be before interval_end {end.isoformat()}")
    root = quality_root(lake_root)
    run_id = run_name or f"{deployment_id}__{end:%Y%m%dT%H%M%SZ}__{uuid.uuid4().hex[:8]}"

    gold = load_gold(names.gold_revenue_table)
    since = bronze_since(
        start,
        config.size_seconds,
        config.watermark_seconds,
        config.bronze_lookback_seconds,
        config.dedupe_horizon_seconds,
    )
    bronze = load_bronze(names.bronze_orders_table, since)
    datasets = build_frames(gold.rows, gold.schema, bronze, start, end, config)
    log.info(
        "Checking deployment %r, interval [%s, %s): %d gold windows in the interval, %d closed windows "
        "to reconcile, %d bronze records read",
        deployment_id,
        start.isoformat(),
        end.isoformat(),
        len(datasets["gold_windows"]),
        len(datasets["reconciliation"]),
        len(bronze),
    )
    outcomes = validate_frames(deployment_id, datasets, config, root, run_id)
    report = QualityReport(
        run_id=run_id,
        deployment_id=deployment_id,
        interval_start=start,
        interval_end=end,
        outcomes=tuple(outcomes),
        data_docs_index=str(data_docs_index(lake_root)),
        results_table=results_table_path(lake_root) if store_results else None,
        stats={
            "gold_windows_in_interval": len(datasets["gold_windows"]),
            "closed_windows_reconciled": len(datasets["reconciliation"]),
            "bronze_records_read": len(bronze),
            **{k: int(v) for k, v in datasets["input_health"].iloc[0].items() if k.endswith("records")},
        },
    )
    if store_results:
        store_report(report, lake_root)
    log.info("%s", report.failure_summary())
    if raise_on_failure and not report.success:
        raise QualityCheckFailed(report)
    return report
