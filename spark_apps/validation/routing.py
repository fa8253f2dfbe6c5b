"""Where validated records go besides bronze: dead letters (`orders_dlq`, with their reason, position
and original bytes) and valid orders to the topic of their type, as Kafka sink rows. Pure
DataFrame -> DataFrame functions.
"""

from __future__ import annotations

from functools import lru_cache

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_apps.contract.records import CONFLICT_COLUMN, GENERAL, DlqReason
from spark_apps.validation.orders import invalid_orders
from spark_apps.validation.schemas import JSON_WRITE_OPTIONS, KAFKA_HEADERS_TYPE, ORDER_COLUMNS

DEAD_LETTER_ORIGINAL_BYTES = 100_000
"""How many of an original key's and value's bytes a dead letter carries. A record over the size
bound (`OrderRules.max_record_bytes`, `record_too_large`) may be as large as the broker allows;
its dead letter carries the first bytes, the full sizes and the value's SHA-256, so the dead letter
itself (at most ~370 kB: the key, and base64 of key and value) stays within the Kafka clients'
1,000,000-byte limit."""


# --------------------------------------------------------------------------------------------
# Dead letters
# --------------------------------------------------------------------------------------------
def to_dlq_records(validated: DataFrame) -> DataFrame:
    """Dead-letter rows (``DLQ_RECORD_SCHEMA``): original bytes, Kafka position and reason."""
    return invalid_orders(validated).select(
        F.col("key").alias("original_key"),
        F.col("value").alias("original_value"),
        F.col("topic").alias("source_topic"),
        F.col("partition").alias("source_partition"),
        F.col("offset").alias("source_offset"),
        F.col("timestamp").alias("source_timestamp"),
        F.col("dlq_reason"),
    )


def _base64(binary: Column) -> Column:
    """Single-line base64: Spark chunks base64 output MIME-style (CRLF every 76 chars) by default."""
    return F.regexp_replace(F.base64(binary), r"[\r\n]", "")


def _first_bytes(binary: Column) -> Column:
    """At most DEAD_LETTER_ORIGINAL_BYTES of `binary` (null stays null)."""
    return F.substring(binary, 1, DEAD_LETTER_ORIGINAL_BYTES)


def _header(name: str, value: Column) -> Column:
    return F.struct(F.lit(name).alias("key"), value.cast("string").cast("binary").alias("value"))


def _dlq_value(
    reason: Column,
    source_topic: Column,
    source_partition: Column,
    source_offset: Column,
    source_timestamp: Column,
    original_key: Column,
    original_value: Column,
) -> Column:
    """JSON value of a dead letter: reason, source position, base64 of the original bytes (at most
    DEAD_LETTER_ORIGINAL_BYTES of each), their full sizes and the value's SHA-256."""
    return F.to_json(
        F.struct(
            reason.alias("dlq_reason"),
            source_topic.alias("source_topic"),
            source_partition.alias("source_partition"),
            source_offset.alias("source_offset"),
            source_timestamp.alias("source_timestamp"),
            _base64(_first_bytes(original_key)).alias("original_key_base64"),
            _base64(_first_bytes(original_value)).alias("original_value_base64"),
            F.length(original_key).alias("original_key_bytes"),
            F.length(original_value).alias("original_value_bytes"),
            F.sha2(original_value, 256).alias("original_value_sha256"),
        ),
        JSON_WRITE_OPTIONS,
    )


def _dlq_headers(
    reason: Column, source_topic: Column, source_partition: Column, source_offset: Column
) -> Column:
    """Headers repeating reason and source position, for consumers that only read headers."""
    return F.array(
        _header("dlq_reason", reason),
        _header("source_topic", source_topic),
        _header("source_partition", source_partition),
        _header("source_offset", source_offset),
    )


def to_dlq_kafka_records(dlq: DataFrame) -> DataFrame:
    """Kafka sink columns (key, value, headers) for ``orders_dlq``.

    The key is the original key bytes (so a replay lands in the same partition; at most
    DEAD_LETTER_ORIGINAL_BYTES of them); the value is JSON carrying base64 of the original bytes,
    which may not be UTF-8; headers repeat reason and source position for consumers that only
    read headers.
    """
    return dlq.select(
        _first_bytes(F.col("original_key")).alias("key"),
        _dlq_value(
            F.col("dlq_reason"),
            F.col("source_topic"),
            F.col("source_partition"),
            F.col("source_offset"),
            F.col("source_timestamp"),
            F.col("original_key"),
            F.col("original_value"),
        ).alias("value"),
        _dlq_headers(
            F.col("dlq_reason"), F.col("source_topic"), F.col("source_partition"), F.col("source_offset")
        ).alias("headers"),
    )


def side_output_records(
    validated: DataFrame, dlq_topic: str, general_topic: str, restaurant_topic: str
) -> DataFrame:
    """Every validated record as one Kafka sink row (topic, key, value, headers), in one projection.

    Dead letters go to ``dlq_topic`` with the key, value and headers of ``to_dlq_kafka_records``, and so
    do the dedupe rule's conflicting copies (``CONFLICT_COLUMN``, when `validated` has it), with the
    reason ``conflicting_copy``; valid orders to the topic of their type with those of
    ``to_kafka_records``. One projection instead of three filtered writes: the batch is scanned once
    and written by one Kafka job.
    """
    columns = _side_output_columns(
        dlq_topic, general_topic, restaurant_topic, CONFLICT_COLUMN in validated.columns
    )
    return validated.select(*columns)


@lru_cache(maxsize=8)
def _side_output_columns(
    dlq_topic: str, general_topic: str, restaurant_topic: str, with_conflicts: bool
) -> tuple[Column, ...]:
    """`side_output_records`' projection, built once per topics: each Column is a round trip to the JVM
    (py4j), ~860 of them for this projection, which a live batch made again every batch (100-200 ms of
    its driver's time before the write's job started; bench/results/history.md, "Stop 66")."""
    reason = F.col("dlq_reason")
    if with_conflicts:
        reason = F.coalesce(reason, F.when(F.col(CONFLICT_COLUMN), F.lit(DlqReason.CONFLICTING_COPY)))
    dead_letter = reason.isNotNull()
    topic = (
        F.when(dead_letter, F.lit(dlq_topic))
        .when(F.col("order_type") == GENERAL, F.lit(general_topic))
        .otherwise(F.lit(restaurant_topic))
    )
    dlq_value = _dlq_value(
        reason,
        F.col("topic"),
        F.col("partition"),
        F.col("offset"),
        F.col("timestamp"),
        F.col("key"),
        F.col("value"),
    )
    dlq_headers = _dlq_headers(reason, F.col("topic"), F.col("partition"), F.col("offset"))
    return (
        topic.alias("topic"),
        F.when(dead_letter, _first_bytes(F.col("key")))
        .otherwise(F.col("location_id").cast("string").cast("binary"))
        .alias("key"),
        F.when(dead_letter, dlq_value).otherwise(_order_value()).alias("value"),
        F.when(dead_letter, dlq_headers).otherwise(F.array().cast(KAFKA_HEADERS_TYPE)).alias("headers"),
    )


def to_kafka_records(
    df: DataFrame, key_col: str = "location_id", value_cols: tuple[str, ...] = ORDER_COLUMNS
) -> DataFrame:
    """Kafka sink columns: string key from ``key_col``, JSON value of ``value_cols``.

    Decimals are written by Spark as exact number literals (``27.00``), never via float.
    """
    return df.select(F.col(key_col).cast("string").alias("key"), _order_value(value_cols).alias("value"))


def _order_value(value_cols: tuple[str, ...] = ORDER_COLUMNS) -> Column:
    """JSON value of a routed order; decimals are exact number literals (``27.00``), never floats."""
    return F.to_json(F.struct(*value_cols), JSON_WRITE_OPTIONS)
