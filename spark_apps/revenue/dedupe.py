"""The dedupe rule (`spark_apps.contract.records.DEDUPE_RULE`) in Spark: for the stream, in Spark's state
store; for a batch (the reprocess job), as a window function over the copies of each order id.

A copy of a valid order is a *repeat* when the copy of the same order id just before it in arrival
order has a Kafka timestamp at most `dedupe.horizon` before its own. A repeat whose store, order type
or amount differ from that copy's (`content_fingerprint`) is also a *conflicting copy*: not counted,
as every repeat, and sent to the dead-letter topic with the reason `conflicting_copy` instead of passing
silently as a retry. Both functions add the boolean columns `repeat` and `conflicting_copy` and keep
every row: the stream archives repeats in bronze (`superseded`), and a batch leaves it to the caller
to drop them.

Cost (docs/streaming-app.md, "Duplicates"): the stream shuffles each batch's records by a bucket of
their order id into a Java operator (`spark_apps/jvm/order-validator/.../state/OrderRepeats.java`) that
keeps, per order id seen within the horizon, one long in RocksDB (a map per bucket): state grows
with rate x horizon, never with history, and a restart loads it from the checkpoint. A batch reads
one horizon before its range.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from spark_apps.contract.records import ARRIVAL_ORDER, CONFLICT_COLUMN

__all__ = [
    "CONFLICT_COLUMN",
    "REPEAT_COLUMN",
    "content_fingerprint",
    "initial_repeat_state",
    "mark_repeats",
    "with_repeats",
]

REPEAT_COLUMN = "repeat"
# The operator's input column of `content_fingerprint` (OrderRepeats.FINGERPRINT_COLUMN).
_FINGERPRINT_COLUMN = "_content_fingerprint"
# Fingerprints are 1 .. 2^20 - 1 (0 is "unknown": OrderRepeats packs them beside a Kafka time in one
# long of state). Two different contents share one with a chance of 1 in ~a million: such a copy is a
# plain repeat, as every copy was before the rule existed. A forger who can choose bytes can find a
# match offline; the rule catches broken and careless copies, not a determined forger.
_FINGERPRINT_VALUES = (1 << 20) - 1
# A copy of the Kafka timestamp that carries the query's watermark and is dropped before the
# operator: Spark filters rows behind the watermark out of an event-time operator's input only when
# that input has the watermark's column, and no record may be dropped (OrderRepeats' docstring).
_WATERMARK_COLUMN = "_kafka_time_watermark"


_CONTENT_COLUMNS = ("location_id", "order_type", "final_amount")


def content_fingerprint(rows: DataFrame) -> Column:
    """What makes two copies of an order the same order: store, order type and amount (not the event
    time, which a producer's retry may re-stamp), hashed to 1 .. 2^20 - 1; null for an invalid row, and
    for rows without those columns (no copy of them is ever a conflict). Spark's xxhash64 of the typed
    columns: the stream, the batch and bronze's rows agree on it."""
    if not set(_CONTENT_COLUMNS) <= set(rows.columns):
        return F.lit(None).cast("long")
    fingerprint = (
        F.pmod(F.xxhash64(*(F.col(column) for column in _CONTENT_COLUMNS)), F.lit(_FINGERPRINT_VALUES)) + 1
    )
    if "dlq_reason" not in rows.columns:  # valid orders only (`valid_orders`)
        return fingerprint
    return F.when(F.col("dlq_reason").isNull(), fingerprint)


def with_repeats(
    validated: DataFrame, horizon_s: int, delay_s: int, initial: DataFrame | None = None
) -> DataFrame:
    """`validated` (a stream of parse_and_validate_orders' rows) plus `repeat` and `conflicting_copy`,
    from Spark's state store.

    The query's watermark is the newest Kafka timestamp minus `delay_s`; an order id is forgotten once
    it passes the id's last copy plus the horizon. `initial` (order_id, last_arrival_ms; one row per
    id, optionally last_fingerprint) is the state a query starts from when its checkpoint is new: the
    Kafka query after a replay's history starts with the ids the history saw within the horizon
    (`initial_repeat_state`).
    The query's checkpoint keeps the state: a restart neither reads history nor forgets an id."""
    spark = validated.sparkSession
    watermarked = (
        validated.withColumn(_WATERMARK_COLUMN, F.col("timestamp"))
        .withColumn(_FINGERPRINT_COLUMN, content_fingerprint(validated))
        .withWatermark(_WATERMARK_COLUMN, f"{delay_s} seconds")
        .drop(_WATERMARK_COLUMN)
    )
    operator = spark._jvm.io.github.revenueplatform.state.OrderRepeats  # type: ignore[union-attr]
    jdf = operator.apply(watermarked._jdf, horizon_s * 1000, None if initial is None else initial._jdf)
    return DataFrame(jdf, spark).drop(_FINGERPRINT_COLUMN)


def initial_repeat_state(bronze: DataFrame, horizon_s: int) -> DataFrame | None:
    """The state `with_repeats` starts from after `bronze` (a batch read of the bronze table): every valid
    order id whose last copy arrived within the horizon of bronze's newest record, with that copy's
    Kafka timestamp and content fingerprint (the last copy in arrival order, as the stream's state
    holds it); None when bronze holds no valid order. Reads one horizon of bronze's ids (data skipping
    on `timestamp`), not its history, after one aggregate for its newest record."""
    valid = bronze.filter(F.col("dlq_reason").isNull())
    newest = valid.agg(F.unix_micros(F.max("timestamp")).alias("newest_us")).first()
    if newest is None or newest["newest_us"] is None:
        return None
    # Microseconds, not a datetime, cross from Python: no local time zone can shift the bound.
    since = F.timestamp_micros(F.lit(int(newest["newest_us"]) - horizon_s * 1_000_000))
    last_copy = F.max_by(
        F.struct(F.unix_millis("timestamp").alias("ms"), content_fingerprint(valid).alias("fingerprint")),
        F.struct(*(F.col(column) for column in ARRIVAL_ORDER)),
    )
    return (
        valid.filter(F.col("timestamp") >= since)
        .groupBy(F.col("order_id").cast("long").alias("order_id"))
        .agg(last_copy.alias("last"))
        .select(
            "order_id",
            F.col("last.ms").alias("last_arrival_ms"),
            F.col("last.fingerprint").alias("last_fingerprint"),
        )
    )


def mark_repeats(
    orders: DataFrame,
    horizon_s: int,
    arrival: tuple[str, str, str, str] = ("ingest_batch_id", "timestamp", "partition", "offset"),
) -> DataFrame:
    """Batch: valid `orders` plus `repeat` and `conflicting_copy`. `arrival` names the columns of
    ``ARRIVAL_ORDER`` in `orders` (ingest batch, Kafka timestamp, partition, offset); a copy without an
    ingest batch (not archived yet) comes after the archived ones. To judge a copy at time t the
    previous copy must be read: a caller reads its rows from one horizon before the first copy it
    judges."""
    batch, timestamp, partition, offset = arrival
    in_arrival = Window.partitionBy("order_id").orderBy(
        F.col(batch).asc_nulls_last(), F.col(timestamp), F.col(partition), F.col(offset)
    )
    gap_ms = F.unix_millis(timestamp) - F.unix_millis(F.lag(timestamp).over(in_arrival))
    # No previous copy: the gap is null, and the copy is not a repeat.
    repeat = F.coalesce(gap_ms <= F.lit(horizon_s * 1000), F.lit(False))
    fingerprint = content_fingerprint(orders)
    conflicting = repeat & F.coalesce(fingerprint != F.lag(fingerprint).over(in_arrival), F.lit(False))
    return orders.withColumn(REPEAT_COLUMN, repeat).withColumn(CONFLICT_COLUMN, conflicting)
