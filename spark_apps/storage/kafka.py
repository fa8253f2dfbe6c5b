"""Kafka through Spark's connector: the orders stream and bounded reads of it, batch writes of sink
columns, the librdkafka settings of the app's side channels (`kafka_admin_config`) and the id of the
cluster its brokers belong to (`kafka_cluster_id`).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession

from spark_apps.contract.config import StreamingAppConfig
from spark_apps.contract.config_rules import interval_seconds
from spark_apps.contract.kafka_cluster import KafkaClusterCheckError, KafkaClusterUnreachableError
from spark_apps.storage.replay_history import history_cut_over_offsets
from spark_apps.validation.schemas import KAFKA_RAW_COLUMNS


def kafka_client_options(config: StreamingAppConfig) -> dict[str, str]:
    """Options of Spark's Kafka source/sink: servers, the config's own options, the connection's security."""
    options = {"kafka.bootstrap.servers": config.kafka.bootstrap_servers}
    options.update({f"kafka.{key}": value for key, value in config.kafka.options.items()})
    if config.kafka.security is not None:
        options.update(config.kafka.security.java_options())
    return options


def read_orders_stream(spark: SparkSession, config: StreamingAppConfig) -> DataFrame:
    """The `orders` topic as a stream of raw Kafka records (binary key/value plus position). With
    `config.history` (a replay from bronze) Kafka is read from the per-partition cut-over offsets on:
    the history before them is read by a query of its own first (`read_replay_history_stream`)."""
    reader = (
        spark.readStream.format("kafka")
        .options(**kafka_client_options(config))
        .option("subscribe", config.kafka.orders_topic)
        # Silently skipping records lost to retention would make revenue wrong; stop and say so.
        .option("failOnDataLoss", "true")
        .option("includeHeaders", "false")
    )
    if config.history is not None:
        reader = reader.option("startingOffsets", history_cut_over_offsets(config))
    else:
        reader = reader.option("startingOffsets", config.kafka.starting_offsets)
        if config.kafka.starting_timestamp_ms is not None:
            reader = reader.option("startingTimestamp", str(config.kafka.starting_timestamp_ms))
    reader = reader.options(**batch_size_options(config))
    if config.kafka.min_partitions is not None:
        reader = reader.option("minPartitions", str(config.kafka.min_partitions))
    return reader.load().select(*KAFKA_RAW_COLUMNS)


def batch_size_options(config: StreamingAppConfig) -> dict[str, str]:
    """The Kafka source's options that size and pace the orders stream's batches: at most
    `kafka.max_offsets_per_trigger` records; with `trigger.min_records`, a batch once that many
    wait or once `trigger.max_wait` has passed since the one before began (processing_time only)."""
    options: dict[str, str] = {}
    if config.kafka.max_offsets_per_trigger is not None:
        options["maxOffsetsPerTrigger"] = str(config.kafka.max_offsets_per_trigger)
    trigger = config.trigger
    if trigger.mode == "processing_time" and trigger.min_records is not None:
        options["minOffsetsPerTrigger"] = str(trigger.min_records)
        options["maxTriggerDelay"] = f"{interval_seconds(trigger.max_wait)}s"
    return options


def read_orders_batch(
    spark: SparkSession, config: StreamingAppConfig, starting: str, ending: str
) -> DataFrame:
    """A bounded batch of raw `orders` records between explicit per-partition offsets (JSON)."""
    reader = (
        spark.read.format("kafka")
        .options(**kafka_client_options(config))
        .option("subscribe", config.kafka.orders_topic)
        .option("startingOffsets", starting)
        .option("endingOffsets", ending)
        .option("failOnDataLoss", "true")
    )
    if config.kafka.min_partitions is not None:
        reader = reader.option("minPartitions", str(config.kafka.min_partitions))
    return reader.load().select(*KAFKA_RAW_COLUMNS)


def write_to_kafka(records: DataFrame, config: StreamingAppConfig, topic: str | None = None) -> None:
    """Batch-write Kafka sink columns (key, value[, headers]) to `topic` (at-least-once).

    Without `topic` each row names its own in a `topic` column (several topics, one job).
    """
    writer = records.write.format("kafka").options(**kafka_client_options(config))
    if topic is not None:
        writer = writer.option("topic", topic)
    writer.save()


def kafka_cluster_id(config: StreamingAppConfig, timeout_s: float = 30.0) -> str:
    """The id of the Kafka cluster the config's brokers belong to, from a metadata request for the orders
    topic: it needs no right on the cluster itself (describe_cluster does) and stays small on a cluster
    of many topics."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    servers = config.kafka.bootstrap_servers
    admin = AdminClient(kafka_admin_config(config))
    try:
        cluster_id = admin.list_topics(config.kafka.orders_topic, timeout=timeout_s).cluster_id
    except KafkaException as error:
        raise KafkaClusterUnreachableError(
            f"deployment {config.deployment_id!r} cannot read the Kafka cluster id of its brokers {servers} "
            f"within {timeout_s:.0f}s ({error}); check they run and kafka.bootstrap_servers names them"
        ) from error
    if not cluster_id:
        raise KafkaClusterCheckError(f"the brokers {servers} report no cluster id (Kafka before 0.10.1?)")
    return str(cluster_id)


def kafka_admin_config(config: StreamingAppConfig) -> dict[str, Any]:
    """librdkafka settings for side channels of the app (committing offsets to its consumer group).

    Only servers and security: `kafka.options` are the Java client's keys, which librdkafka rejects.
    """
    security = config.kafka.security.librdkafka_config() if config.kafka.security is not None else {}
    return {"bootstrap.servers": config.kafka.bootstrap_servers, **security}
