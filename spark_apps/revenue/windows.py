"""Revenue per location, order type and event-time window (Spark's window function: the stream's
counting of each batch, `revenue.counting`, and the batch reprocessing job), and the revenue topic's
records (window key, JSON value).

A test proves Spark's windows and the quality frames' agree with the definition. Callers run with a
UTC session (`engine.session.required_spark_conf`).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_apps.validation.schemas import JSON_WRITE_OPTIONS, REVENUE_DDL

REVENUE_KEY_TIMESTAMP_PATTERN: Final = "yyyy-MM-dd'T'HH:mm:ssXXX"
_LOW_32_BITS: Final = 0xFFFFFFFF


# --------------------------------------------------------------------------------------------
# Revenue
# --------------------------------------------------------------------------------------------
def event_window(size: str, slide: str | None = None) -> Column:
    """Spark's window of `ordered_at`: tumbling when ``slide`` is None or equal to ``size``, hopping
    otherwise (an order is then in every window that holds it)."""
    if slide is None or slide == size:
        return F.window("ordered_at", size)
    return F.window("ordered_at", size, slide)


def revenue_sums(counted: Column | None = None) -> list[Column]:
    """Aggregates of a window's orders (those where `counted` holds, all when None): `order_count` and
    the cents as two long sums, `cents_high` and `cents_low`, that `revenue_from_sums` joins.

    Exact, and no window of accepted orders can overflow (an overflow under ANSI mode would fail
    the batch on every restart): each amount's cents are split into their high and low 32 bits and
    each half is summed as a long (within range up to 2^31 orders per window). A DECIMAL(38,2) sum
    runs on Java BigDecimals per row: the split made a 500,000-order batch's counting about twice
    as fast (bench/results/history.md, "each batch counted on the executors")."""
    high, low = _cents_halves()
    if counted is None:
        counted = F.lit(True)  # Spark's optimizer folds the conditions away
    return [
        F.count_if(counted).alias("order_count"),
        F.sum(F.when(counted, high)).alias("cents_high"),
        F.sum(F.when(counted, low)).alias("cents_low"),
    ]


@lru_cache(maxsize=1)
def _cents_halves() -> tuple[Column, Column]:
    """An order's cents, high and low 32 bits: built once (each Column is a round trip to the JVM, and
    a live batch builds its sums every time)."""
    cents = (F.col("final_amount") * F.lit(100)).cast("long")  # exact: DECIMAL(18,2) in cents fits a long
    return F.shiftright(cents, 32), cents.bitwiseAND(F.lit(_LOW_32_BITS))


def revenue_from_sums() -> Column:
    """`revenue`, DECIMAL(38,2), of a window's `revenue_sums` (0 for a window without counted orders)."""
    total_cents = F.coalesce(F.col("cents_high"), F.lit(0)).cast("decimal(38,0)") * F.lit(
        1 << 32
    ) + F.coalesce(F.col("cents_low"), F.lit(0))
    return (total_cents.cast("decimal(38,0)") / F.lit(100)).cast(REVENUE_DDL).alias("revenue")


def windowed_revenue(
    orders: DataFrame, size: str, slide: str | None = None, watermark: str | None = None
) -> DataFrame:
    """Order count and revenue per location, order type and event-time window (`event_window`,
    `revenue_sums`: exact, no overflow).

    Pass ``watermark`` only when the input has none yet: a streaming query fails with "Redefining
    watermark is disallowed".
    """
    if watermark is not None:
        orders = orders.withWatermark("ordered_at", watermark)
    aggregated = orders.groupBy("location_id", "order_type", event_window(size, slide).alias("window")).agg(
        *revenue_sums()
    )
    return aggregated.select(
        "location_id",
        "order_type",
        F.col("window.start").alias("window_start"),
        F.col("window.end").alias("window_end"),
        "order_count",
        revenue_from_sums(),
    )


def revenue_window_key(revenue: DataFrame) -> Column:
    """Deterministic key ``location_id|order_type|window_start`` (ISO, ``Z`` under UTC)
    so the compacted revenue topic keeps the latest value of each window."""
    return F.concat_ws(
        "|",
        revenue["location_id"],
        revenue["order_type"],
        F.date_format(revenue["window_start"], REVENUE_KEY_TIMESTAMP_PATTERN),
    )


def to_revenue_kafka_records(revenue: DataFrame) -> DataFrame:
    """Kafka sink columns for the revenue topic: window key and JSON of all columns."""
    return revenue.select(
        revenue_window_key(revenue).alias("key"),
        F.to_json(F.struct(*revenue.columns), JSON_WRITE_OPTIONS).alias("value"),
    )
