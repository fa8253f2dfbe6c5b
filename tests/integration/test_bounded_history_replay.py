"""A replay from another deployment's bronze reads its history in bounded micro-batches.

Blue (the micro-batch engine) archives 3,000 orders with duplicates and bad records spread over ten
minutes of event time, a span twenty times its watermark. Green replays them from blue's bronze with
batches of at most 400 records, then reads the newer orders from Kafka after the cut-over. Were the
history read out of the order blue received it, a batch would move the watermark past history still
to come and its orders would be dropped as late; were it read in one batch, its memory would grow
with the history. Gold must equal the generator's Decimal oracle for every order, once.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from revenue_platform.orders_generator import (
    GeneratorSettings,
    expected_windows,
    generate_orders,
    generate_stores,
    produce,
)
from spark_apps.contract.config import StreamingAppConfig, load_config
from spark_apps.engine.micro_batch import LIVE_AFTER_HISTORY_BATCH_BASE
from spark_apps.orders_streaming_app import run
from spark_apps.storage.gold import gold_frame
from tests.kafka_helpers import app_topic_overrides, create_app_topics, read_topic, unique_suffix

pytestmark = pytest.mark.integration

HISTORY_ORDERS = 3_000
RECORDS_PER_BATCH = 400


def _config(
    bootstrap: str, lake: Path, deployment: str, topics: dict[str, str], **more: object
) -> StreamingAppConfig:
    return load_config(
        overrides={
            "deployment_id": deployment,
            "engine": "micro_batch",
            "lake_root": str(lake),
            "kafka.bootstrap_servers": bootstrap,
            "trigger.mode": "available_now",
            "kafka.max_offsets_per_trigger": RECORDS_PER_BATCH,
            **topics,
            **more,
        }
    )


def _gold(
    spark: SparkSession, config: StreamingAppConfig
) -> dict[tuple[str, str, datetime], tuple[int, Decimal]]:
    rows = gold_frame(spark, config.names.gold_revenue_table).collect()
    return {(r.location_id, r.order_type, r.window_start): (r.order_count, r.revenue) for r in rows}


def test_a_replay_from_bronze_reads_history_in_bounded_batches_and_counts_every_order_once(
    kafka_bootstrap: str, spark: SparkSession, tmp_path: Path
) -> None:
    blue_suffix, green_suffix = unique_suffix(), unique_suffix()
    create_app_topics(kafka_bootstrap, blue_suffix)
    create_app_topics(kafka_bootstrap, green_suffix)
    blue_topics = app_topic_overrides(blue_suffix)
    # Green reads blue's inputs and writes outputs of its own.
    green_topics = {
        **app_topic_overrides(green_suffix),
        "kafka.orders_topic": blue_topics["kafka.orders_topic"],
        "kafka.stores_topic": blue_topics["kafka.stores_topic"],
    }
    history = list(
        generate_orders(
            GeneratorSettings(
                orders=HISTORY_ORDERS, stores=4, span_seconds=600, duplicate_every=37, bad_every=200, seed=11
            )
        )
    )
    produce(kafka_bootstrap, blue_topics["kafka.stores_topic"], generate_stores(4))
    produce(kafka_bootstrap, blue_topics["kafka.orders_topic"], history, total=len(history))
    blue = _config(kafka_bootstrap, tmp_path / "lake", "blue", blue_topics)
    run(blue, spark)

    archived = spark.read.format("delta").load(blue.names.bronze_orders_table)
    cut_over = {
        int(row["partition"]): int(row["next"])
        for row in archived.groupBy("partition").agg((F.max("offset") + 1).alias("next")).collect()
    }
    newer = list(
        generate_orders(
            GeneratorSettings(
                orders=300,
                stores=4,
                start=GeneratorSettings().start + timedelta(seconds=630),
                span_seconds=60,
                first_order_id=100_000,
                seed=12,
            )
        )
    )
    produce(kafka_bootstrap, blue_topics["kafka.orders_topic"], newer, total=len(newer))
    green = _config(
        kafka_bootstrap,
        tmp_path / "lake",
        "green",
        green_topics,
        history={"bronze_table": blue.names.bronze_orders_table, "kafka_offsets": cut_over},
    )

    run(green, spark)

    expected = expected_windows(history + newer, window_seconds=15)
    assert _gold(spark, green) == {key: (w.order_count, w.revenue) for key, w in expected.items()}
    bronze = spark.read.format("delta").load(green.names.bronze_orders_table)
    assert bronze.count() == len(history) + len(newer)
    batches = [int(row["ingest_batch_id"]) for row in bronze.select("ingest_batch_id").distinct().collect()]
    history_batches = [b for b in batches if b < LIVE_AFTER_HISTORY_BATCH_BASE]
    # ~3,000 records in batches of at most 400: the history was never one batch.
    assert len(history_batches) >= len(history) // RECORDS_PER_BATCH
    biggest = bronze.groupBy("ingest_batch_id").count().agg(F.max("count")).first()
    assert biggest is not None
    assert biggest[0] <= RECORDS_PER_BATCH
    # Kafka after the cut-over was read by the query that follows the history, counting on above it.
    kafka_rows = bronze.filter(F.col("ingest_batch_id") >= LIVE_AFTER_HISTORY_BATCH_BASE).count()
    assert kafka_rows == len(newer)

    latest: dict[str, dict[str, object]] = {}
    for record in read_topic(kafka_bootstrap, green.kafka.revenue_topic):
        latest[record.key.decode()] = json.loads(record.value)
    assert {k: (v["order_count"], Decimal(str(v["revenue"]))) for k, v in latest.items()} == {
        f"{loc}|{typ}|{start.strftime('%Y-%m-%dT%H:%M:%SZ')}": (w.order_count, w.revenue)
        for (loc, typ, start), w in expected.items()
    }
    progress = json.loads(Path(green.names.progress_file("revenue")).read_text())
    assert progress["history_pending"] is False
    assert progress["max_offsets_behind_latest"] == 0
