"""Run the revenue suites for one deployment and interval with Great Expectations, and judge the result.

`run_revenue_checks` reads gold and bronze with delta-rs, derives the validated frames
(`frames.py`), runs one GX Checkpoint per suite on an ephemeral context whose validation results and
Data Docs live under `<lake_root>/quality/` (so Data Docs show every run, not just the last), appends
the outcomes to the results history and raises `QualityCheckFailed` with a readable summary when an
expectation failed. It is the one entry point DAGs and gates call.

GX builds its site on a local filesystem. For a lake on an object store the folder GX works in is a
local mirror of the lake's `quality/` folder (`quality_root`): a run first fetches the files other
hosts stored that the mirror lacks (run pages and validation results, so the index lists every run;
on a host's first run, every earlier run's, a few hundred KB each), and afterwards copies the files it
wrote to the store (`_publish_to_store`), where the operations view serves them.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from revenue_platform.errors import ConfigError
from revenue_platform.lake_storage import download_missing_from_store, upload_to_store
from revenue_platform.paths import state_dir
from revenue_platform.quality import frames as F
from revenue_platform.quality.config import QualityConfig
from revenue_platform.quality.data_docs import localize_data_docs
from revenue_platform.quality.errors import QualityCheckFailed
from revenue_platform.quality.loaders import (
    bronze_since,
    load_bronze,
    load_gold,
    newest_window_end_at_or_before,
    parse_bronze_orders,
)
from revenue_platform.quality.report import CheckOutcome, QualityReport
from revenue_platform.quality.results import results_table_path, store_report
from revenue_platform.quality.suites import SUITES, build_suite
from spark_apps.contract.naming import DeploymentNames, is_local_location, local_path
from spark_apps.contract.object_store import is_object_store_root
from spark_apps.contract.records import GOLD_KEY_COLUMNS
from spark_apps.contract.side_files import object_key

if TYPE_CHECKING:
    import pandas as pd
    from great_expectations.data_context.data_context.abstract_data_context import AbstractDataContext

log = logging.getLogger(__name__)


def quality_root(lake_root: str) -> Path:
    """Local folder of Data Docs and GX validation results (GX's site builder writes a local
    filesystem): the lake's own `quality/` folder, or for a lake on an object store its mirror under
    the state dir (`<state dir>/quality-mirror/<bucket>/<key>/quality`)."""
    if is_local_location(lake_root):
        return local_path(lake_root) / "quality"
    if not is_object_store_root(lake_root):
        raise ConfigError(f"lake_root {lake_root!r}: neither a local path nor an s3a:// object store root")
    key = PurePosixPath(object_key(lake_root))
    if ".." in key.parts or not key.parts:
        raise ConfigError(f"lake_root {lake_root!r}: its bucket and key must not contain '..'")
    return state_dir() / "quality-mirror" / Path(*key.parts) / "quality"


def quality_location(lake_root: str) -> str:
    """Where the lake keeps its quality folder: `quality_root` for a local lake, else on the store."""
    if is_local_location(lake_root):
        return str(quality_root(lake_root))
    return f"{lake_root.rstrip('/')}/quality"


def data_docs_location(lake_root: str) -> str:
    """The lake's Data Docs site (a local folder or a folder on the object store)."""
    return f"{quality_location(lake_root)}/data_docs"


def data_docs_index(lake_root: str) -> str:
    return f"{data_docs_location(lake_root)}/index.html"


def data_docs_link(index: str) -> str:
    """What a log line offers to open: a file: URL for a local site; a site on the object store is
    served by the operations view (`/data-docs/`), named with its location."""
    if is_local_location(index):
        return f"file://{local_path(index)}"
    return f"{index} (served by the operations view at data-docs/index.html)"


# What GX writes under the quality folder: its site, and the validation results it renders.
_GX_FOLDERS = ("data_docs", "gx")


def _fetch_from_store(lake_root: str, root: Path) -> None:
    """Give the mirror what other hosts stored and it lacks: GX's index lists the run pages its site
    holds, next to the validation results they render."""
    # Only GX's folders: the results history next to them is a Delta table, read where it is.
    fetched = sum(
        download_missing_from_store(f"{quality_location(lake_root)}/{folder}", root / folder)
        for folder in _GX_FOLDERS
    )
    if fetched:
        log.info("Fetched %d Data Docs and validation result files from the lake into %s", fetched, root)


def _publish_to_store(lake_root: str, root: Path, since: float) -> None:
    """Copy what this run wrote in the mirror (results, pages, the index, assets) to the store."""
    written = [
        path
        for folder in _GX_FOLDERS
        for path in (root / folder).rglob("*")
        if path.is_file() and path.stat().st_mtime >= since
    ]
    copied = upload_to_store(root, written, quality_location(lake_root))
    log.info("Copied %d Data Docs and validation result files to %s", copied, quality_location(lake_root))


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


def gold_rows_from(start: datetime, end: datetime, config: QualityConfig) -> tuple[datetime, datetime]:
    """The window starts whose gold rows the checks of [`start`, `end`) read: the windows overlapping
    the interval (gold_windows) and those closed in it, ending in (start - watermark, end - watermark]
    (reconciliation). Freshness needs only the newest closed window, which is among them if any is."""
    size = timedelta(seconds=config.size_seconds)
    return start - timedelta(seconds=config.watermark_seconds) - size, end


def build_frames(
    gold_rows: pd.DataFrame,
    gold_schema: dict[str, str],
    bronze: pd.DataFrame,
    interval_start: datetime,
    interval_end: datetime,
    config: QualityConfig,
    newest_end_before: Callable[[datetime], datetime | None] | None = None,
) -> dict[str, pd.DataFrame]:
    """Every dataset the suites validate, keyed by dataset name. `gold_rows` need only hold the
    windows `gold_rows_from` says; `newest_end_before` finds an older closed window for freshness."""
    orders = parse_bronze_orders(bronze)
    return {
        "gold_schema": F.schema_frame(gold_schema),
        "gold_windows": F.gold_windows_frame(gold_rows, interval_start, interval_end, config),
        "reconciliation": F.reconciliation_frame(gold_rows, orders, interval_start, interval_end, config),
        "freshness": F.freshness_frame(gold_rows, interval_end, config, orders, newest_end_before),
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
        `<lake_root>/quality/results` and Data Docs rebuilt under `<lake_root>/quality/data_docs/` (built in
    `quality_root`'s mirror and copied there when the lake is on an object store).
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

    gold_path = names.gold_revenue_table
    gold = load_gold(gold_path, *gold_rows_from(start, end, config))
    since = bronze_since(
        start,
        config.size_seconds,
        config.watermark_seconds,
        config.bronze_lookback_seconds,
        config.dedupe_horizon_seconds,
    )
    bronze = load_bronze(names.bronze_orders_table, since)
    datasets = build_frames(
        gold.rows,
        gold.schema,
        bronze,
        start,
        end,
        config,
        lambda bound: newest_window_end_at_or_before(gold_path, bound),
    )
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
    on_store = is_object_store_root(lake_root)
    if on_store:
        _fetch_from_store(lake_root, root)
    # A second's slack: a file system's timestamps may be coarser than the clock's.
    started = time.time() - 1.0
    outcomes = validate_frames(deployment_id, datasets, config, root, run_id)
    if on_store:
        _publish_to_store(lake_root, root, started)
    report = QualityReport(
        run_id=run_id,
        deployment_id=deployment_id,
        interval_start=start,
        interval_end=end,
        outcomes=tuple(outcomes),
        data_docs_index=data_docs_index(lake_root),
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
