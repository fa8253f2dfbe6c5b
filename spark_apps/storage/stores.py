"""The stores table: the latest store per location from the compacted `stores` topic, read with
Spark and re-read only when the topic's end offsets move (`StoresTable`).
"""

from __future__ import annotations

import logging
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from spark_apps.contract.config import StreamingAppConfig
from spark_apps.revenue.stores import latest_stores
from spark_apps.storage.kafka import kafka_admin_config, kafka_client_options
from spark_apps.storage.tables import local_table
from spark_apps.validation.schemas import KAFKA_RAW_COLUMNS, STORE_SCHEMA

LOG = logging.getLogger("orders_streaming_app.io")


def read_stores_table(spark: SparkSession, config: StreamingAppConfig) -> DataFrame:
    """Latest store per locationId from the compacted `stores` topic (a bounded batch read)."""
    raw = (
        spark.read.format("kafka")
        .options(**kafka_client_options(config))
        .option("subscribe", config.kafka.stores_topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
        .select(*KAFKA_RAW_COLUMNS)
    )
    return latest_stores(raw)


class StoresTable:
    """The latest store per locationId, re-read only when the `stores` topic's end offsets move.

    Stores change rarely; re-reading and re-aggregating the whole compacted topic every revenue
    batch was a Spark job per batch for nothing. A cheap watermark query (librdkafka, no Spark)
    tells whether anything was appended since the last read. The table is small (one row per
    location) and held as a local relation, so joining it costs no job of its own.
    """

    def __init__(self, config: StreamingAppConfig) -> None:
        self._config = config
        self._end_offsets: dict[int, int] | None = None
        self._table: DataFrame | None = None
        self._addresses: dict[str, tuple[str | None, ...]] = {}
        self._consumer: Any = None

    def current(self, spark: SparkSession) -> DataFrame:
        from confluent_kafka import KafkaException

        try:
            end_offsets: dict[int, int] | None = self._stores_end_offsets()
        except KafkaException as error:
            # A broker going away (a leader killed, a rolling restart) must not fail the batch: keep
            # the table already read, or read it with Spark's client (which waits for a new leader),
            # and ask again next batch with a new client.
            LOG.warning("could not check the stores topic's end offsets (%s); asking again next batch", error)
            self.close()
            end_offsets = None
            if self._table is not None:
                return self._table
        if self._table is None or end_offsets is None or end_offsets != self._end_offsets:
            rows = [tuple(row) for row in read_stores_table(spark, self._config).collect()]
            self._table = local_table(spark, rows, STORE_SCHEMA)
            self._addresses = {row[0]: row[1:] for row in rows}
            self._end_offsets = end_offsets
        return self._table

    @property
    def addresses(self) -> dict[str, tuple[str | None, ...]]:
        """The table `current` last returned, as location_id -> its address columns (in
        STORE_ADDRESS_COLUMNS' order)."""
        return self._addresses

    def _stores_end_offsets(self) -> dict[int, int]:
        from confluent_kafka import Consumer, TopicPartition

        if self._consumer is None:
            self._consumer = Consumer(
                {
                    **kafka_admin_config(self._config),
                    "group.id": "stores-watermarks",
                    "enable.auto.commit": False,
                }
            )
        topic = self._config.kafka.stores_topic
        metadata = self._consumer.list_topics(topic, timeout=10)
        partitions = sorted(metadata.topics[topic].partitions) if topic in metadata.topics else []
        return {
            p: self._consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in partitions
        }

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
