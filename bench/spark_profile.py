"""Where a Spark app's time goes: stage durations from Spark's event log, grouped by kind of work.

Spark's progress reports only say that a streaming batch spent its time in `addBatch` (the
foreachBatch body), and inside a streaming query every stage's call site is the same
("start at ..."). The event log (spark.eventLog.enabled) also lists each stage's RDDs, whose
names say what the stage did: Delta's snapshot reconstruction ("Delta Table State"), the MERGE's
materialised source, the state store, the Kafka source. Summing stage wall time per kind names
the expensive step. The same log says which executors ran the tasks (`executor_usage`): how
many workers of a cluster a run really used.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

# First match wins: (substring of an RDD name, kind of work).
STAGE_KINDS = (
    ("Delta Table State", "Delta snapshot reconstruction (log replay after each commit)"),
    ("mergeMaterializedSource", "Delta MERGE into gold"),
    ("StateStoreRDD", "state store (dedupe / window aggregation)"),
    ("KafkaSourceRDD", "Kafka source read"),
    ("DataSourceRDD", "Kafka source read + parse/validate and what is written from it"),
    ("ParallelCollectionRDD", "driver-built data (table creation, small lookups)"),
    ("ShuffledRowRDD", "shuffle stages (aggregations, joins)"),
)


def stage_kind(stage_name: str, rdd_names: list[str]) -> str:
    """What a stage did, from its RDD names; its call site when none is recognised."""
    for fragment, kind in STAGE_KINDS:
        if any(fragment in name for name in rdd_names):
            return kind
    return stage_name


def stage_profile(event_lines: Iterable[str], top: int = 12) -> list[dict[str, Any]]:
    """The `top` kinds of work by summed stage wall time: stages, seconds, task run seconds, share."""
    totals: dict[str, dict[str, float]] = {}
    task_run_ms: dict[int, float] = {}
    for line in event_lines:
        if '"SparkListenerTaskEnd"' in line:
            event = json.loads(line)
            stage_id = int(event.get("Stage ID", -1))
            run_ms = (event.get("Task Metrics") or {}).get("Executor Run Time", 0)
            task_run_ms[stage_id] = task_run_ms.get(stage_id, 0.0) + float(run_ms)
        elif '"SparkListenerStageCompleted"' in line:
            info = json.loads(line)["Stage Info"]
            submitted, completed = info.get("Submission Time"), info.get("Completion Time")
            if submitted is None or completed is None:
                continue
            kind = stage_kind(info["Stage Name"], [rdd.get("Name", "") for rdd in info.get("RDD Info", [])])
            site = totals.setdefault(kind, {"stages": 0, "wall_ms": 0.0, "task_ms": 0.0})
            site["stages"] += 1
            site["wall_ms"] += completed - submitted
            site["task_ms"] += task_run_ms.get(int(info["Stage ID"]), 0.0)
    overall = sum(site["wall_ms"] for site in totals.values()) or 1.0
    ranked = sorted(totals.items(), key=lambda item: item[1]["wall_ms"], reverse=True)[:top]
    return [
        {
            "work": name,
            "stages": int(site["stages"]),
            "wall_s": site["wall_ms"] / 1000,
            "task_run_s": site["task_ms"] / 1000,
            "share_of_stage_time": site["wall_ms"] / overall,
        }
        for name, site in ranked
    ]


def event_log_files(folder: Path) -> list[Path]:
    """Spark's event log files in `folder`: rolling (`eventlog_v2_<app>/events_<n>_<app>`) or single
    (named after the application id: `local-...` under a local master, `app-...` under a standalone one)."""
    rolling = sorted(
        folder.glob("eventlog_v2_*/events_*"), key=lambda p: (p.parent.name, int(p.name.split("_")[1]))
    )
    single = [
        p
        for p in sorted(folder.glob("*"))
        if p.name.startswith(("local-", "app-")) and p.is_file() and not p.name.endswith(".inprogress")
    ]
    return rolling or single


def event_log_lines(folder: Path) -> Iterable[str]:
    """Every line of the (uncompressed) event log files Spark wrote into `folder`, in order."""
    for path in event_log_files(folder):
        with path.open() as log:
            yield from log


def event_log_profile(folder: Path, top: int = 12) -> list[dict[str, Any]]:
    """`stage_profile` of the event log Spark wrote into `folder`."""
    return stage_profile(event_log_lines(folder), top)


def executor_usage(event_lines: Iterable[str]) -> dict[str, Any]:
    """Which executors the app got and which did work: the executors added (with their cores), and
    per executor that ran tasks, its task count and summed task run time. The driver's own listener
    writes these events, so they count what Spark really scheduled, not what was asked for."""
    cores: dict[str, int] = {}
    tasks: dict[str, dict[str, float]] = {}
    for line in event_lines:
        if '"SparkListenerExecutorAdded"' in line:
            event = json.loads(line)
            cores[str(event["Executor ID"])] = int(event["Executor Info"]["Total Cores"])
        elif '"SparkListenerTaskEnd"' in line:
            event = json.loads(line)
            executor = str(event["Task Info"]["Executor ID"])
            run_ms = (event.get("Task Metrics") or {}).get("Executor Run Time", 0)
            done = tasks.setdefault(executor, {"tasks": 0, "task_run_s": 0.0})
            done["tasks"] += 1
            done["task_run_s"] += float(run_ms) / 1000
    return {
        "executors_added": len(cores),
        "executor_cores": sum(cores.values()),
        "executors_with_tasks": len(tasks),
        "per_executor": {
            executor: {"tasks": int(done["tasks"]), "task_run_s": round(done["task_run_s"], 3)}
            for executor, done in sorted(tasks.items())
        },
    }
