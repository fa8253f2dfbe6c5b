"""The `soak_live` bench phase (issue 57): hours of live traffic, the lake maintained beside it.

One deployment runs the unchanged app on the shipped processing-time trigger while orders are produced
at `--soak-rate` for `--soak-minutes`; `maintain_lake` (the DAG's function, shipped policy) runs on it
every `--soak-maintain-minutes` in a thread of its own, as the DAG would beside the app. At the end of
every `--soak-slice-minutes` slice the phase samples what grows with time: the driver's memory, the
deployment's disk (all files, and the bytes the Delta snapshots reference: the data itself), the Delta
log files, the checkpoints, and the state store's memory and SST files (from the revenue query's
progress). After the run, per slice: the latency of the records appended in it (Kafka append time to
the gold commit that made their window visible, as in the live phases) and the revenue batches' wall.
Then the deployment is started again on what the hours left (state, lake): its time to ready against
the first start's, on an empty deployment. The report holds each slice against the first warm one
(issue 57's bound for the last slice's p99: 1.2x).

Spark's event log stays off: hours of it would be gigabytes the measurement does not need.
"""

from __future__ import annotations

import statistics
import threading
import time
from array import array
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench import datagen, stats
from bench.consumers import append_times
from bench.gold import gold_commit_times_ms
from bench.memory import return_freed_memory, tree_rss_bytes
from bench.phases.live import drain, visible_batches
from bench.phases.month_two import (
    batches_overlapping,
    deployment_disk_use,
    maintain_deployment,
    order_batches,
    restart_ready_s,
)
from bench.run import BenchRun
from bench.services import create_run_topics
from bench.spark_app import app_overrides, epoch_ms, read_events, start_driver, stop_driver, wait_ready
from spark_apps.contract.naming import REVENUE_QUERY_ROLE, DeploymentNames, query_role

SOAK_DEPLOYMENT = "bench-soak"
SOAK_TOPIC = "orders_soak"


class _Every:
    """`work` in a thread of its own, every `period_s` (the first after one period), until stopped;
    each run's start and end (epoch ms), seconds and result or error."""

    def __init__(self, work: Callable[[], dict[str, Any]], period_s: float) -> None:
        self.runs: list[dict[str, Any]] = []
        self._stop = threading.Event()
        # Daemon threads: an interrupted run (Ctrl-C, SIGTERM) must not wait hours for them.
        self._thread = threading.Thread(
            target=self._loop, args=(work, period_s), name="soak-every", daemon=True
        )
        self._thread.start()

    def _loop(self, work: Callable[[], dict[str, Any]], period_s: float) -> None:
        while not self._stop.wait(period_s):
            outcome: dict[str, Any] = {"started_ms": int(time.time() * 1000)}
            try:
                outcome["result"] = work()
            except Exception as error:  # reported; the soak goes on, as the DAG's next run would
                outcome["error"] = f"{type(error).__name__}: {error}"
            outcome["ended_ms"] = int(time.time() * 1000)
            self.runs.append(outcome)

    def stop(self) -> list[dict[str, Any]]:
        self._stop.set()
        self._thread.join()
        return self.runs


class _Producing:
    """The paced producer in a thread of its own, so the phase can sample while it runs."""

    def __init__(self, run: BenchRun, topic: str, rate: int, seconds: float) -> None:
        self._outcome: dict[str, Any] = {}
        stamper = datagen.LiveOrderStamper(run.settings.seed, run.settings.stores)

        def produce() -> None:
            try:
                self._outcome.update(datagen.produce_paced(run.bootstrap, topic, rate, seconds, stamper))
            except Exception as error:
                self._outcome["error"] = f"{type(error).__name__}: {error}"

        self._thread = threading.Thread(target=produce, name="soak-producer", daemon=True)
        self._thread.start()

    def result(self) -> dict[str, Any]:
        self._thread.join()
        return self._outcome


def snapshot_bytes(table: Path) -> int | None:
    """Bytes of the data files the table's current Delta snapshot references (None: no table yet)."""
    from deltalake import DeltaTable

    from revenue_platform.lake_storage import snapshot_size

    if not (table / "_delta_log").is_dir():
        return None
    return snapshot_size(DeltaTable(str(table)))[1]


def state_operators(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The state operators of the newest revenue progress event: memory, commit time and the bytes of
    RocksDB's SST files (not its rows: the app turns RocksDB's row tracking off, a cost per update, so
    `numRowsTotal` is always 0)."""
    revenue = [e for e in events if query_role(e["name"]) == REVENUE_QUERY_ROLE]
    if not revenue:
        return []
    operators = []
    for operator in revenue[-1].get("stateOperators") or []:
        custom = operator.get("customMetrics") or {}
        operators.append(
            {
                "operator": operator.get("operatorName"),
                "memory_bytes": operator.get("memoryUsedBytes"),
                "commit_ms": operator.get("commitTimeMs"),
                "sst_bytes": custom.get("rocksdbSstFileSize"),
            }
        )
    return operators


def sample(names: DeploymentNames, driver_pid: int, folder: Path, started: float) -> dict[str, Any]:
    """What grows with time, now."""
    disk = deployment_disk_use(names)
    return {
        "at_s": round(time.monotonic() - started, 1),
        "driver_rss_mib": round(tree_rss_bytes(driver_pid) / 2**20, 1),
        "disk": disk,
        "snapshot_bytes": {
            "gold": snapshot_bytes(Path(names.gold_revenue_table)),
            "bronze": snapshot_bytes(Path(names.bronze_orders_table)),
        },
        "state": state_operators(read_events(folder)),
    }


def slice_latencies(
    appended_and_latency_ms: Sequence[tuple[int, int]], start_ms: int, slice_s: float, slices: int
) -> list[dict[str, float | int]]:
    """The latency summary (s) of the records appended in each slice of `slice_s` from `start_ms`
    (records past the last slice count in it: the producer's final moments)."""
    buckets: list[array[int]] = [array("q") for _ in range(slices)]
    for appended, latency in appended_and_latency_ms:
        index = min(slices - 1, max(0, int((appended - start_ms) // (slice_s * 1000))))
        buckets[index].append(latency)
    return [stats.latency_summary([latency / 1000 for latency in bucket]) for bucket in buckets]


def dedupe_eviction(event: dict[str, Any]) -> tuple[int, int]:
    """The dedupe operator's work of evicting in one revenue batch: (ids removed, bucket timers fired).
    It is the state operator with timers (`numExpiredTimers`, a custom metric of transformWithState)."""
    for operator in event.get("stateOperators") or []:
        custom = operator.get("customMetrics") or {}
        if "numExpiredTimers" in custom:
            return int(operator.get("numRowsRemoved") or 0), int(custom["numExpiredTimers"])
    return 0, 0


def slice_batch_walls(
    events: list[dict[str, Any]], start_ms: int, slice_s: float, slices: int
) -> list[dict[str, Any]]:
    """Per slice: the revenue batches that read orders and started in it, their median, p99 and max
    wall, and the most ids and bucket timers the dedupe operator evicted in one of them (in step, the
    buckets' timers made one batch a quarter horizon evict a quarter of the state)."""
    walls: list[list[int]] = [[] for _ in range(slices)]
    evictions: list[list[tuple[int, int]]] = [[] for _ in range(slices)]
    for event in order_batches(events):
        index = int((epoch_ms(event["timestamp"]) - start_ms) // (slice_s * 1000))
        if 0 <= index < slices:
            walls[index].append(int(event["durationMs"]["triggerExecution"]))
            evictions[index].append(dedupe_eviction(event))
    summaries: list[dict[str, Any]] = []
    for slice_walls, slice_evictions in zip(walls, evictions, strict=True):
        ordered = sorted(slice_walls)
        summaries.append(
            {
                "batches": len(ordered),
                "wall_ms_median": statistics.median(ordered),
                "wall_ms_p99": stats.percentile(ordered, 0.99),
                "wall_ms_max": ordered[-1],
                "ids_evicted_max": max(removed for removed, _ in slice_evictions),
                "timers_fired_max": max(timers for _, timers in slice_evictions),
            }
            if ordered
            else {"batches": 0}
        )
    return summaries


def batches_beside_maintenance(
    events: list[dict[str, Any]], runs: Sequence[dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """The revenue batches that overlapped any maintenance run, and the others: count, median and max
    wall (ms): what maintenance costs the live path."""
    spans = [(r["started_ms"], r["ended_ms"]) for r in runs if "ended_ms" in r]
    during, otherwise = batches_overlapping(events, spans)
    return {"during": during, "otherwise": otherwise}


def phase_soak_live(run: BenchRun) -> None:
    settings = run.settings
    names = DeploymentNames(run.lake_root, SOAK_DEPLOYMENT)
    slice_s = settings.soak_slice_seconds
    slices = max(1, round(settings.soak_seconds / slice_s))
    with run.phase("soak_live") as record:
        record.update(
            {
                "rate_per_s": settings.soak_rate,
                "seconds": settings.soak_seconds,
                "slice_s": slice_s,
                "maintain_every_s": settings.soak_maintain_every_s,
                "gold_retention_hours": settings.soak_gold_retention_hours,
                "trigger_interval_s": settings.trigger_interval_s,
            }
        )
        create_run_topics(run, [SOAK_TOPIC])
        overrides = app_overrides(run, SOAK_DEPLOYMENT, SOAK_TOPIC, "processing_time")
        process, folder = start_driver(run, "soak_live", overrides, {"spark.eventLog.enabled": "false"})
        samples: list[dict[str, Any]] = []
        try:
            record["ready_after_s"] = wait_ready(names.driver_status_file, process)
            started = time.monotonic()
            start_ms = int(time.time() * 1000)
            producing = _Producing(run, SOAK_TOPIC, settings.soak_rate, settings.soak_seconds)
            maintaining = _Every(
                lambda: maintain_deployment(
                    run.lake_root, SOAK_DEPLOYMENT, settings.soak_gold_retention_hours
                ),
                settings.soak_maintain_every_s,
            )
            try:
                for index in range(1, slices + 1):
                    while time.monotonic() < started + index * slice_s:
                        if process.poll() is not None:
                            raise RuntimeError(f"the driver exited ({process.returncode}) in slice {index}")
                        time.sleep(5)
                    samples.append(sample(names, process.pid, folder, started))
                    run.log(f"[bench] soak slice {index}/{slices}: {_progress_line(samples[-1])}")
                    run.save_partial()
            finally:
                record["samples"] = samples
                record["producer"] = producing.result()
                record["maintenance"] = maintaining.stop()
            record["drained"] = drain(
                folder, int(record["producer"].get("records", 0)), settings.trigger_interval_s
            )
        finally:
            stop_driver(run, process, names.driver_status_file)
        # The same deployment again, its state and lake as the hours left them: the restart's cost.
        record["restart_ready_s"] = restart_ready_s(run, names, SOAK_TOPIC, "soak_live_restart")
        events = read_events(folder)
        batches = visible_batches(events, SOAK_TOPIC, gold_commit_times_ms(run.lake_root, SOAK_DEPLOYMENT))
        appended, firsts = append_times(run.bootstrap, SOAK_TOPIC)
        pairs, invisible = stats.record_latencies_ms(appended, firsts, batches)
        del appended
        record["invisible_records"] = invisible
        record["slice_latency"] = slice_latencies(pairs, start_ms, slice_s, slices)
        record["slice_batches"] = slice_batch_walls(events, start_ms, slice_s, slices)
        record["batches_beside_maintenance"] = batches_beside_maintenance(events, record["maintenance"])
        del pairs
        return_freed_memory()


def _progress_line(latest: dict[str, Any]) -> str:
    disk_mib = sum(part["bytes"] for part in latest["disk"].values()) / 2**20
    state = ", ".join(
        f"{op['operator']} memory {(op['memory_bytes'] or 0) / 2**20:,.0f} MiB, "
        f"SST {(op['sst_bytes'] or 0) / 2**20:,.0f} MiB"
        for op in latest["state"]
    )
    return f"driver {latest['driver_rss_mib']:,.0f} MiB, disk {disk_mib:,.0f} MiB, state: {state or '—'}"
