"""Bench phases that measure how the app's cost grows with history (docs/performance.md).

* `history`: a blue-green replay from the replay phase's bronze into a new deployment (all of the
  topic comes from bronze, none from Kafka), with the driver's result size capped at 256 MiB: its
  history is read in bounded batches, so records/s and the driver's peak memory should not depend
  on how many orders bronze holds (compare runs with `--orders`).
* `restart`: a deployment with 1-day windows reads the whole topic, then a few more orders arrive
  and it is started again: the time to its first committed batch, and the resume's own share of it,
  should not depend on the history either.
* `window_heavy`: the replay of a topic of its own with ~5 orders per store x order type x window
  (`--window-heavy-orders` over an hour, as many stores as that takes), next to the main replay's
  rate: the per-window work must not dominate.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from bench.consumers import ceiling_consumer, end_offsets, read_work_ceiling
from bench.gold import gold_stats
from bench.phases.replay import generate_and_produce
from bench.run import BenchRun
from bench.services import create_run_topics
from bench.spark_app import (
    BOUNDED_DRIVER_CONF,
    app_overrides,
    duration_profile,
    epoch_ms,
    read_events,
    run_to_end,
    throughput,
)
from bench.work_ceiling import WindowGeometry
from revenue_platform import processes
from revenue_platform.lake_storage import read_side_file
from revenue_platform.orders_generator import GeneratorSettings, generate_orders, produce
from spark_apps.contract.config_rules import interval_seconds
from spark_apps.contract.naming import (
    HISTORY_QUERY_ROLE,
    REVENUE_QUERY_ROLE,
    DeploymentNames,
    query_role,
)

SOURCE_DEPLOYMENT = "bench-replay"  # the replay phase's deployment: its bronze is the history
RESTART_NEW_ORDERS = 1_000


def phase_history(run: BenchRun, generated: GeneratorSettings) -> None:
    deployment = "bench-history"
    consumer = ceiling_consumer(run.bootstrap, "bench-history-ends")
    try:
        ends = end_offsets(consumer, run.orders_topic)
    finally:
        consumer.close()
    history = {
        "bronze_table": DeploymentNames(run.lake_root, SOURCE_DEPLOYMENT).bronze_orders_table,
        "kafka_offsets": {str(partition): offset for partition, offset in ends.items()},
    }
    with run.phase("history") as record:
        overrides = {
            **app_overrides(run, deployment, run.orders_topic, "available_now"),
            "history": json.dumps(history),
        }
        submitted, finished, code, folder = run_to_end(run, "history", overrides)
        record["exit_code"] = code
        if code != 0:
            record["error"] = processes.tail(folder / "driver.log", 30)
            return
        events = read_events(folder)
        history_events = [e for e in events if query_role(e["name"]) == HISTORY_QUERY_ROLE]
        records = sum(int(e["numInputRows"]) for e in history_events)
        gold = gold_stats(run.lake_root, deployment)
        source = gold_stats(run.lake_root, SOURCE_DEPLOYMENT)
        record.update(
            {
                "records": records,
                "history_batches": len(history_events),
                "largest_batch_records": max(int(e["numInputRows"]) for e in history_events),
                "driver_conf": BOUNDED_DRIVER_CONF,
                **throughput(records, history_events, submitted, finished),
                "profile_ms": duration_profile(events),
                "gold": gold,
                "gold_equals_the_replayed_deployment": {
                    k: gold[k] for k in ("rows", "orders_counted", "revenue_cents")
                }
                == {k: source[k] for k in ("rows", "orders_counted", "revenue_cents")},
                "expected_orders_counted": generated.orders,
            }
        )


def phase_restart(run: BenchRun, generated: GeneratorSettings) -> None:
    deployment = "bench-day-windows"
    overrides = {
        **app_overrides(run, deployment, run.orders_topic, "available_now"),
        "window.size": "1 day",
    }
    with run.phase("restart_first_run") as record:
        submitted, finished, code, folder = run_to_end(run, "restart-first", overrides)
        record.update({"exit_code": code, "wall_incl_start_s": finished - submitted})
        if code != 0:
            record["error"] = processes.tail(folder / "driver.log", 30)
            return
    # A few orders just after the history, so the restarted app has a batch to run.
    start = generated.start + timedelta(seconds=generated.span_seconds)
    newer = list(
        generate_orders(
            GeneratorSettings(
                orders=RESTART_NEW_ORDERS,
                stores=generated.stores,
                start=start,
                span_seconds=5,
                first_order_id=10**9,
                seed=generated.seed + 1,
            )
        )
    )
    produce(run.bootstrap, run.orders_topic, newer)
    with run.phase("restart") as record:
        submitted, finished, code, folder = run_to_end(run, "restart", overrides)
        record["exit_code"] = code
        if code != 0:
            record["error"] = processes.tail(folder / "driver.log", 30)
            return
        events = read_events(folder)
        first = min(events, key=lambda e: int(e["batchId"]))
        first_end = (epoch_ms(first["timestamp"]) + first["durationMs"]["triggerExecution"]) / 1000
        progress = (
            read_side_file(DeploymentNames(run.lake_root, deployment).progress_file(REVENUE_QUERY_ROLE)) or {}
        )
        resumed = [
            line
            for line in (folder / "driver.log").read_text().splitlines()
            if "resumed revenue state" in line
        ]
        record.update(
            {
                "history_orders": generated.orders,
                "window_size": "1 day",
                "submit_to_first_batch_committed_s": first_end - submitted,
                "first_batch_ms": first["durationMs"]["triggerExecution"],
                "first_batch_resume_step_ms": (progress.get("batch_steps_ms") or {}).get("resume"),
                "resume_log": resumed[-1][-300:] if resumed else None,
                "first_batch_at": datetime.fromtimestamp(first_end).isoformat(),
            }
        )


WINDOW_HEAVY_TOPIC = "orders_window_heavy"
WINDOW_HEAVY_ORDERS_PER_WINDOW = 5


def window_heavy_stores(orders: int, window_s: int, span_s: int = 3600, order_types: int = 2) -> int:
    """How many stores make `orders` over `span_s` land ~WINDOW_HEAVY_ORDERS_PER_WINDOW per store x
    order type x window: what a chain with thousands of stores, or sparse traffic, looks like."""
    windows = max(1, span_s // window_s)
    return max(1, round(orders / (WINDOW_HEAVY_ORDERS_PER_WINDOW * order_types * windows)))


def phase_window_heavy(run: BenchRun, start: datetime) -> None:
    """The replay of a topic whose batches touch ~16 times more windows per order than the main
    topic's (~5 orders per store x type x window instead of ~80): the app's per-window work (the
    driver's revenue state, gold's MERGE) must not dominate. Its own topic, its own tally."""
    deployment = "bench-window-heavy"
    config = run.app_config
    orders = run.settings.window_heavy_orders
    stores = window_heavy_stores(orders, interval_seconds(config.window.size))
    settings = GeneratorSettings(
        orders=orders,
        stores=stores,
        start=start,
        span_seconds=3600,
        seed=run.settings.seed + 2,
        duplicate_every=run.settings.duplicate_every,
        bad_every=run.settings.bad_every,
    )
    create_run_topics(run, [WINDOW_HEAVY_TOPIC])
    generate_and_produce(run, settings, WINDOW_HEAVY_TOPIC, "window_heavy")
    tally = read_work_ceiling(
        run.bootstrap, WINDOW_HEAVY_TOPIC, WindowGeometry.from_config(config.window), config.order_rules()
    )
    with run.phase("window_heavy") as record:
        overrides = app_overrides(run, deployment, WINDOW_HEAVY_TOPIC, "available_now")
        submitted, finished, code, folder = run_to_end(run, "window-heavy", overrides)
        record.update({"exit_code": code, "stores": stores, "orders": orders, "tally": tally})
        if code != 0:
            record["error"] = processes.tail(folder / "driver.log", 30)
            return
        events = [e for e in read_events(folder) if int(e["numInputRows"]) > 0]
        records = sum(int(e["numInputRows"]) for e in events)
        gold = gold_stats(run.lake_root, deployment)
        record.update(
            {
                "records": records,
                "batches": len(events),
                "largest_batch_records": max(int(e["numInputRows"]) for e in events),
                **throughput(records, events, submitted, finished),
                "orders_per_window": gold["orders_counted"] / gold["rows"] if gold["rows"] else None,
                "profile_ms": duration_profile(events),
                "gold": gold,
                "gold_equals_the_tally": (gold["rows"], gold["orders_counted"], gold["revenue_cents"])
                == (tally["windows"], tally["orders_counted"], tally["total_cents"]),
            }
        )
