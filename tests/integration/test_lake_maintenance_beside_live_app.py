"""Lake maintenance beside a running app (issue 57): compaction, VACUUM and log checkpoints run on gold
and bronze while live batches MERGE into gold and append to bronze, and no batch fails, no number moves.

The shipped schedule compacts only partitions no live batch writes (gold hours ended two hours ago,
bronze days before today), so in production the two never touch the same files. Here maintenance is
told it is two days later: it compacts *every* partition, the open gold hour and today's bronze
included, again and again while the app writes them. Spark's bronze appends and delta-rs's compaction
commits interleave in bronze's log, and no batch fails; gold's open hour is one file (each MERGE
rewrites it), which compaction leaves alone. Real Kafka, the app in process (one query, one-second
trigger), Delta written by Spark and delta-rs as in production. (VACUUM at the forms' shortest
retention, 1 hour, deletes nothing a running batch may still commit.)
"""

from __future__ import annotations

import random
import threading
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from revenue_platform.lake_maintenance import MaintenancePolicy, TableMaintenance, maintain_lake
from revenue_platform.orders_generator import (
    GeneratedRecord,
    GeneratorSettings,
    expected_windows,
    generate_orders,
    generate_stores,
    order_json,
    produce,
)
from spark_apps.contract.config import load_config
from spark_apps.contract.gold_layout import GOLD_HOUR_COLUMN
from spark_apps.orders_streaming_app import run
from spark_apps.storage.gold import gold_frame
from tests.kafka_helpers import APP_TOPIC_FIELDS, COMPACTED_APP_TOPICS, create_topics, unique_suffix
from tests.registry_helpers import register_deployment

pytestmark = pytest.mark.integration

RATE_PER_S = 100
SECONDS = 30
GOLD_WAIT_S = 120
# The shortest retention a form allows: VACUUM runs, and keeps what a reader may still hold.
POLICY = MaintenancePolicy(
    gold_retention=timedelta(hours=1),
    bronze_retention=timedelta(hours=1),
    control_retention=timedelta(hours=1),
)


class PacedOrders(threading.Thread):
    """Honest orders at RATE_PER_S for SECONDS, each dated 0-3 s before it is sent; keeps them for the
    oracle."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.templates = [
            r.order for r in generate_orders(GeneratorSettings(orders=300, stores=3, seed=5)) if r.order
        ]
        self.sent: list[GeneratedRecord] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._send()
        except BaseException as error:  # reported by the test, not lost in the thread
            self.error = error

    def _send(self) -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5, "acks": "all"})
        rng = random.Random(9)
        started = time.monotonic()
        for tick in range(SECONDS * 10):  # a burst every 100 ms
            for n in range(RATE_PER_S // 10):
                order_id = 2_000_000 + tick * 1000 + n
                at = datetime.now(UTC).replace(tzinfo=None) - timedelta(seconds=rng.uniform(0, 3))
                order = self.templates[order_id % len(self.templates)] | {
                    "orderId": order_id,
                    "orderedDateTime": at.isoformat(timespec="seconds"),
                }
                record = GeneratedRecord(
                    key=str(order["locationId"]).encode(), value=order_json(order), order=order
                )
                producer.produce(self.topic, key=record.key, value=record.value)
                self.sent.append(record)
            producer.poll(0)
            time.sleep(max(0.0, started + (tick + 1) / 10 - time.monotonic()))
        if producer.flush(30) != 0:
            raise RuntimeError("orders not delivered within 30 s")


def test_maintenance_compacting_the_partitions_live_batches_write_fails_no_batch_and_moves_no_number(
    kafka_bootstrap: str, spark: SparkSession, tmp_path: Path
) -> None:
    suffix = unique_suffix()
    lake = tmp_path / "lake"
    topics = {f"kafka.{field}": f"{base}_{suffix}" for field, base in APP_TOPIC_FIELDS.items()}
    create_topics(
        kafka_bootstrap,
        {f"{base}_{suffix}": 2 if base == "orders" else 1 for base in APP_TOPIC_FIELDS.values()},
        {
            f"{base}_{suffix}": ({"cleanup.policy": "compact"} if base in COMPACTED_APP_TOPICS else {})
            | ({"message.timestamp.type": "LogAppendTime"} if base in ("orders", "stores") else {})
            for base in APP_TOPIC_FIELDS.values()
        },
    )
    config = load_config(
        overrides={
            "deployment_id": "maintained",
            "lake_root": str(lake),
            "kafka.bootstrap_servers": kafka_bootstrap,
            **topics,
            "trigger.mode": "processing_time",
            "trigger.interval": "1 second",
            "shuffle_partitions": 2,
        }
    )
    register_deployment(lake, config)
    produce(kafka_bootstrap, config.kafka.stores_topic, generate_stores(3))
    app_error: list[BaseException] = []

    def run_app() -> None:
        try:
            run(config, spark)
        except BaseException as error:
            app_error.append(error)

    app = threading.Thread(target=run_app, daemon=True)
    app.start()
    orders = PacedOrders(kafka_bootstrap, config.kafka.orders_topic)
    runs: list[list[TableMaintenance]] = []
    maintenance_errors: list[BaseException] = []
    maintenance_done = threading.Event()

    def maintain_again_and_again() -> None:
        # As if two days had passed: every partition is closed to maintenance, the ones the live
        # batches are writing included.
        while not maintenance_done.is_set():
            try:
                runs.append(
                    maintain_lake(
                        str(lake),
                        [config.deployment_id],
                        POLICY,
                        now=datetime.now(UTC) + timedelta(days=2),
                        say=lambda line: None,
                    )
                )
            except Exception as error:  # asserted below, beside the app's own outcome
                maintenance_errors.append(error)
            time.sleep(0.5)

    maintenance = threading.Thread(target=maintain_again_and_again, daemon=True)
    try:
        deadline = time.monotonic() + 120
        while not any(q.isActive for q in spark.streams.active) and time.monotonic() < deadline:
            assert not app_error, f"the app did not start: {app_error[0]!r}"
            time.sleep(0.5)
        orders.start()
        maintenance.start()
        orders.join(timeout=SECONDS + 60)
        assert orders.error is None
        assert not orders.is_alive()
        expected = {
            k: (w.order_count, w.revenue) for k, w in expected_windows(orders.sent, window_seconds=15).items()
        }
        gold: dict[tuple[str, str, datetime], tuple[int, Decimal]] = {}
        deadline = time.monotonic() + GOLD_WAIT_S
        while time.monotonic() < deadline and gold != expected:
            assert not app_error, f"a batch failed beside maintenance: {app_error[0]!r}"
            time.sleep(2)
            rows = gold_frame(spark, config.names.gold_revenue_table).collect()
            gold = {(r.location_id, r.order_type, r.window_start): (r.order_count, r.revenue) for r in rows}
        maintenance_done.set()
        maintenance.join(timeout=120)
        assert not app_error, f"a batch failed beside maintenance: {app_error[0]!r}"
        assert app.is_alive(), "the app keeps running beside maintenance"
        assert gold == expected, f"{len(expected)} windows expected, gold has {len(gold)}"
    finally:
        maintenance_done.set()
        for query in spark.streams.active:
            query.stop()
        app.join(timeout=60)
    assert not app_error, f"the app failed: {app_error[0]!r}"
    assert not maintenance_errors, (
        f"{len(maintenance_errors)} of {len(runs) + len(maintenance_errors)} runs failed: "
        f"{maintenance_errors[0]!r}"
    )

    # The forced conflicts happened in bronze: maintenance compacted today's files, which the live
    # batches append to, more than once while the app ran (Spark's appends and delta-rs's compaction
    # commits interleaved in bronze's log).
    bronze_compactions = sum(
        1 for reports in runs for r in reports if r.kind == "bronze" and r.files_compacted
    )
    assert bronze_compactions >= 2, _summaries(runs)
    # Gold gives compaction nothing to take from a live batch: each MERGE rewrites the one file of
    # each hour it changes, so an hour holds one file, and compacting it is a no-op with no commit.
    gold_files = pa.table(DeltaTable(config.names.gold_revenue_table).get_add_actions(flatten=True))
    hours = gold_files.column(f"partition.{GOLD_HOUR_COLUMN}").to_pylist()
    assert len(hours) == len(set(hours)), f"an hour of gold in more than one file: {sorted(hours)}"


def _summaries(runs: list[list[TableMaintenance]]) -> str:
    """The last runs' gold and bronze lines, without the table paths."""
    return "\n".join(
        f"{r.role}: {r.summary().split(': ', 1)[1]}"
        for reports in runs[-4:]
        for r in reports
        if r.kind in ("gold", "bronze")
    )
