"""Live revenue against hostile but well-formed event times, paced as a real shop sends them.

A new deployment's first record is an order dated year 1. Then orders arrive at ~200/s with event
time = the wall clock a moment (0-3 s) before they are sent, on an `orders` topic with LogAppendTime
(as include/topics/topics.yaml declares it); five seconds in, one order is dated 299 s ahead of the
broker's clock (inside a 5-minute `validation.max_future_skew`).
With the shipped windows (15 s, watermark 30 s) and the old 5-minute skew, the early order used to move
the watermark ~4.5 minutes ahead and make nearly every honest order behind it late; the year-1 order
used to crash-loop a new deployment (its window rows and the watermark do not fit a timestamp). Now:
  * the skew is clamped to the watermark delay, so with a 30 s watermark the early order is a dead letter;
  * with a 5-minute watermark it is counted in its own window, and the watermark it moves never passes
    its Kafka timestamp, so the honest orders behind it stay on time;
  * the year-1 order is a dead letter (`event_time_too_old`).
Either way gold, while the app keeps running (it never restarts), equals the oracle of the orders that
count, to the cent.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from revenue_platform.orders_generator import (
    GeneratedRecord,
    expected_windows,
    generate_stores,
    produce,
)
from spark_apps.contract.config import StreamingAppConfig, load_config
from spark_apps.storage.gold import gold_frame
from tests.kafka_helpers import app_topic_overrides, create_app_topics, read_topic, unique_suffix
from tests.paced_orders import LiveApp, PacedOrders, stamped_order

pytestmark = pytest.mark.integration

RATE_PER_S = 200
SECONDS = 16
GOLD_WAIT_S = 90


class PacedProducer(PacedOrders):
    """Honest orders at RATE_PER_S for SECONDS, and the early order five seconds in. `forge_timestamp`:
    the early order's Kafka timestamp is its event time, as a producer may set it on a CreateTime topic."""

    def __init__(self, bootstrap: str, topic: str, forge_timestamp: bool = False) -> None:
        super().__init__(bootstrap, topic, RATE_PER_S, SECONDS, first_order_id=1_000_000)
        self.forge_timestamp = forge_timestamp
        self.early: GeneratedRecord | None = None

    def extra(self, tick: int) -> list[tuple[GeneratedRecord, dict[str, int]]]:
        if tick != 50:  # five seconds in
            return []
        ahead = datetime.now(UTC).replace(tzinfo=None) + timedelta(seconds=299)
        self.early = stamped_order(self.templates[0], 9_000_001, ahead)
        # Kafka's timestamp in ms, as the order's own time.
        forged = (
            {"timestamp": int(ahead.replace(tzinfo=UTC).timestamp() * 1000)} if self.forge_timestamp else {}
        )
        return [(self.early, forged)]


def _has_read_a_record(spark: SparkSession) -> bool:
    return any(p["numInputRows"] > 0 for q in spark.streams.active for p in q.recentProgress)


def _gold(
    spark: SparkSession, config: StreamingAppConfig
) -> dict[tuple[str, str, datetime], tuple[int, Decimal]]:
    rows = gold_frame(spark, config.names.gold_revenue_table).collect()
    return {(r.location_id, r.order_type, r.window_start): (r.order_count, r.revenue) for r in rows}


@pytest.mark.parametrize(
    ("watermark", "early_counts", "broker_stamped"),
    [
        # The shipped window and watermark with the old 5-minute skew (what existing deployments have
        # registered): clamped to 30 s, so the early order is refused.
        pytest.param("30 seconds", False, True, id="shipped-watermark"),
        # Skew and delay both 5 minutes: the early order is valid, in its own window.
        pytest.param("5 minutes", True, True, id="five-minute-watermark"),
        # The same on a CreateTime topic whose producer stamped the early order with its event time
        # (issue 56): its Kafka timestamp no longer bounds the watermark; the batch's start does.
        pytest.param("5 minutes", True, False, id="producer-stamped-topic"),
    ],
)
def test_an_order_dated_ahead_and_one_dated_year_1_neither_blank_live_revenue_nor_crash_the_app(
    kafka_bootstrap: str,
    spark: SparkSession,
    tmp_path: Path,
    watermark: str,
    early_counts: bool,
    broker_stamped: bool,
) -> None:
    suffix = unique_suffix()
    topics = app_topic_overrides(suffix)
    create_app_topics(kafka_bootstrap, suffix, broker_stamped=broker_stamped)
    config = load_config(
        overrides={
            "deployment_id": "hostiletime",
            "engine": "micro_batch",
            "lake_root": str(tmp_path / "lake"),
            "kafka.bootstrap_servers": kafka_bootstrap,
            **topics,
            "window.watermark": watermark,
            "validation.max_future_skew": "5 minutes",
            "trigger.mode": "processing_time",
            "trigger.interval": "1 second",
            "shuffle_partitions": 2,
        }
    )
    produce(kafka_bootstrap, config.kafka.stores_topic, generate_stores(3))
    app = LiveApp(config, spark)
    app.start()
    producer = PacedProducer(kafka_bootstrap, config.kafka.orders_topic, forge_timestamp=not broker_stamped)
    try:
        deadline = time.monotonic() + 120
        while not any(q.isActive for q in spark.streams.active) and time.monotonic() < deadline:
            time.sleep(0.5)
        # The year-1 order first and alone, as the first record of a new deployment: no watermark yet.
        year_one = stamped_order(producer.templates[1], 9_000_002, datetime(1, 1, 1))
        produce(kafka_bootstrap, config.kafka.orders_topic, [year_one])
        while not _has_read_a_record(spark) and time.monotonic() < deadline:
            assert app.error is None, f"the app stopped on the year-1 order: {app.error!r}"
            time.sleep(0.5)
        time.sleep(3)  # the batch after it: an app that fails on it has failed by now
        assert app.error is None, f"the app stopped on the year-1 order: {app.error!r}"
        producer.start()
        producer.join(timeout=SECONDS + 60)
        assert producer.error is None
        assert not producer.is_alive()
        assert producer.early is not None
        counted = producer.honest + ([producer.early] if early_counts else [])
        expected = {
            k: (w.order_count, w.revenue) for k, w in expected_windows(counted, window_seconds=15).items()
        }
        gold: dict[tuple[str, str, datetime], tuple[int, Decimal]] = {}
        deadline = time.monotonic() + GOLD_WAIT_S
        while time.monotonic() < deadline and gold != expected:
            assert app.error is None, f"the app stopped: {app.error!r}"
            time.sleep(2)
            gold = _gold(spark, config)
        assert app.error is None, f"the app stopped: {app.error!r}"
        assert app.is_alive(), "the app must keep running through both orders"
        missing = {k: v for k, v in expected.items() if gold.get(k) != v}
        assert not missing, (
            f"{len(missing)} of {len(expected)} windows differ from the oracle, e.g. "
            f"{sorted(missing.items())[:3]} (gold: {[gold.get(k) for k in sorted(missing)[:3]]})"
        )
        assert gold == expected
    finally:
        app.stop()
    assert app.error is None, f"the app failed: {app.error!r}"
    dead_letters = read_topic(kafka_bootstrap, config.kafka.dlq_topic)
    expected_reasons = ["event_time_too_old"] + ([] if early_counts else ["event_time_in_future"])
    assert sorted(d.headers["dlq_reason"].decode() for d in dead_letters) == sorted(expected_reasons)
