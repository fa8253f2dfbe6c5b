"""All reads and writes of the orders app: Kafka sources and sinks, Delta bronze and gold.

Business logic lives in spark_apps.transformations; this module only moves DataFrames
in and out. Exactly-once hinges on two writes here: the bronze append is made
idempotent per micro-batch with Delta's txnAppId/txnVersion, and the gold MERGE
upserts absolute window totals, so replaying a batch after a crash rewrites the same
values instead of adding them again.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_apps.config import StreamingAppConfig
from spark_apps.schemas import KAFKA_RAW_COLUMNS
from spark_apps.transformations import latest_stores

GOLD_KEY_COLUMNS = ("location_id", "order_type", "window_start")


def _kafka_client_options(config: StreamingAppConfig) -> dict[str, str]:
    options = {"kafka.bootstrap.servers": config.kafka.bootstrap_servers}
    options.update({f"kafka.{key}": value for key, value in config.kafka.options.items()})
    return options


def read_orders_stream(spark: SparkSession, config: StreamingAppConfig) -> DataFrame:
    """The `orders` topic as a stream of raw Kafka records (binary key/value plus position).

    With `config.history` (a replay from bronze) the stream is the archived records before the
    per-partition cut-over offsets, then Kafka from those offsets on: one stream, each record once.
    """
    reader = (
        spark.readStream.format("kafka")
        .options(**_kafka_client_options(config))
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
    if config.kafka.max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(config.kafka.max_offsets_per_trigger))
    live = reader.load().select(*KAFKA_RAW_COLUMNS)
    if config.history is None:
        return live
    history_table = materialize_replay_history(spark, config)
    history = (
        spark.readStream.format("delta")
        # All of the history in the first micro-batch: were it spread over several, the Kafka tail
        # (newer) read in the first batch would move the watermark past history still to come, and
        # history records would be dropped as late.
        .option("maxFilesPerTrigger", str(2**31 - 1))
        .load(history_table)
        .select(*KAFKA_RAW_COLUMNS)
    )
    return history.unionByName(live)


def history_cut_over_offsets(config: StreamingAppConfig) -> str:
    """Spark startingOffsets JSON: Kafka is read from the first offset bronze does not hold."""
    assert config.history is not None
    offsets = {str(p): o for p, o in sorted(config.history.kafka_offsets.items())}
    return json.dumps({config.kafka.orders_topic: offsets})


def materialize_replay_history(spark: SparkSession, config: StreamingAppConfig) -> str:
    """Copy the history (bronze records before the cut-over) into this deployment's own frozen table.

    Read as a stream, the source bronze would keep growing while its deployment runs; a frozen copy
    lets the stream finish the history and report it done. The copy is one Delta commit made once:
    after a crash it either exists whole or is made again, and a restart reuses it.
    """
    from delta.tables import DeltaTable

    assert config.history is not None
    target = config.names.replay_history_table
    if DeltaTable.isDeltaTable(spark, target):
        return target
    before_cut_over = F.lit(False)
    for partition, offset in config.history.kafka_offsets.items():
        if offset >= 0:
            before_cut_over = before_cut_over | (
                (F.col("partition") == partition) & (F.col("offset") < offset)
            )
    history = (
        spark.read.format("delta")
        .load(config.history.bronze_table)
        .where((F.col("topic") == config.kafka.orders_topic) & before_cut_over)
        .select(*KAFKA_RAW_COLUMNS)
    )
    history.write.format("delta").mode("overwrite").save(target)
    return target


def read_stores_table(spark: SparkSession, config: StreamingAppConfig) -> DataFrame:
    """Latest store per locationId from the compacted `stores` topic (a bounded batch read)."""
    raw = (
        spark.read.format("kafka")
        .options(**_kafka_client_options(config))
        .option("subscribe", config.kafka.stores_topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
        .select(*KAFKA_RAW_COLUMNS)
    )
    return latest_stores(raw)


def read_orders_batch(
    spark: SparkSession, config: StreamingAppConfig, starting: str, ending: str
) -> DataFrame:
    """A bounded batch of raw `orders` records between explicit per-partition offsets (JSON)."""
    return (
        spark.read.format("kafka")
        .options(**_kafka_client_options(config))
        .option("subscribe", config.kafka.orders_topic)
        .option("startingOffsets", starting)
        .option("endingOffsets", ending)
        .option("failOnDataLoss", "true")
        .load()
        .select(*KAFKA_RAW_COLUMNS)
    )


def read_bronze_raw(spark: SparkSession, table_path: str) -> DataFrame:
    """The raw Kafka records archived in bronze (same columns as a Kafka read)."""
    return spark.read.format("delta").load(table_path).select(*KAFKA_RAW_COLUMNS)


def write_to_kafka(records: DataFrame, config: StreamingAppConfig, topic: str) -> None:
    """Batch-write Kafka sink columns (key, value[, headers]) to `topic` (at-least-once)."""
    (records.write.format("kafka").options(**_kafka_client_options(config)).option("topic", topic).save())


def bronze_rows(validated: DataFrame) -> DataFrame:
    """Archive shape: the raw record, its validation outcome, event time when valid, ingest date."""
    return validated.select(
        *KAFKA_RAW_COLUMNS,
        "dlq_reason",
        "ordered_at",
        F.to_date("timestamp").alias("ingest_date"),
    )


def append_bronze_idempotent(rows: DataFrame, table_path: str, writer_id: str, batch_id: int) -> None:
    """Append to the bronze Delta table once per (writer_id, batch_id), even if the batch is replayed."""
    (
        rows.write.format("delta")
        .mode("append")
        .option("txnAppId", writer_id)
        .option("txnVersion", str(batch_id))
        .partitionBy("ingest_date")
        .save(table_path)
    )


def merge_gold(updates: DataFrame, table_path: str) -> None:
    """Upsert window rows into the gold table on (location_id, order_type, window_start).

    Rows carry each window's full current totals, so a MERGE of the same batch twice is a no-op.
    """
    from delta.tables import DeltaTable

    spark = updates.sparkSession
    if not DeltaTable.isDeltaTable(spark, table_path):
        # The first batch creates the table; concurrent creators do not exist (one writer per deployment).
        updates.limit(0).write.format("delta").mode("ignore").save(table_path)
    condition = " AND ".join(f"gold.{column} = updates.{column}" for column in GOLD_KEY_COLUMNS)
    (
        DeltaTable.forPath(spark, table_path)
        .alias("gold")
        .merge(updates.alias("updates"), condition)
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .execute()
    )


def replace_gold_windows(
    recomputed: DataFrame,
    table_path: str,
    range_start: Any,
    range_end: Any,
    location_ids: list[str] | None = None,
) -> None:
    """Make gold's windows inside [start, end) equal `recomputed`: the batch result wins.

    Changed windows are updated, missing ones inserted, and gold windows in the range that
    the recomputation does not have are deleted; windows outside the range (or, when
    `location_ids` is given, of other locations) are untouched.

    The conditions are Column expressions, never SQL text: `location_ids` come from a trigger
    form, and a value spliced into SQL could widen the delete to the whole table.
    """
    from delta.tables import DeltaTable

    spark = recomputed.sparkSession
    if not DeltaTable.isDeltaTable(spark, table_path):
        recomputed.limit(0).write.format("delta").mode("ignore").save(table_path)
    first, *rest = (F.col(f"gold.{column}") == F.col(f"fixed.{column}") for column in GOLD_KEY_COLUMNS)
    same_window = first
    for match in rest:
        same_window = same_window & match
    # A string literal cast to TIMESTAMP is read in the session time zone (UTC), as before; a
    # Python datetime literal would be converted with the driver process's local zone instead.
    in_range = (F.col("gold.window_start") >= F.lit(range_start.isoformat()).cast("timestamp")) & (
        F.col("gold.window_end") <= F.lit(range_end.isoformat()).cast("timestamp")
    )
    if location_ids:
        in_range = in_range & F.col("gold.location_id").isin([str(location) for location in location_ids])
    (
        DeltaTable.forPath(spark, table_path)
        .alias("gold")
        .merge(recomputed.alias("fixed"), same_window)
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .whenNotMatchedBySourceDelete(condition=in_range)
        .execute()
    )


def read_gold(spark: SparkSession, table_path: str) -> DataFrame:
    """The gold windowed-revenue table of one deployment."""
    return spark.read.format("delta").load(table_path)


def kafka_admin_config(config: StreamingAppConfig) -> dict[str, Any]:
    """librdkafka settings for side channels of the app (committing offsets to its consumer group)."""
    return {"bootstrap.servers": config.kafka.bootstrap_servers, **config.kafka.options}
