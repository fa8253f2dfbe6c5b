"""The `diff` gate of a blue-green replay: blue's and green's gold, window by window, over every
window both have made final.

Final is the platform's one rule (`revenue_platform.streaming.finality`, the same the reprocess
sensor and the hourly checks use): a deployment's windows are final through its event-time
watermark, or, on a quiet stream whose watermark stands still, through a watermark delay before the
moment its app had read all of Kafka. So two caught-up apps on an idle stream compare every window,
not only the ones a watermark that waits for the next order has closed. The gate first gives both
apps a short, bounded time to make final what had arrived before it started (a live stream's next
batch, an idle app's next idle report), then reads each one's finality BEFORE its gold.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from revenue_platform.bluegreen.logic import WindowDiff, diff_windows
from revenue_platform.bluegreen.request import ReplayRequest
from revenue_platform.gold_table import read_gold
from revenue_platform.registry import DeploymentRecord, DeploymentRegistry, DesiredState, ObservedState
from revenue_platform.streaming.finality import final_through, wait_for_final_windows

# How long the gate waits for both apps to make final what had arrived when it started: a batch or an
# idle report of each (5 s triggers by default); an app that is down or far behind is compared as is.
FINALITY_WAIT_S = 60.0


def gold_rows(table_path: str) -> list[dict[str, Any]]:
    """Rows of a gold table (window times as naive UTC), [] if it does not exist yet."""
    rows: list[dict[str, Any]] = read_gold(table_path).to_pylist()
    for row in rows:
        for column in ("window_start", "window_end"):
            row[column] = row[column].replace(tzinfo=None)
    return rows


def _running(record: DeploymentRecord) -> bool:
    return record.desired_state == DesiredState.RUNNING.value and record.observed_state in (
        ObservedState.RUNNING.value,
        ObservedState.STARTING.value,
    )


def _progress_file_and_lateness(record: DeploymentRecord) -> tuple[str, timedelta | None]:
    """Where the deployment publishes its progress, and its watermark delay; None (the watermark rule
    only) for an app that is not running: its last idle report says what Kafka held then, and records
    appended since are in no window of its gold (a retired blue replayed from its bronze archive)."""
    from spark_apps.contract.naming import REVENUE_QUERY_ROLE

    config = record.app_config()
    progress_file = config.names.progress_file(REVENUE_QUERY_ROLE)
    lateness = timedelta(seconds=config.window.delay_seconds) if _running(record) else None
    return progress_file, lateness


def final_windows_through(record: DeploymentRecord) -> datetime | None:
    """Through when the deployment's windows are final (`streaming.finality.final_through`), as naive
    UTC like gold's window times; None before its first progress. Read it before its gold."""
    through = final_through(*_progress_file_and_lateness(record))
    return through.astimezone(UTC).replace(tzinfo=None) if through is not None else None


def _prefixed(progress: Callable[[str], None], prefix: str) -> Callable[[str], None]:
    return lambda said: progress(prefix + said)


def wait_until_final(
    records: list[DeploymentRecord],
    started: datetime,
    timeout_s: float,
    poll_s: float,
    progress: Callable[[str], None],
) -> None:
    """Wait (one shared deadline) until each running deployment's windows ending a watermark delay
    before `started` are final: what had arrived by then is in its gold for good. A stopped app
    publishes nothing more: it is compared as it is."""
    deadline = time.monotonic() + timeout_s
    for record in records:
        progress_file, lateness = _progress_file_and_lateness(record)
        if lateness is None:
            progress(
                f"[replay] {record.deployment_id} is not running: its windows are final by its watermark"
            )
            continue
        wait_for_final_windows(
            progress_file,
            started - lateness,
            lateness,
            max(0.0, deadline - time.monotonic()),
            poll_s,
            _prefixed(progress, f"[replay] {record.deployment_id}: "),
        )


def diff_against_blue(
    registry: DeploymentRegistry,
    request: ReplayRequest,
    blue: str,
    progress: Callable[[str], None] = print,
    wait_s: float = FINALITY_WAIT_S,
) -> WindowDiff:
    """Compare the final windows both cover; the log gets a summary and a sample of mismatches."""
    records = [registry.get(blue), registry.get(request.green)]
    wait_until_final(records, datetime.now(UTC), wait_s, min(request.poll_interval_s, 5.0), progress)
    horizons = {record.deployment_id: final_windows_through(record) for record in records}
    progress(
        "[replay] windows final (by the watermark, or a watermark delay before all of Kafka was read) "
        "through "
        + ", ".join(
            f"{name} {at.isoformat() if at else 'unknown (no progress)'}" for name, at in horizons.items()
        )
    )
    known = [at for at in horizons.values() if at is not None]
    diff = diff_windows(
        gold_rows(records[0].gold_table),
        gold_rows(records[1].gold_table),
        min(known) if len(known) == len(horizons) else None,
        request.revenue_tolerance,
        request.count_tolerance,
    )
    summary = diff.summary()
    progress(
        f"[replay] diff {blue} vs {request.green} over final windows "
        f"[{summary['common_from']}, {summary['common_until']}]: {diff.windows_compared} compared, "
        f"{len(diff.mismatches)} beyond tolerance (revenue ±{request.revenue_tolerance}, count "
        f"±{request.count_tolerance}); orders blue {diff.blue_orders} green {diff.green_orders}, "
        f"revenue blue {diff.blue_revenue} green {diff.green_revenue}"
    )
    for mismatch in summary["sample"]:
        progress(f"[replay]   mismatch {mismatch}")
    return diff
