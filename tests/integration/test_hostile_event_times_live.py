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

import random
import threading
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from revenue_platform.orders_generator import (
    GeneratedRecord,
    GeneratorSettings,
    expected_windows,
    generate_orders,
    generate_stores,
    order_json,
    produce,
)
from spark_apps.contract.config import StreamingAppConfig, load_config
from spark_apps.orders_streaming_app import run
from spark_apps.storage.gold import gold_frame
from tests.kafka_helpers import (
    APP_TOPIC_FIELDS,
    COMPACTED_APP_TOPICS,
    create_topics,
    read_topic,
    unique_suffix,
)

pytestmark = pytest.mark.integration

RATE_PER_S = 200
SECONDS = 16
GOLD_WAIT_S = 90
LOG_APPEND_TIME = {"message.timestamp.type": "LogAppendTime"}


def _topics(bootstrap: str, suffix: str, broker_stamped: bool = True) -> dict[str, str]:
    """The app's test-private topics; orders and stores stamped by the broker, as topics.yaml says
    (or, `broker_stamped=False`, by their producers: Kafka's default, CreateTime)."""
    names = {f"kafka.{field}": f"{base}_{suffix}" for field, base in APP_TOPIC_FIELDS.items()}
    configs: dict[str, dict[str, str]] = {}
    for base in APP_TOPIC_FIELDS.values():
        config = {"cleanup.policy": "compact"} if base in COMPACTED_APP_TOPICS else {}
        if base in ("orders", "stores") and broker_stamped:
            config |= LOG_APPEND_TIME
        configs[f"{base}_{suffix}"] = config
    create_topics(
        bootstrap,
        {f"{base}_{suffix}": 2 if base == "orders" else 1 for base in APP_TOPIC_FIELDS.values()},
        configs,
    )
    return names


def _stamped(template: dict[str, Any], order_id: int, ordered_at: datetime) -> GeneratedRecord:
    order = template | {"orderId": order_id, "orderedDateTime": ordered_at.isoformat(timespec="seconds")}
    return GeneratedRecord(key=str(order["locationId"]).encode(), value=order_json(order), order=order)


class PacedProducer(threading.Thread):
    """Sends honest orders at RATE_PER_S for SECONDS, each dated 0-3 s before it is sent, and the early
    order five seconds in; keeps what it sent for the oracle. `forge_timestamp`: the early order's
    Kafka timestamp is its event time, as a producer may set it on a CreateTime topic."""

    def __init__(self, bootstrap: str, topic: str, forge_timestamp: bool = False) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.forge_timestamp = bootstrap, topic, forge_timestamp
        self.templates = [
            r.order for r in generate_orders(GeneratorSettings(orders=500, stores=3, seed=11)) if r.order
        ]
        self.honest: list[GeneratedRecord] = []
        self.early: GeneratedRecord | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._send()
        except BaseException as error:  # reported by the test, not lost in the thread
            self.error = error

    def _send(self) -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5, "acks": "all"})
        rng = random.Random(3)
        started = time.monotonic()
        for tick in range(SECONDS * 10):  # a burst every 100 ms
            batch = []
            for n in range(RATE_PER_S // 10):
                now = datetime.now(UTC).replace(tzinfo=None)
                order_id = 1_000_000 + tick * 1000 + n
                template = self.templates[order_id % len(self.templates)]
                batch.append(_stamped(template, order_id, now - timedelta(seconds=rng.uniform(0, 3))))
            self.honest += batch
            forged: dict[str, int] = {}
            if tick == 50:  # five seconds in
                ahead = datetime.now(UTC).replace(tzinfo=None) + timedelta(seconds=299)
                self.early = _stamped(self.templates[0], 9_000_001, ahead)
                batch.append(self.early)
                if self.forge_timestamp:  # Kafka's timestamp in ms, as the order's own time
                    forged = {"timestamp": int(ahead.replace(tzinfo=UTC).timestamp() * 1000)}
            for record in batch:
                stamp = forged if record is self.early else {}
                producer.produce(self.topic, key=record.key, value=record.value, **stamp)
            producer.poll(0)
            time.sleep(max(0.0, started + (tick + 1) / 10 - time.monotonic()))
        if producer.flush(30) != 0:
            raise RuntimeError("orders not delivered within 30 s")


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
    topics = _topics(kafka_bootstrap, suffix, broker_stamped)
    config = load_config(
        overrides={
            "deployment_id": "hostiletime",
            "engine": "one_query",
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
    app_error: list[BaseException] = []

    def run_app() -> None:
        try:
            run(config, spark)
        except BaseException as error:
            app_error.append(error)

    app = threading.Thread(target=run_app, daemon=True)
    app.start()
    producer = PacedProducer(kafka_bootstrap, config.kafka.orders_topic, forge_timestamp=not broker_stamped)
    try:
        deadline = time.monotonic() + 120
        while not any(q.isActive for q in spark.streams.active) and time.monotonic() < deadline:
            time.sleep(0.5)
        # The year-1 order first and alone, as the first record of a new deployment: no watermark yet.
        year_one = _stamped(producer.templates[1], 9_000_002, datetime(1, 1, 1))
        produce(kafka_bootstrap, config.kafka.orders_topic, [year_one])
        while not _has_read_a_record(spark) and time.monotonic() < deadline:
            assert not app_error, f"the app stopped on the year-1 order: {app_error[0]!r}"
            time.sleep(0.5)
        time.sleep(3)  # the batch after it: an app that fails on it has failed by now
        assert not app_error, f"the app stopped on the year-1 order: {app_error[0]!r}"
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
            assert not app_error, f"the app stopped: {app_error[0]!r}"
            time.sleep(2)
            gold = _gold(spark, config)
        assert not app_error, f"the app stopped: {app_error[0]!r}"
        assert app.is_alive(), "the app must keep running through both orders"
        missing = {k: v for k, v in expected.items() if gold.get(k) != v}
        assert not missing, (
            f"{len(missing)} of {len(expected)} windows differ from the oracle, e.g. "
            f"{sorted(missing.items())[:3]} (gold: {[gold.get(k) for k in sorted(missing)[:3]]})"
        )
        assert gold == expected
    finally:
        for query in spark.streams.active:
            query.stop()
        app.join(timeout=60)
    assert not app_error, f"the app failed: {app_error[0]!r}"
    dead_letters = read_topic(kafka_bootstrap, config.kafka.dlq_topic)
    expected_reasons = ["event_time_too_old"] + ([] if early_counts else ["event_time_in_future"])
    assert sorted(d.headers["dlq_reason"].decode() for d in dead_letters) == sorted(expected_reasons)
