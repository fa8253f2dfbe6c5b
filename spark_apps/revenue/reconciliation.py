"""Pure functions of batch reprocessing: recompute closed windows, and diff them against gold.

`closed_window_revenue` chains the very transformations the streaming app uses (parse and
validate, the dedupe rule, window) over a bounded batch of raw records, keeping only windows
that lie wholly inside the requested range. `reconcile_windows` compares that recomputation
with what gold holds, window by window.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_apps.contract.records import GOLD_KEY_COLUMNS, OrderRules
from spark_apps.revenue.dedupe import CONFLICT_COLUMN, REPEAT_COLUMN, mark_repeats
from spark_apps.revenue.windows import windowed_revenue
from spark_apps.validation.orders import DEFAULT_ORDER_RULES, parse_and_validate_orders, valid_orders

MISSING: Final = "missing"  # in the recomputation, not in gold
EXTRA: Final = "extra"  # in gold, not in the recomputation
DIFFERENT: Final = "different"  # in both, count or revenue differs
EQUAL: Final = "equal"


def closed_window_revenue(
    raw: DataFrame,
    size: str,
    slide: str | None,
    range_start: datetime,
    range_end: datetime,
    dedupe_horizon_s: int,
    rules: OrderRules = DEFAULT_ORDER_RULES,
) -> DataFrame:
    """Windowed revenue of the valid orders in `raw` that are not repeats (`spark_apps.revenue.dedupe`), for
    windows inside [start, end). `raw` must reach one dedupe horizon before the copies it judges."""
    valid = valid_orders(parse_and_validate_orders(raw, rules))
    lineage = ("source_ingest_batch", "source_timestamp", "source_partition", "source_offset")
    judged = mark_repeats(valid, dedupe_horizon_s, lineage)
    orders = judged.filter(~F.col(REPEAT_COLUMN)).drop(REPEAT_COLUMN, CONFLICT_COLUMN)
    windows = windowed_revenue(orders, size, slide)
    start, end = F.lit(range_start).cast("timestamp"), F.lit(range_end).cast("timestamp")
    return windows.filter((F.col("window_start") >= start) & (F.col("window_end") <= end))


def gold_in_range(gold: DataFrame, range_start: datetime, range_end: datetime) -> DataFrame:
    """Gold windows that lie wholly inside [start, end)."""
    start, end = F.lit(range_start).cast("timestamp"), F.lit(range_end).cast("timestamp")
    return gold.filter((F.col("window_start") >= start) & (F.col("window_end") <= end))


def reconcile_windows(recomputed: DataFrame, gold: DataFrame) -> DataFrame:
    """One row per window key in either side: status, and both sides' count and revenue."""
    left = recomputed.select(
        *GOLD_KEY_COLUMNS,
        F.col("window_end").alias("expected_window_end"),
        F.col("order_count").alias("expected_order_count"),
        F.col("revenue").alias("expected_revenue"),
    )
    right = gold.select(
        *GOLD_KEY_COLUMNS,
        F.col("order_count").alias("actual_order_count"),
        F.col("revenue").alias("actual_revenue"),
    )
    joined = left.join(right, on=list(GOLD_KEY_COLUMNS), how="full_outer")
    status = (
        F.when(F.col("actual_order_count").isNull(), F.lit(MISSING))
        .when(F.col("expected_order_count").isNull(), F.lit(EXTRA))
        .when(
            (F.col("expected_order_count") != F.col("actual_order_count"))
            | (F.col("expected_revenue") != F.col("actual_revenue")),
            F.lit(DIFFERENT),
        )
        .otherwise(F.lit(EQUAL))
    )
    return joined.withColumn("status", status)
