"""Fixtures for the Spark unit tests: a factory for Kafka-shaped input DataFrames.

The SparkSession itself is the session-wide `spark` fixture of tests/conftest.py: a process
can hold only one, and the integration tests need it with the connector jars."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from spark_apps.validation.schemas import KAFKA_RAW_SCHEMA

# PySpark converts naive Python datetimes with the process time zone; pin it to UTC so
# expected values written as naive datetimes mean UTC on any host.
os.environ["TZ"] = "UTC"
time.tzset()

KafkaDfFactory = Callable[[list[Mapping[str, Any]]], DataFrame]


@pytest.fixture(scope="session")
def kafka_df(spark: SparkSession) -> KafkaDfFactory:
    """Build a Kafka-source-shaped DataFrame from dicts; missing columns get defaults
    (topic "orders", partition 0, offset = position in the list)."""

    def build(records: list[Mapping[str, Any]]) -> DataFrame:
        rows = [
            (
                r.get("key", b"store_1"),
                r.get("value"),
                r.get("topic", "orders"),
                r.get("partition", 0),
                r.get("offset", i),
                r.get("timestamp", datetime(2022, 12, 5, 9, 0, 0)),
                0,
            )
            for i, r in enumerate(records)
        ]
        return spark.createDataFrame(rows, KAFKA_RAW_SCHEMA)

    return build
