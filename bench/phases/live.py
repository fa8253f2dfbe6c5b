"""Bench phases of live traffic: the app runs on a processing-time trigger while orders are produced at
a steady rate; each record's latency is from its Kafka append time to the gold commit that made its
window visible (bench/stats.py), and the verdict says whether the app kept up."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import datagen, stats
from bench.consumers import append_times, committed_record_times
from bench.gold import gold_commit_times_ms
from bench.memory import return_freed_memory
from bench.run import BenchRun
from bench.services import create_run_topics
from bench.spark_app import (
    app_overrides,
    duration_profile,
    epoch_ms,
    read_events,
    start_driver,
    stop_driver,
    wait_ready,
)
from bench.spark_profile import event_log_profile
from spark_apps.contract.naming import REVENUE_QUERY_ROLE, DeploymentNames, query_role


def revenue_positions(events: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, dict[str, int]]]]:
    """Each revenue progress event with the Kafka offsets reflected in gold after it.

    The same rule as the app's publisher: the query reads Kafka and commits gold in each batch, so its
    own end offsets are its position.
    """
    from spark_apps.engine.observability import summarize_progress

    return [
        (event, summarize_progress(event, {})["end_offsets"])
        for event in events
        if query_role(event["name"]) == REVENUE_QUERY_ROLE
    ]


def processed_offsets(events: list[dict[str, Any]]) -> int:
    """Kafka records reflected in gold: the revenue query's position, summed over partitions."""
    positions = revenue_positions(events)
    if not positions:
        return 0
    return sum(o for parts in positions[-1][1].values() for o in parts.values())


def drain(folder: Path, produced: int, trigger_s: int) -> bool:
    """Wait (bounded) until the revenue query processed all `produced` records; whether it did."""
    deadline = time.monotonic() + max(60.0, 6 * trigger_s)
    while time.monotonic() < deadline:
        if processed_offsets(read_events(folder)) >= produced:
            break
        time.sleep(1)
    return processed_offsets(read_events(folder)) >= produced


def visible_batches(
    events: list[dict[str, Any]], topic: str, commits_ms: list[int]
) -> list[stats.VisibleBatch]:
    """Each revenue batch that read `topic`: the offsets it reached and when gold made them visible
    (`commits_ms`: gold's commit times; or the revenue topic's record times, the last one inside a
    batch being when its transaction's records were all sent, its commit a few ms later)."""
    batches = []
    for event, offsets in revenue_positions(events):
        if topic not in offsets:
            continue
        started = epoch_ms(event["timestamp"])
        finished = started + int(event["durationMs"]["triggerExecution"])
        batches.append(
            stats.VisibleBatch(
                {int(p): int(o) for p, o in offsets[topic].items()},
                stats.gold_visible_at_ms(started, finished, commits_ms),
            )
        )
    return batches


class _Beside:
    """`work` in a thread of its own, started `after_s` from now."""

    def __init__(self, work: Callable[[], dict[str, Any]], after_s: float) -> None:
        self._outcome: dict[str, Any] = {}
        self._thread = threading.Thread(target=self._run, args=(work, after_s), name="bench-beside")
        self._thread.start()

    def _run(self, work: Callable[[], dict[str, Any]], after_s: float) -> None:
        time.sleep(after_s)
        self._outcome["started_ms"] = int(time.time() * 1000)
        try:
            self._outcome["result"] = work()
        except Exception as error:  # the bench reports it; the live run goes on
            self._outcome["error"] = f"{type(error).__name__}: {error}"
        self._outcome["ended_ms"] = int(time.time() * 1000)

    def result(self) -> dict[str, Any]:
        self._thread.join()
        return self._outcome


def phase_live(run: BenchRun, rate: int) -> None:
    with run.phase(f"live_{rate}") as record:
        run_live(run, rate, f"bench-live-{rate}", f"orders_live_{rate}", record, f"live_{rate}")


def run_live(
    run: BenchRun,
    rate: int,
    deployment: str,
    topic: str,
    record: dict[str, Any],
    name: str,
    beside: Callable[[], dict[str, Any]] | None = None,
) -> Path:
    """A live run of `deployment` reading `topic` (created here) at `rate` orders/s, its figures added
    to `record`; returns the driver's run folder (`name` under the run's). `beside`, if given, runs
    once in a thread of its own a quarter into the measured part (after the warm-up), while the app
    keeps serving: what it returns, its start and end (epoch ms) or its error go to record["beside"]."""
    names = DeploymentNames(run.lake_root, deployment)
    trigger_s = run.settings.trigger_interval_s
    create_run_topics(run, [topic])
    overrides = app_overrides(run, deployment, topic, "processing_time")
    process, folder = start_driver(run, name, overrides)
    status_file = names.driver_status_file
    try:
        record["ready_after_s"] = wait_ready(status_file, process)
        stamper = datagen.LiveOrderStamper(run.settings.seed, run.settings.stores)
        warmup_s = run.settings.live_warmup_seconds
        alongside = _Beside(beside, warmup_s + run.settings.live_seconds / 4) if beside else None
        record["producer"] = datagen.produce_paced(
            run.bootstrap, topic, rate, warmup_s + run.settings.live_seconds, stamper
        )
        record["drained"] = drain(folder, record["producer"]["records"], trigger_s)
        if alongside:
            record["beside"] = alongside.result()
    finally:
        stop_driver(run, process, status_file)
    events = read_events(folder)
    batches = visible_batches(events, topic, gold_commit_times_ms(run.lake_root, deployment))
    appended, firsts = append_times(run.bootstrap, topic)
    all_pairs, invisible = stats.record_latencies_ms(appended, firsts, batches)
    pairs = stats.after_warmup(all_pairs, warmup_s)
    # The same orders to their window's record on the revenue topic, which each batch writes after gold.
    revenue_topic = overrides.get("kafka.revenue_topic", run.app_config.kafka.revenue_topic)
    topic_batches = visible_batches(events, topic, committed_record_times(run.bootstrap, revenue_topic))
    topic_pairs, _ = stats.record_latencies_ms(appended, firsts, topic_batches)
    record["latency_revenue_topic"] = stats.latency_summary(
        [latency / 1000 for _, latency in stats.after_warmup(topic_pairs, warmup_s)]
    )
    record["latency_revenue_topic_from_cold_start"] = stats.latency_summary(
        [latency / 1000 for _, latency in topic_pairs]
    )
    del topic_pairs
    summary = stats.latency_summary([latency / 1000 for _, latency in pairs])
    first_q, last_q = stats.quarter_medians_s(pairs)
    verdict = stats.judge_sustained(
        rate,
        record["producer"]["achieved_per_s"],
        invisible,
        first_q,
        last_q,
        trigger_s,
        record["drained"],
    )
    record.update(
        {
            "target_per_s": rate,
            "trigger_interval_s": trigger_s,
            "latency": summary,
            "warmup_s": warmup_s,
            "latency_from_cold_start": stats.latency_summary([lat / 1000 for _, lat in all_pairs]),
            "invisible_records": invisible,
            "first_quarter_p50_s": first_q,
            "last_quarter_p50_s": last_q,
            "sustained": verdict.sustained,
            "verdict": verdict.reason,
            "profile_ms": duration_profile(events),
            "stage_profile": event_log_profile(folder),
            "batches": len(batches),
        }
    )
    del appended, all_pairs, pairs
    return_freed_memory()
    return folder
