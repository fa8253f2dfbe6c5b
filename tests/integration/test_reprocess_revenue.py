"""Batch reprocessing against real Kafka, Spark and Delta: late records, idempotence, bronze fallback.

The streaming app first runs over on-time orders; orders that arrive later than its
watermark are archived but not counted. Reprocessing the closed range must then make gold
equal the independent oracle over *all* orders, report what it fixed, change nothing on a
second run, and give the same answer from bronze once Kafka's copy of the range is gone.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from pyspark.sql import SparkSession

from revenue_platform.orders_generator import (
    GeneratorSettings,
    expected_windows,
    generate_orders,
    generate_stores,
    produce,
)
from spark_apps.contract.config import StreamingAppConfig, load_config
from spark_apps.orders_streaming_app import run
from spark_apps.reprocess_revenue_job import RangeNotCoveredError, reprocess
from spark_apps.storage.gold import gold_frame
from tests.kafka_helpers import app_topic_overrides, create_app_topics, unique_suffix

pytestmark = pytest.mark.integration

START = datetime(2026, 11, 22, 9, 0, 0)
RANGE = (START, START + timedelta(minutes=1))


def _gold(spark: SparkSession, config: StreamingAppConfig, start: datetime, end: datetime) -> dict:
    rows = gold_frame(spark, config.names.gold_revenue_table).collect()
    return {
        (r.location_id, r.order_type, r.window_start): (r.order_count, r.revenue)
        for r in rows
        if r.window_start >= start and r.window_end <= end
    }


def _delete_all_records(bootstrap: str, topic: str, partitions: int) -> None:
    """What retention does to old segments: the records are gone, the offsets stay."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([TopicPartition(topic, p, -1) for p in range(partitions)])
    for future in futures.values():
        future.result(timeout=30)


def test_reprocess_counts_late_records_is_idempotent_and_falls_back_to_bronze(
    kafka_bootstrap: str, spark: SparkSession, tmp_path: Path
) -> None:
    suffix = unique_suffix()
    config = load_config(
        overrides={
            "deployment_id": "reprocess",
            "lake_root": str(tmp_path / "lake"),
            "kafka.bootstrap_servers": kafka_bootstrap,
            "kafka.max_offsets_per_trigger": 200,
            "trigger.mode": "available_now",
            "window.watermark": "10 seconds",
            "shuffle_partitions": 2,
            **app_topic_overrides(suffix),
        }
    )
    create_app_topics(kafka_bootstrap, suffix)
    on_time = list(
        generate_orders(GeneratorSettings(orders=300, stores=3, start=START, span_seconds=90, seed=11))
    )
    produce(kafka_bootstrap, config.kafka.stores_topic, generate_stores(3))
    produce(kafka_bootstrap, config.kafka.orders_topic, on_time)
    run(config, spark)

    # Orders of the first minute arriving after the watermark moved past them: archived, not counted.
    late = list(
        generate_orders(
            GeneratorSettings(
                orders=20,
                stores=3,
                start=START + timedelta(seconds=5),
                span_seconds=40,
                seed=12,
                first_order_id=50_000,
            )
        )
    )
    produce(kafka_bootstrap, config.kafka.orders_topic, late)
    run(config, spark)

    oracle = {
        k: (w.order_count, w.revenue)
        for k, w in expected_windows(on_time + late, 15).items()
        if k[2] < RANGE[1]
    }
    streamed = _gold(spark, config, *RANGE)
    assert streamed != oracle, "the late orders should be missing from the streaming result"

    # An ad-hoc recompute of one store repairs that store's windows and no other.
    one_store = reprocess(spark, config, *RANGE, source="auto", location_ids=["store_1001"])
    assert one_store.changes >= 1
    assert {w["location_id"] for w in one_store.fixed_windows} == {"store_1001"}
    after_one = _gold(spark, config, *RANGE)
    assert {k: v for k, v in after_one.items() if k[0] == "store_1001"} == {
        k: v for k, v in oracle.items() if k[0] == "store_1001"
    }
    assert {k: v for k, v in after_one.items() if k[0] != "store_1001"} == {
        k: v for k, v in streamed.items() if k[0] != "store_1001"
    }

    report = reprocess(spark, config, *RANGE, source="auto")
    assert report.source == "kafka"
    assert report.repaired
    assert report.changes >= 1, "the other stores' late orders were still missing"
    assert report.changes == len(report.fixed_windows)
    assert {w["status"] for w in report.fixed_windows} <= {"different", "missing"}
    assert _gold(spark, config, *RANGE) == oracle
    outside = _gold(spark, config, RANGE[1], RANGE[1] + timedelta(minutes=5))
    assert outside == {
        k: (w.order_count, w.revenue) for k, w in expected_windows(on_time, 15).items() if k[2] >= RANGE[1]
    }, "windows after the range keep their streaming values"

    from delta.tables import DeltaTable

    versions_before = DeltaTable.forPath(spark, config.names.gold_revenue_table).history().count()
    again = reprocess(spark, config, *RANGE, source="auto")
    assert again.changes == 0
    assert not again.repaired
    assert DeltaTable.forPath(spark, config.names.gold_revenue_table).history().count() == versions_before

    # Retention removes the range from Kafka: Kafka alone refuses, auto falls back to bronze.
    _delete_all_records(kafka_bootstrap, config.kafka.orders_topic, partitions=2)
    with pytest.raises(RangeNotCoveredError, match="deleted by retention"):
        reprocess(spark, config, *RANGE, source="kafka")
    from_bronze = reprocess(spark, config, *RANGE, source="auto", repair=False)
    assert from_bronze.source == "bronze"
    # A range ending after bronze's newest arrival (a Kafka timestamp, from the Delta log's statistics)
    # is refused: the app has not archived all of it yet.
    tomorrow = datetime.now(UTC).replace(tzinfo=None, second=0, microsecond=0) + timedelta(days=1)
    later = (tomorrow, tomorrow + timedelta(minutes=1))
    with pytest.raises(RangeNotCoveredError, match="has not archived the whole range yet"):
        reprocess(spark, config, *later, source="bronze")
    assert from_bronze.changes == 0, "bronze gives the same windows as Kafka did"
    assert sum(v for _, v in oracle.values()) == sum(
        (v for _, v in _gold(spark, config, *RANGE).values()), Decimal("0")
    )
