"""The `month_two` bench phase (issue 57): does a live batch cost on day 30 what it costs on day 1?

For each `--month-two-days` N (1 and 30 by default), a deployment's gold and bronze are seeded as N days
of live batches leave them (bench/month_two.py: gold's hourly files, bronze's daily ones, both Delta
logs as long as the tables' log retention keeps them), then the unchanged app runs on it live at the
`--month-two-rate` like a live phase (same latency measure), is stopped and started again. Reported
per N: the per-batch wall time and bytes written to gold and bronze (from the Delta log's commits
after the seed), the latency, the restart's time to ready, the deployment's disk use and log files,
and the peak memory of the phase; then each N against the first: the ratios issue 57 bounds
(batch bytes and wall <= 1.2x, restart <= 1.5x, memory <= 1.25x).

Beside the live run, a quarter into its measured part, the lake maintenance of the `maintain_lake` DAG
runs on the deployment (`revenue_platform.lake_maintenance.maintain_lake`, the shipped policy): what
it did, how long it took, and the wall of the batches it overlapped against the others'. After the
restart, the quality suite checks the newest seeded hour in a process of its own, as an Airflow task
runs it: its time and peak memory (the seeded bronze holds no orders, so its reconciliation fails;
the cost is what is measured).
"""

from __future__ import annotations

import shutil
import statistics
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.month_two import commits_after, disk_use, seed_deployment, shipped_log_retention_days
from bench.phases.control_plane import run_quality_process
from bench.phases.live import run_live
from bench.run import BenchRun
from bench.spark_app import app_overrides, epoch_ms, read_events, start_driver, stop_driver, wait_ready
from spark_apps.contract.naming import REVENUE_QUERY_ROLE, DeploymentNames, query_role


def deployment_disk_use(names: DeploymentNames) -> dict[str, dict[str, int]]:
    """Disk use of the deployment's gold, bronze and checkpoints (bytes, files, Delta log files)."""
    return {
        "gold": disk_use(Path(names.gold_revenue_table)),
        "bronze": disk_use(Path(names.bronze_orders_table)),
        "checkpoints": disk_use(Path(names.checkpoint_root)),
    }


def batch_costs(table: Path, seeded_version: int) -> dict[str, Any]:
    """The commits the live run added to `table`: how many, and the median bytes and rows each wrote."""
    commits = [c for c in commits_after(table, seeded_version) if c["bytes_added"] or c["files_removed"]]
    if not commits:
        return {"commits": 0}
    return {
        "commits": len(commits),
        "bytes_per_commit_median": int(statistics.median(c["bytes_added"] for c in commits)),
        "rows_per_commit_median": int(statistics.median(c["rows_added"] for c in commits)),
        "files_removed_per_commit_median": statistics.median(c["files_removed"] for c in commits),
    }


def order_batches(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The revenue query's progress events of batches that read orders."""
    return [e for e in events if query_role(e["name"]) == REVENUE_QUERY_ROLE and int(e["numInputRows"]) > 0]


def revenue_batch_walls_ms(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The revenue query's batches that read orders: how many, and their median and p90 wall (ms)."""
    walls = sorted(int(e["durationMs"]["triggerExecution"]) for e in order_batches(events))
    if not walls:
        return {"batches": 0}
    return {
        "batches": len(walls),
        "wall_ms_median": statistics.median(walls),
        "wall_ms_p90": walls[min(len(walls) - 1, int(len(walls) * 0.9))],
    }


def phase_month_two(run: BenchRun, days: int) -> None:
    deployment = f"bench-month-{days}d"
    topic = f"orders_month_{days}d"
    names = DeploymentNames(run.lake_root, deployment)
    gold, bronze = Path(names.gold_revenue_table), Path(names.bronze_orders_table)
    with run.phase(f"month_two_{days}d") as record:
        began = time.monotonic()
        seed = seed_deployment(
            gold, bronze, days, run.settings.stores, datetime.now(UTC), shipped_log_retention_days()
        )
        seed["seed_s"] = round(time.monotonic() - began, 1)
        record["seed"] = seed
        record["disk_after_seed"] = deployment_disk_use(names)
        live: dict[str, Any] = {}
        folder = run_live(
            run,
            run.settings.month_two_rate,
            deployment,
            topic,
            live,
            f"month_two_{days}d",
            beside=lambda: maintain_deployment(run.lake_root, deployment),
        )
        record["live"] = live
        events = read_events(folder)
        record["revenue_batches"] = revenue_batch_walls_ms(events)
        record["maintenance_beside_live"] = batches_beside(events, live.get("beside") or {})
        record["gold_commits"] = batch_costs(gold, seed["gold_version"])
        record["bronze_commits"] = batch_costs(bronze, seed["bronze_version"])
        record["disk_after_live"] = deployment_disk_use(names)
        record["restart_ready_s"] = restart_ready_s(run, names, topic, f"month_two_{days}d_restart")
        # The newest hour the seed filled (the clock may have passed another hour since).
        seeded_until = datetime.fromisoformat(seed["gold_until"])
        record["quality"] = run_quality_process(
            run, deployment, seeded_until - timedelta(hours=1), seeded_until
        )
    # Millions of seeded log files: gone before the next N seeds its own.
    for folder_path in (names.gold_revenue_table, names.bronze_orders_table, names.checkpoint_root):
        shutil.rmtree(folder_path, ignore_errors=True)


def maintain_deployment(
    lake_root: str, deployment: str, gold_retention_hours: float | None = None
) -> dict[str, Any]:
    """The `maintain_lake` DAG's work on one deployment (and the lake's own tables): the shipped policy,
    or gold's superseded files kept `gold_retention_hours` (the form's `gold_retention_hours`)."""
    from revenue_platform.lake_maintenance import MaintenancePolicy, maintain_lake, reports_as_dicts

    policy = (
        MaintenancePolicy(gold_retention=timedelta(hours=gold_retention_hours))
        if gold_retention_hours
        else None
    )
    began = time.monotonic()
    reports = maintain_lake(lake_root, [deployment], policy)
    return {"seconds": round(time.monotonic() - began, 1), "tables": reports_as_dicts(reports)}


def batches_beside(events: list[dict[str, Any]], beside: dict[str, Any]) -> dict[str, Any]:
    """The revenue batches that ran while the maintenance did, and the others: count, median and
    max wall (ms); the maintenance's own outcome."""
    started, ended = beside.get("started_ms"), beside.get("ended_ms")
    summary: dict[str, Any] = {k: v for k, v in beside.items() if k != "result"}
    summary["maintenance"] = beside.get("result")
    if started is None or ended is None:
        return summary
    during, otherwise = batches_overlapping(events, [(started, ended)])
    return {**summary, "batches_during": during, "batches_otherwise": otherwise}


def batches_overlapping(
    events: list[dict[str, Any]], spans: list[tuple[int, int]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The revenue batches that read orders and overlapped any of `spans` (epoch ms, start and end),
    and the others: count, median and max wall (ms) of each."""
    during: list[int] = []
    others: list[int] = []
    for event in order_batches(events):
        wall = int(event["durationMs"]["triggerExecution"])
        begun = epoch_ms(event["timestamp"])
        overlaps = any(begun < ended and begun + wall > started for started, ended in spans)
        (during if overlaps else others).append(wall)
    summaries = [
        {"batches": len(walls), "wall_ms_median": statistics.median(walls), "wall_ms_max": max(walls)}
        if walls
        else {"batches": 0}
        for walls in (during, others)
    ]
    return summaries[0], summaries[1]


def restart_ready_s(run: BenchRun, names: DeploymentNames, topic: str, name: str) -> float:
    """Start the stopped deployment again: seconds from submit until every query passed its first
    trigger (the resume from its checkpoint, gold and bronze included)."""
    overrides = app_overrides(run, names.deployment_id, topic, "processing_time")
    process, _ = start_driver(run, name, overrides)
    try:
        return round(wait_ready(names.driver_status_file, process), 1)
    finally:
        stop_driver(run, process, names.driver_status_file)
