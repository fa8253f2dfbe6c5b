"""The bronze table: each deployment's archive of every record it read with its validation outcome.

The append is idempotent per micro-batch (Delta's txnAppId/txnVersion) and records the batch's
metadata in its commit, where a restarted driver finds it (`recorded_bronze_batch_metadata`).
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_apps.storage.tables import ensure_delta_table
from spark_apps.validation.schemas import BRONZE_ORDER_COLUMNS, BRONZE_SCHEMA, KAFKA_RAW_COLUMNS


def read_bronze(spark: SparkSession, table_path: str) -> DataFrame:
    """A batch read of one deployment's bronze table (``BRONZE_SCHEMA``)."""
    return spark.read.format("delta").load(table_path)


def read_bronze_raw(spark: SparkSession, table_path: str) -> DataFrame:
    """The raw Kafka records archived in bronze (the columns of a Kafka read) and the ingest batch
    that archived each (the dedupe rule's first key)."""
    return read_bronze(spark, table_path).select(*KAFKA_RAW_COLUMNS, "ingest_batch_id")


def with_ingest_batch(raw: DataFrame, bronze_path: str, since: Any) -> DataFrame:
    """Kafka records `raw` (appended at or after `since`) with the ingest batch that archived each
    in bronze, null for those the app has not ingested (yet): the dedupe rule needs it."""
    from delta.tables import DeltaTable

    spark = raw.sparkSession
    if not DeltaTable.isDeltaTable(spark, bronze_path):
        return raw.withColumn("ingest_batch_id", F.lit(None).cast("long"))
    archived = (
        spark.read.format("delta")
        .load(bronze_path)
        # Prunes ingest-date partitions and skips files by timestamp stats: only the range's records.
        .filter((F.col("ingest_date") >= F.to_date(F.lit(since))) & (F.col("timestamp") >= F.lit(since)))
        .select(*_POSITION, "ingest_batch_id")
    )
    return raw.join(archived, list(_POSITION), "left")


def bronze_rows(
    validated: DataFrame, ingest_batch_id: int | None = None, not_counted: Column | None = None
) -> DataFrame:
    """Archive shape (``BRONZE_SCHEMA``): the raw record, its validation outcome, typed fields when
    valid, whether a valid order is one the stream did not count (`superseded`, from `not_counted`:
    repeats and late orders), the ingest batch and the ingest date."""
    superseded = F.lit(False)
    if not_counted is not None:
        superseded = F.col("dlq_reason").isNull() & F.coalesce(not_counted, F.lit(False))
    return validated.select(
        *KAFKA_RAW_COLUMNS,
        "dlq_reason",
        *BRONZE_ORDER_COLUMNS,
        superseded.alias("superseded"),
        F.lit(ingest_batch_id).cast("long").alias("ingest_batch_id"),
        F.to_date("timestamp").alias("ingest_date"),
    )


_POSITION = ("topic", "partition", "offset")


def ensure_bronze_table(spark: SparkSession, table_path: str) -> None:
    """Create the bronze table, or add the columns a table written by an earlier version lacks
    (an empty append with schema merging: no SQL text, no rewrite; old rows read them as null)."""
    from delta.tables import DeltaTable

    ensure_delta_table(spark, table_path, BRONZE_SCHEMA, "ingest_date")
    existing = set(DeltaTable.forPath(spark, table_path).toDF().columns)
    if not set(BRONZE_SCHEMA.fieldNames()) <= existing:
        (
            spark.createDataFrame([], BRONZE_SCHEMA)
            .write.format("delta")
            .mode("append")
            .option("mergeSchema", "true")
            .save(table_path)
        )


def append_bronze_idempotent(
    rows: DataFrame,
    table_path: str,
    writer_id: str,
    batch_id: int,
    metadata: dict[str, Any] | None = None,
) -> None:
    """Append to the bronze Delta table once per (writer_id, batch_id), even if the batch is replayed.

    `metadata` (JSON) is recorded with the commit (Delta's userMetadata), where
    `recorded_bronze_batch_metadata` finds it."""
    writer = (
        rows.write.format("delta")
        .mode("append")
        .option("txnAppId", writer_id)
        .option("txnVersion", str(batch_id))
        .partitionBy("ingest_date")
    )
    if metadata is not None:
        writer = writer.option("userMetadata", json.dumps(metadata, sort_keys=True))
    writer.save(table_path)


# How many of bronze's latest commits `recorded_bronze_batch_metadata` looks through. The app's own
# appends are its only commits, one per batch, so the batch before a restart is one of the last two.
_RECENT_BRONZE_COMMITS = 20


def recorded_bronze_batch_metadata(
    spark: SparkSession, table_path: str, before_batch: int
) -> dict[str, Any] | None:
    """The metadata recorded by the bronze append of the newest batch before `before_batch`
    (`append_bronze_idempotent`), if it is among bronze's latest commits; None otherwise (no such
    commit, or one written without it). Reads only the newest commits of the log, never the data."""
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, table_path):
        return None
    recent = DeltaTable.forPath(spark, table_path).history(_RECENT_BRONZE_COMMITS).select("userMetadata")
    found: dict[str, Any] | None = None
    for row in recent.collect():
        try:
            metadata = json.loads(row["userMetadata"] or "null")
        except ValueError:
            continue
        batch = metadata.get("batch_id") if isinstance(metadata, dict) else None
        if isinstance(batch, int) and batch < before_batch and (found is None or batch > found["batch_id"]):
            found = metadata
    return found
