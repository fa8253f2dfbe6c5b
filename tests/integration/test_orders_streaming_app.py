"""The orders streaming app end to end against the real broker, real Spark and real Delta tables.

The expected numbers come from the generator's own Decimal oracle (plain Python), never
from Spark, so a bug in the shared transformations cannot hide behind itself.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections import Counter
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from pyspark.sql import SparkSession

from revenue_platform.orders_generator import (
    BAD_RECORD_KINDS,
    GeneratedRecord,
    GeneratorSettings,
    expected_windows,
    generate_orders,
    generate_stores,
    order_json,
    produce,
    store_record,
)
from spark_apps.contract.config import StreamingAppConfig, load_config
from spark_apps.contract.records import DEAD_LETTERS_OF_KIND, DLQ_REASON_KINDS, dlq_reason_kind
from spark_apps.engine.checkpoints import CheckpointMigrationError
from spark_apps.orders_streaming_app import LOCAL_SOURCE_MERGE_CONF, run
from spark_apps.storage.gold import gold_frame
from spark_apps.validation.routing import DEAD_LETTER_ORIGINAL_BYTES
from tests.kafka_helpers import (
    app_topic_overrides,
    create_app_topics,
    latest_revenue,
    read_topic,
    unique_suffix,
)

pytestmark = pytest.mark.integration


def app_config(bootstrap: str, lake: Path, suffix: str, **overrides: object) -> StreamingAppConfig:
    return load_config(
        overrides={
            "deployment_id": "itest",
            "lake_root": str(lake),
            "kafka.bootstrap_servers": bootstrap,
            "trigger.mode": "available_now",
            "shuffle_partitions": 2,
            **app_topic_overrides(suffix),
            **overrides,
        }
    )


def gold_as_dict(
    spark: SparkSession, config: StreamingAppConfig
) -> dict[tuple[str, str, datetime], tuple[int, Decimal]]:
    rows = gold_frame(spark, config.names.gold_revenue_table).collect()
    return {(r.location_id, r.order_type, r.window_start): (r.order_count, r.revenue) for r in rows}


def test_bounded_run_gives_exact_windows_dlq_split_and_revenue_topic(
    kafka_bootstrap: str, spark: SparkSession, tmp_path: Path
) -> None:
    suffix = unique_suffix()
    config = app_config(kafka_bootstrap, tmp_path / "lake", suffix, **{"kafka.max_offsets_per_trigger": 150})
    create_app_topics(kafka_bootstrap, suffix)
    on_time = list(
        generate_orders(
            GeneratorSettings(orders=400, stores=4, span_seconds=90, duplicate_every=9, bad_every=40)
        )
    )
    produce(kafka_bootstrap, config.kafka.stores_topic, generate_stores(3))  # store_1004 stays unknown
    produce(kafka_bootstrap, config.kafka.orders_topic, on_time)

    run(config, spark)
    progress_file = Path(config.names.progress_dir) / f"{config.names.query_name('revenue')}.json"
    first_run_counters = json.loads(progress_file.read_text())["counters"]

    # Phase 2, restarted from the checkpoints: late orders (an hour behind the watermark) and a store update.
    late_start = GeneratorSettings().start - timedelta(hours=1)
    late = list(
        generate_orders(
            GeneratorSettings(orders=5, stores=4, start=late_start, first_order_id=10_000, seed=7)
        )
    )
    moved = store_record("store_1001", 0) | {"contactNum": "555"}
    produce(kafka_bootstrap, config.kafka.orders_topic, late)
    produce(
        kafka_bootstrap,
        config.kafka.stores_topic,
        [type(late[0])(key=b"store_1001", value=json.dumps(moved).encode())],
    )
    run(config, spark)

    expected = expected_windows(on_time, window_seconds=15)
    gold = gold_as_dict(spark, config)
    assert gold == {key: (w.order_count, w.revenue) for key, w in expected.items()}
    assert all(isinstance(revenue, Decimal) for _, revenue in gold.values())

    gold_rows = gold_frame(spark, config.names.gold_revenue_table)
    unknown = gold_rows.filter("location_id = 'store_1004'").select("city").distinct().collect()
    assert [row.city for row in unknown] == [None]

    dead_letters = read_topic(kafka_bootstrap, config.kafka.dlq_topic)
    expected_reasons = Counter(BAD_RECORD_KINDS[r.bad_kind] for r in on_time if r.bad_kind)
    assert Counter(d.headers["dlq_reason"].decode() for d in dead_letters) == expected_reasons
    bad_values = {r.value for r in on_time if r.bad_kind}
    assert {
        base64.b64decode(json.loads(d.value)["original_value_base64"]) for d in dead_letters
    } == bad_values

    valid = [r.order for r in on_time + late if r.order is not None]
    for order_type, topic in (
        ("GENERAL", config.kafka.general_orders_topic),
        ("RESTAURANT", config.kafka.restaurant_orders_topic),
    ):
        routed = [
            json.loads(record.value, parse_float=Decimal) for record in read_topic(kafka_bootstrap, topic)
        ]
        assert {r["order_id"] for r in routed} == {
            o["orderId"] for o in valid if o["orderType"] == order_type
        }
        # Each routed value is the whole typed order, line items and exact amounts included.
        assert {_routed_content(r) for r in routed} == {
            _routed_content(
                {
                    "order_id": o["orderId"],
                    "final_amount": Decimal(str(o["finalAmount"])),
                    "order_line_items": o["orderLineItems"],
                }
            )
            for o in valid
            if o["orderType"] == order_type
        }

    latest_per_key: dict[str, dict] = {}
    for record in read_topic(kafka_bootstrap, config.kafka.revenue_topic):
        latest_per_key[record.key.decode()] = json.loads(record.value)
    published = {
        key: (value["order_count"], Decimal(str(value["revenue"]))) for key, value in latest_per_key.items()
    }
    assert published == {
        f"{loc}|{typ}|{start.strftime('%Y-%m-%dT%H:%M:%SZ')}": (w.order_count, w.revenue)
        for (loc, typ, start), w in expected.items()
    }

    bronze = spark.read.format("delta").load(config.names.bronze_orders_table)
    assert bronze.count() == len(on_time) + len(late)
    group = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": config.names.consumer_group})
    try:
        committed = group.committed(
            [TopicPartition(config.kafka.orders_topic, partition) for partition in (0, 1)], timeout=30
        )
    finally:
        group.close()
    assert sum(tp.offset for tp in committed) == len(on_time) + len(late), "processed offsets not committed"
    progress = json.loads(progress_file.read_text())
    assert progress["rows_dropped_by_watermark"] >= 1
    # The first run's driver counted its dead letters per reason kind (what the metrics label them by).
    counters = first_run_counters
    assert (counters["records_archived"], counters["dead_letters"]) == (
        len(on_time),
        sum(expected_reasons.values()),
    )
    assert {
        kind: counters[DEAD_LETTERS_OF_KIND.format(kind)]
        for kind in DLQ_REASON_KINDS
        if counters[DEAD_LETTERS_OF_KIND.format(kind)]
    } == Counter(dlq_reason_kind(reason) for reason in expected_reasons.elements())


def test_a_2099_order_first_and_the_two_largest_orders_neither_stall_nor_crash_revenue(
    kafka_bootstrap: str, spark: SparkSession, tmp_path: Path
) -> None:
    """Hostile but well-formed orders: an order dated 2099, first on its partition, used to move the
    watermark to 2099 so every later order was dropped as late (60 % of revenue missing); two orders
    of the largest money value in one window used to overflow the sum and fail every restart."""
    suffix = unique_suffix()
    largest = Decimal("9999999999999999.99")
    config = app_config(
        kafka_bootstrap,
        tmp_path / "lake",
        suffix,
        **{"validation.max_order_amount": str(largest)},
    )
    create_app_topics(kafka_bootstrap, suffix)
    from_2099 = next(iter(generate_orders(GeneratorSettings(orders=1, stores=1, first_order_id=90_000))))
    assert from_2099.order is not None
    future_order = from_2099.order | {"orderedDateTime": "2099-01-01T00:00:00"}
    ordinary = list(generate_orders(GeneratorSettings(orders=300, stores=3, span_seconds=120)))
    big = [
        GeneratedRecord(key=b"store_1002", value=order_json(order), order=order)
        for order in (
            ordinary[10].order | {"orderId": 80_000 + n, "locationId": "store_1002", "finalAmount": largest}
            for n in range(2)
            if ordinary[10].order is not None
        )
    ]
    produce(kafka_bootstrap, config.kafka.stores_topic, generate_stores(3))
    # The 2099 order goes first: it is the first record of its partition, as in the report.
    produce(
        kafka_bootstrap, config.kafka.orders_topic, [GeneratedRecord(from_2099.key, order_json(future_order))]
    )
    produce(kafka_bootstrap, config.kafka.orders_topic, ordinary + big)

    run(config, spark)  # one bounded run: the numbers must be right straight after streaming

    expected = expected_windows(ordinary + big, window_seconds=15)
    gold = gold_as_dict(spark, config)
    assert gold == {key: (w.order_count, w.revenue) for key, w in expected.items()}
    # The window holding both largest orders is exact: beyond DECIMAL(18,2), to the cent.
    assert max(revenue for _, revenue in gold.values()) > 2 * largest
    dead_letters = read_topic(kafka_bootstrap, config.kafka.dlq_topic)
    assert [d.headers["dlq_reason"].decode() for d in dead_letters] == ["event_time_in_future"]
    assert (
        json.loads(base64.b64decode(json.loads(dead_letters[0].value)["original_value_base64"]))[
            "orderedDateTime"
        ]
        == "2099-01-01T00:00:00"
    )


def test_oversized_records_are_dead_letters_and_revenue_goes_on(
    kafka_bootstrap: str, spark: SparkSession, tmp_path: Path
) -> None:
    """Before the size bounds, one record stopped live revenue for good: an 800 kB non-JSON record
    made a 1,067,047-byte dead letter (over the Java producer's 1,048,576 `max.request.size`), a
    valid-looking order with a 600 kB locationId a split-topic and a revenue record over librdkafka's
    1,000,000 bytes, and a 1.01 MB store address every revenue record of its store: the batch failed,
    its offsets were never committed, and every restart met the same record. Now the run ends, the
    orders are dead letters with their reasons, and gold is the oracle of the honest orders."""
    suffix = unique_suffix()
    config = app_config(kafka_bootstrap, tmp_path / "lake", suffix)
    create_app_topics(kafka_bootstrap, suffix)
    honest = list(generate_orders(GeneratorSettings(orders=200, stores=3, span_seconds=60, seed=11)))
    template = next(r.order for r in honest if r.order is not None)
    not_json = bytes(range(256)) * 3_125  # 800,000 bytes
    hostile = [
        GeneratedRecord(key=b"store_1001", value=not_json),
        GeneratedRecord(
            key=b"store_1002",
            value=order_json(template | {"orderId": 70_001, "locationId": "s" * 600_000}),
        ),
        GeneratedRecord(
            key=b"store_1003", value=order_json(template | {"orderId": 70_002, "locationId": "s" * 300})
        ),
    ]
    # The clients' own limit is 1,000,000 bytes: this test's producer may send more, as any may.
    large = {"message.max.bytes": 2_000_000}
    huge_store = store_record("store_1001", 0)
    huge_store["address"]["city"] = "x" * 1_010_000
    produce(kafka_bootstrap, config.kafka.stores_topic, generate_stores(3))
    produce(
        kafka_bootstrap,
        config.kafka.stores_topic,
        [GeneratedRecord(key=b"store_1001", value=json.dumps(huge_store).encode())],
        extra_config=large,
    )
    produce(kafka_bootstrap, config.kafka.orders_topic, hostile, extra_config=large)
    produce(kafka_bootstrap, config.kafka.orders_topic, honest)

    run(config, spark)

    expected = expected_windows(honest, window_seconds=15)
    assert gold_as_dict(spark, config) == {key: (w.order_count, w.revenue) for key, w in expected.items()}
    cities = {
        row.location_id: row.city
        for row in gold_frame(spark, config.names.gold_revenue_table).select("location_id", "city").collect()
    }
    assert cities["store_1001"] == store_record("store_1001", 0)["address"]["city"]
    assert latest_revenue(kafka_bootstrap, config.kafka.revenue_topic) == {
        f"{loc}|{typ}|{start.strftime('%Y-%m-%dT%H:%M:%SZ')}": (w.order_count, w.revenue)
        for (loc, typ, start), w in expected.items()
    }
    dead_letters = {
        json.loads(d.value)["original_value_sha256"]: json.loads(d.value)
        for d in read_topic(kafka_bootstrap, config.kafka.dlq_topic)
    }
    by_value = {hashlib.sha256(r.value or b"").hexdigest(): r for r in hostile}
    assert {digest: dead_letters[digest]["dlq_reason"] for digest in by_value} == {
        hashlib.sha256(not_json).hexdigest(): "record_too_large",
        hashlib.sha256(hostile[1].value or b"").hexdigest(): "record_too_large",
        hashlib.sha256(hostile[2].value or b"").hexdigest(): "location_id_too_long",
    }
    carried = dead_letters[hashlib.sha256(not_json).hexdigest()]
    assert carried["original_value_bytes"] == len(not_json)
    assert base64.b64decode(carried["original_value_base64"]) == not_json[:DEAD_LETTER_ORIGINAL_BYTES]


def _routed_content(order: dict[str, Any]) -> tuple[Any, ...]:
    """An order on a split topic as comparable values: id, amount and its line items, exactly."""
    items = tuple(
        (line["item"], int(line["count"]), Decimal(str(line["amount"]))) for line in order["order_line_items"]
    )
    return order["order_id"], Decimal(str(order["final_amount"])), items


@pytest.mark.parametrize(
    ("leftover", "overrides"),
    [
        ("ingest", {}),  # the retired two-query engine's ingest query
        ("archive", {}),  # the two-Kafka-reader design before it
        (None, {"engine": "two_queries"}),  # a registered config that still names the engine
        ("pipeline", {}),  # this engine before its dedupe state: batches committed, no state
        ("history", {}),  # the same, for a replay's history query
        ("pipeline:last_arrival_ms", {}),  # its dedupe state by order id, before the buckets
    ],
)
def test_a_deployment_of_a_retired_design_is_refused_with_the_way_out_and_nothing_is_written(
    kafka_bootstrap: str, spark: SparkSession, tmp_path: Path, leftover: str | None, overrides: dict[str, str]
) -> None:
    config = app_config(kafka_bootstrap, tmp_path / "lake", unique_suffix(), **overrides)
    if leftover is not None:
        query, _, state_variable = leftover.partition(":")
        checkpoint = Path(config.names.checkpoint(query))
        (checkpoint / "commits").mkdir(parents=True)
        (checkpoint / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}\n')
        if state_variable:
            # What Spark 4.2 wrote for the first state-store operator (operator metadata, format v2).
            variables = [
                {"stateName": "$eventTimers_keyToTimestamp", "stateVariableType": "TimerState"},
                {"stateName": state_variable, "stateVariableType": "ValueState", "ttlEnabled": False},
            ]
            metadata = {
                "operatorInfo": {"operatorId": 0, "operatorName": "transformWithStateExec"},
                "operatorPropertiesJson": json.dumps({"timeMode": "EventTime", "stateVariables": variables}),
            }
            (checkpoint / "state" / "0" / "_metadata" / "v2").mkdir(parents=True)
            (checkpoint / "state" / "0" / "_metadata" / "v2" / "0").write_text(f"v2\n{json.dumps(metadata)}")

    merge_conf_before = {key: spark.conf.get(key, None) for key in LOCAL_SOURCE_MERGE_CONF}
    with pytest.raises(CheckpointMigrationError, match=r"retired engine.*blue_green_replay"):
        run(config, spark)

    # The shared session gets its settings back (a later MERGE of a cached source depends on them).
    assert {key: spark.conf.get(key, None) for key in LOCAL_SOURCE_MERGE_CONF} == merge_conf_before

    assert not Path(config.names.bronze_orders_table).exists()
    assert not (Path(config.names.checkpoint("pipeline")) / "offsets").exists()
