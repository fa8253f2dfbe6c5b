"""Stream, reprocess and quality give one answer on the same conflicting duplicates.

One rule (spark_apps.contract.ARRIVAL_ORDER): an order id counts once, as its first-arrived copy by
(ingest batch, Kafka timestamp, partition, offset). The data is built to catch every way the three
could disagree: copies that differ in amount and in event time (re-stamped, EARLIER than the
original, which the old batch rule "earliest event time wins" would have picked), copies on the
same key, on another store's key and with no key (so on other partitions), copies in the same
ingest batch, in later ingest batches that one revenue batch reads together (a small batch cap),
and in a later run. Real Kafka, Spark and Delta; the quality checks run through their own pandas
implementation.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from revenue_platform.orders_generator import (
    GeneratedRecord,
    GeneratorSettings,
    generate_orders,
    generate_stores,
    order_json,
    produce,
)
from revenue_platform.quality.config import QualityConfig
from revenue_platform.quality.runner import run_revenue_checks
from spark_apps import io
from spark_apps.config import load_config
from spark_apps.contract import ARRIVAL_ORDER
from spark_apps.orders_streaming_app import run
from spark_apps.reprocess_revenue_job import reprocess
from tests.kafka_helpers import app_topic_overrides, create_app_topics, unique_suffix
from tests.registry_helpers import register_deployment

pytestmark = pytest.mark.integration

START = datetime(2026, 11, 22, 9, 0, 0)
RANGE = (START, START + timedelta(minutes=2))


def copy_of(
    original: GeneratedRecord, amount: str, seconds_earlier: int, key: bytes | None
) -> GeneratedRecord:
    """A conflicting copy: same orderId, another amount, an earlier event time, the given key."""
    order = json.loads(original.value or b"{}", parse_float=Decimal)
    ordered_at = datetime.fromisoformat(order["orderedDateTime"]) - timedelta(seconds=seconds_earlier)
    order.update(finalAmount=Decimal(amount), orderedDateTime=ordered_at.isoformat())
    return GeneratedRecord(key=key, value=order_json(order))


def first_arrived_windows(
    bronze_path: str, size_s: int
) -> dict[tuple[str, str, datetime], tuple[int, Decimal]]:
    """The rule applied by hand to what bronze archived: first copy per order id, 15 s windows."""
    rows = DeltaTable(bronze_path).to_pyarrow_table().to_pylist()
    valid = sorted(
        (r for r in rows if r["dlq_reason"] is None),
        key=lambda r: tuple(r[c] for c in ARRIVAL_ORDER),
    )
    first: dict[int, dict[str, Any]] = {}
    for row in valid:
        first.setdefault(row["order_id"], row)
    windows: dict[tuple[str, str, datetime], list[Decimal]] = defaultdict(list)
    for row in first.values():
        at = row["ordered_at"].replace(tzinfo=None)
        start = datetime.fromtimestamp(int(at.replace(tzinfo=UTC).timestamp()) // size_s * size_s, UTC)
        windows[row["location_id"], row["order_type"], start.replace(tzinfo=None)].append(row["final_amount"])
    return {key: (len(amounts), sum(amounts, Decimal("0"))) for key, amounts in windows.items()}


# One batch per run: copies of one batch sorted into arrival order, and in the second run copies of
# orders counted by the first, known only to the state resumed from bronze. (Batches of 40 would make
# orders late under the 10 s watermark, which the rule by hand ignores.)
MAX_OFFSETS = 100_000


def test_stream_reprocess_and_quality_count_the_same_copy(
    kafka_bootstrap: str, spark: SparkSession, tmp_path: Path
) -> None:
    suffix = unique_suffix()
    lake = tmp_path / "lake"
    config = load_config(
        overrides={
            "deployment_id": "dedupe",
            "lake_root": str(lake),
            "kafka.bootstrap_servers": kafka_bootstrap,
            "kafka.max_offsets_per_trigger": MAX_OFFSETS,
            "trigger.mode": "available_now",
            "window.watermark": "10 seconds",
            "shuffle_partitions": 2,
            **app_topic_overrides(suffix),
        }
    )
    register_deployment(lake, config)
    create_app_topics(kafka_bootstrap, suffix, orders_partitions=3)
    orders_topic = config.kafka.orders_topic
    produce(kafka_bootstrap, config.kafka.stores_topic, generate_stores(3))
    originals = list(
        generate_orders(GeneratorSettings(orders=150, stores=3, start=START, span_seconds=100, seed=31))
    )
    other_key = b"store_other"
    # Copies right behind their originals (the same ingest batch, or the next one).
    mixed: list[GeneratedRecord] = []
    for index, original in enumerate(originals):
        mixed.append(original)
        if index % 15 == 3:
            mixed.append(copy_of(original, "7.77", seconds_earlier=5, key=original.key))
        if index % 15 == 9:
            mixed.append(copy_of(original, "8.88", seconds_earlier=9, key=None))
    produce(kafka_bootstrap, orders_topic, mixed)
    time.sleep(0.01)  # later copies get a later Kafka timestamp than every original
    produce(
        kafka_bootstrap,
        orders_topic,
        [copy_of(o, "9.99", seconds_earlier=3, key=other_key) for o in originals[::20]],
    )
    run(config, spark)

    # A later run: copies of orders the stream has already counted (its dedupe state has them).
    produce(
        kafka_bootstrap,
        orders_topic,
        [copy_of(o, "1.11", seconds_earlier=1, key=o.key) for o in originals[5::25]],
    )
    # One order far enough ahead to move the watermark past the checked minutes.
    produce(
        kafka_bootstrap,
        orders_topic,
        generate_orders(
            GeneratorSettings(
                orders=1, stores=3, start=START + timedelta(minutes=5), seed=32, first_order_id=50_000
            )
        ),
    )
    run(config, spark)

    bronze = (
        DeltaTable(config.names.bronze_orders_table)
        .to_pyarrow_table(columns=["order_id", "superseded", "ingest_batch_id"])
        .to_pylist()
    )
    batches = {r["ingest_batch_id"] for r in bronze}
    assert len(batches) >= 2  # a batch per run
    assert any(r["superseded"] for r in bronze), "later copies are marked in bronze"

    # 1. Stream (gold) against the rule applied by hand to bronze.
    def in_range(key: tuple[str, str, datetime]) -> bool:
        return RANGE[0] <= key[2] and key[2] + timedelta(seconds=15) <= RANGE[1]

    gold = {
        (r.location_id, r.order_type, r.window_start): (r.order_count, r.revenue)
        for r in io.read_gold(spark, config.names.gold_revenue_table).collect()
    }
    expected = first_arrived_windows(config.names.bronze_orders_table, 15)
    assert {k: v for k, v in gold.items() if in_range(k)} == {
        k: v for k, v in expected.items() if in_range(k)
    }
    # Each order id counted exactly once over all windows (its counted copy may be re-stamped into a
    # window before the range); the one extra is the order that moved the watermark.
    counted = sum(count for count, _ in gold.values())
    assert counted == len({json.loads(o.value or b"{}")["orderId"] for o in originals}) + 1

    # 2. Reprocess (batch, from Kafka) recomputes exactly what the stream wrote.
    report = reprocess(spark, config, *RANGE, source="kafka", repair=False)
    assert report.windows_recomputed > 0
    assert (report.missing, report.extra, report.different) == (0, 0, 0), report.fixed_windows[:5]

    # 3. The quality checks' reconciliation (pandas, its own parser) agrees with gold too.
    quality = run_revenue_checks(
        "dedupe",
        str(lake),
        RANGE[0].replace(tzinfo=UTC),
        RANGE[1].replace(tzinfo=UTC),
        QualityConfig.from_app_config(config),
        raise_on_failure=False,
        store_results=False,
    )
    reconciliation = {o.check: o.success for o in quality.outcomes if o.check.startswith("reconciliation")}
    assert reconciliation == {
        "reconciliation_window_present": True,
        "reconciliation_order_count": True,
        "reconciliation_revenue": True,
    }
