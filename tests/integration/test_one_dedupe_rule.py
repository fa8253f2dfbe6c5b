"""Stream, reprocess and quality give one answer on the same conflicting duplicates.

One rule (spark_apps.contract.records.DEDUPE_RULE): a copy of an order id is a repeat, never counted, when
the copy before it in arrival order (ingest batch, Kafka timestamp, partition, offset) arrived at
most `dedupe.horizon` before it. The data is built to catch every way the three
could disagree: copies that differ in amount and in event time (re-stamped, EARLIER than the
original, which the old batch rule "earliest event time wins" would have picked), copies on the
same key, on another store's key and with no key (so on other partitions), copies in the same
ingest batch, in later ingest batches that one revenue batch reads together (a small batch cap),
and in a later run. Real Kafka, Spark and Delta; the quality checks run through their own pandas
implementation.
"""

from __future__ import annotations

import base64
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
from spark_apps.contract.config import StreamingAppConfig, load_config
from spark_apps.contract.records import ARRIVAL_ORDER, DEAD_LETTERS_OF_KIND, DlqReason
from spark_apps.orders_streaming_app import run
from spark_apps.reprocess_revenue_job import reprocess
from spark_apps.storage.gold import gold_frame
from tests.kafka_helpers import (
    app_topic_overrides,
    create_app_topics,
    latest_revenue,
    read_topic,
    unique_suffix,
)
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
    """The rule applied by hand to what bronze archived, 15 s windows: every copy here arrives within
    seconds of the one before it, far inside the horizon, so the first copy per order id counts."""
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


def conflicting_by_hand(bronze_path: str) -> list[bytes]:
    """The conflicting copies by hand, from what bronze archived: a valid copy whose store, type or
    amount differ from the copy of its order id just before it in arrival order (all within seconds
    of each other, far inside the horizon)."""
    rows = DeltaTable(bronze_path).to_pyarrow_table().to_pylist()
    valid = sorted(
        (r for r in rows if r["dlq_reason"] is None),
        key=lambda r: tuple(r[c] for c in ARRIVAL_ORDER),
    )
    before: dict[int, tuple[Any, ...]] = {}
    conflicting = []
    for row in valid:
        content = (row["location_id"], row["order_type"], row["final_amount"])
        if before.get(row["order_id"], content) != content:
            conflicting.append(row["value"])
        before[row["order_id"]] = content
    return conflicting


# One batch per run: copies of one batch sorted into arrival order, and in the second run copies of
# orders counted by the first, known only to the dedupe state restored from the checkpoint. (Batches
# of 40 would make orders late under the 10 s watermark, which the rule by hand ignores.)
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
    copies: list[GeneratedRecord] = []
    for index, original in enumerate(originals):
        mixed.append(original)
        if index % 15 == 3:
            copies.append(copy_of(original, "7.77", seconds_earlier=5, key=original.key))
            mixed.append(copies[-1])
        if index % 15 == 9:
            copies.append(copy_of(original, "8.88", seconds_earlier=9, key=None))
            mixed.append(copies[-1])
    produce(kafka_bootstrap, orders_topic, mixed)
    time.sleep(0.01)  # later copies get a later Kafka timestamp than every original
    copies_elsewhere = [copy_of(o, "9.99", seconds_earlier=3, key=other_key) for o in originals[::20]]
    copies += copies_elsewhere
    produce(kafka_bootstrap, orders_topic, copies_elsewhere)
    run(config, spark)

    # A later run: copies of orders the stream has already counted (its dedupe state has them).
    copies_later = [copy_of(o, "1.11", seconds_earlier=1, key=o.key) for o in originals[5::25]]
    copies += copies_later
    produce(kafka_bootstrap, orders_topic, copies_later)
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
        for r in gold_frame(spark, config.names.gold_revenue_table).collect()
    }
    expected = first_arrived_windows(config.names.bronze_orders_table, 15)
    assert {k: v for k, v in gold.items() if in_range(k)} == {
        k: v for k, v in expected.items() if in_range(k)
    }
    # Each order id counted exactly once over all windows (its counted copy may be re-stamped into a
    # window before the range); the one extra is the order that moved the watermark.
    counted = sum(count for count, _ in gold.values())
    assert counted == len({json.loads(o.value or b"{}")["orderId"] for o in originals}) + 1

    # Every copy here has another amount than the copy before it (whichever of an order's copies
    # arrived first): each but the first of an order is a conflicting copy, a dead letter with its
    # reason and its own bytes (none reaches a split topic), counted by the driver that met it (the
    # second run's: the copies known only to the state from the checkpoint).
    dead_letters = [json.loads(r.value or b"{}") for r in read_topic(kafka_bootstrap, config.kafka.dlq_topic)]
    conflicting = sorted(
        base64.b64decode(d["original_value_base64"])
        for d in dead_letters
        if d["dlq_reason"] == DlqReason.CONFLICTING_COPY
    )
    assert conflicting == sorted(conflicting_by_hand(config.names.bronze_orders_table))
    assert len(conflicting) == len(copies)
    split = [
        r.value
        for topic in (config.kafka.general_orders_topic, config.kafka.restaurant_orders_topic)
        for r in read_topic(kafka_bootstrap, topic)
    ]
    assert not set(conflicting) & set(split)
    progress = Path(config.names.progress_dir) / f"{config.names.query_name('revenue')}.json"
    counters = json.loads(progress.read_text())["counters"]
    assert counters[DEAD_LETTERS_OF_KIND.format(DlqReason.CONFLICTING_COPY)] == len(copies_later)

    # 2. and 3. The reprocess job and the quality suite agree with gold.
    assert_reprocess_and_quality_agree_with_gold(spark, config, lake, RANGE)


def assert_reprocess_and_quality_agree_with_gold(
    spark: SparkSession, config: StreamingAppConfig, lake: Path, checked: tuple[datetime, datetime]
) -> None:
    """The batch reprocess (from Kafka) recomputes exactly what the stream wrote for `checked`, and the
    quality checks' reconciliation (pandas, its own parser) agrees with gold too."""
    report = reprocess(spark, config, *checked, source="kafka", repair=False)
    assert report.windows_recomputed > 0
    assert (report.missing, report.extra, report.different) == (0, 0, 0), report.fixed_windows[:5]
    quality = run_revenue_checks(
        config.deployment_id,
        str(lake),
        checked[0].replace(tzinfo=UTC),
        checked[1].replace(tzinfo=UTC),
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


def _windows(values: list[bytes]) -> dict[str, tuple[int, Decimal]]:
    """15 s windows of the orders in `values` (JSON), keyed as the revenue topic keys them."""
    sums: dict[str, list[Decimal]] = defaultdict(list)
    for value in values:
        order = json.loads(value, parse_float=Decimal)
        at = datetime.fromisoformat(order["orderedDateTime"]).replace(tzinfo=UTC)
        start = datetime.fromtimestamp(int(at.timestamp()) // 15 * 15, UTC)
        sums[f"{order['locationId']}|{order['orderType']}|{start:%Y-%m-%dT%H:%M:%SZ}"].append(
            Decimal(order["finalAmount"])
        )
    return {key: (len(amounts), sum(amounts, Decimal("0"))) for key, amounts in sums.items()}


def _stamped(record: GeneratedRecord, after_event_s: int = 1) -> GeneratedRecord:
    """`record` with a Kafka timestamp `after_event_s` after its order's event time (CreateTime topic)."""
    order = json.loads(record.value or b"{}")
    at = datetime.fromisoformat(order["orderedDateTime"]).replace(tzinfo=UTC)
    return GeneratedRecord(
        key=record.key, value=record.value, timestamp_ms=int(at.timestamp() * 1000) + after_event_s * 1000
    )


@pytest.mark.parametrize(
    ("gap", "horizon"),
    [(timedelta(minutes=10), None), (timedelta(hours=6), "1 day")],
    ids=["10-minutes-default-horizon", "6-hours-day-horizon"],
)
def test_an_order_re_sent_long_after_its_first_copy_is_counted_once_everywhere(
    kafka_bootstrap: str, spark: SparkSession, tmp_path: Path, gap: timedelta, horizon: str | None
) -> None:
    """An order re-sent (re-stamped into a later window) `gap` after its first copy, within the dedupe
    horizon: gold, the revenue topic, the reprocess job and the quality suite all count it once. The
    test topics are CreateTime, so the re-sends carry Kafka timestamps `gap` later without a wait."""
    suffix = unique_suffix()
    lake = tmp_path / "lake"
    config = load_config(
        overrides={
            "deployment_id": "resent",
            "lake_root": str(lake),
            "kafka.bootstrap_servers": kafka_bootstrap,
            "trigger.mode": "available_now",
            "window.watermark": "10 seconds",
            **({"dedupe.horizon": horizon} if horizon else {}),
            **app_topic_overrides(suffix),
        }
    )
    register_deployment(lake, config)
    create_app_topics(kafka_bootstrap, suffix, orders_partitions=2)
    produce(kafka_bootstrap, config.kafka.stores_topic, generate_stores(3))
    originals = [
        _stamped(r)
        for r in generate_orders(
            GeneratorSettings(orders=60, stores=3, start=START, span_seconds=60, seed=41)
        )
    ]
    produce(kafka_bootstrap, config.kafka.orders_topic, originals)
    run(config, spark)

    # `gap` later: every fifth order again, re-stamped into a window `gap` later and with another
    # amount, among new orders of that minute; then one order that closes those windows.
    later = START + gap
    resent = [
        _stamped(copy_of(o, "3.33", seconds_earlier=-int(gap.total_seconds()), key=o.key))
        for o in originals[::5]
    ]
    fresh = [
        _stamped(r)
        for r in generate_orders(
            GeneratorSettings(
                orders=20, stores=3, start=later, span_seconds=60, seed=42, first_order_id=10_000
            )
        )
    ]
    closing = [
        _stamped(r)
        for r in generate_orders(
            GeneratorSettings(
                orders=1, stores=3, start=later + timedelta(minutes=5), seed=43, first_order_id=20_000
            )
        )
    ]
    produce(kafka_bootstrap, config.kafka.orders_topic, resent + fresh + closing)
    run(config, spark)

    expected = _windows([r.value or b"" for r in originals + fresh + closing])
    over_counted = _windows([r.value or b"" for r in originals + resent + fresh + closing])
    assert expected != over_counted  # the re-sends land in windows of their own: counting them shows

    gold = {
        f"{r.location_id}|{r.order_type}|{r.window_start:%Y-%m-%dT%H:%M:%SZ}": (r.order_count, r.revenue)
        for r in gold_frame(spark, config.names.gold_revenue_table).collect()
    }
    assert gold == expected
    assert latest_revenue(kafka_bootstrap, config.kafka.revenue_topic) == expected
    bronze = DeltaTable(config.names.bronze_orders_table).to_pyarrow_table(columns=["superseded"]).to_pylist()
    assert sum(r["superseded"] for r in bronze) == len(resent)

    checked = (START, later + timedelta(minutes=2))  # the closing order's windows stay open
    assert_reprocess_and_quality_agree_with_gold(spark, config, lake, checked)
