"""`kafka.min_partitions` splits a Kafka read into at least that many Spark tasks, so the per-record
work of a batch can use more executor cores than the orders topic has partitions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from revenue_platform.orders_generator import GeneratorSettings, generate_orders, produce
from spark_apps.contract.config import load_config
from spark_apps.storage.kafka import read_orders_batch
from tests.kafka_helpers import app_topic_overrides, create_app_topics, unique_suffix

pytestmark = pytest.mark.integration


def test_min_partitions_splits_the_kafka_read_of_the_orders_topic_into_more_tasks(
    kafka_bootstrap: str, spark: SparkSession, tmp_path: Path
) -> None:
    suffix = unique_suffix()
    create_app_topics(kafka_bootstrap, suffix, orders_partitions=2)
    topics = app_topic_overrides(suffix)
    records = list(generate_orders(GeneratorSettings(orders=600, stores=3)))
    produce(kafka_bootstrap, topics["kafka.orders_topic"], records, total=len(records))
    whole = json.dumps({topics["kafka.orders_topic"]: {"0": -2, "1": -2}})
    end = json.dumps({topics["kafka.orders_topic"]: {"0": -1, "1": -1}})

    def read(**more: object) -> tuple[int, int]:
        settings = {"lake_root": str(tmp_path), "kafka.bootstrap_servers": kafka_bootstrap, **topics}
        config = load_config(overrides={**settings, **more})
        batch = read_orders_batch(spark, config, whole, end)
        return batch.rdd.getNumPartitions(), batch.count()

    assert read() == (2, len(records))  # one task per topic partition
    tasks, count = read(**{"kafka.min_partitions": 6})
    assert tasks >= 6
    assert count == len(records)  # split offset ranges, every record once
