"""One micro-batch counted on the executors: which valid orders count, their totals per window, and the
four numbers the driver's revenue state needs (`revenue.state.BatchCount`).

An order counts when it is not a repeat (`revenue.dedupe`) and its event time is after the watermark
the batch started from; the counted orders are summed per location, type and window by
`windows.windowed_revenue`, the reprocess job's own function, so the stream and the batch job window
and sum alike. One Spark job: the facts (valid, repeats, late, the latest event time a valid order
moves the watermark with) come back with the windows' totals. The driver receives one row per changed
window, never an order: the cost in the driver is O(windows) per batch, whatever the batch's size.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_apps.contract.records import MONEY_SCALE
from spark_apps.revenue.dedupe import REPEAT_COLUMN
from spark_apps.revenue.state import BatchCount
from spark_apps.revenue.windows import windowed_revenue


def watermark_event_us() -> Column:
    """The event time an order moves the watermark with: its own, but never past its Kafka timestamp
    (the broker's clock on LogAppendTime topics), so one order dated ahead cannot make the honest
    orders behind it late."""
    return F.least(F.unix_micros("ordered_at"), F.unix_micros("timestamp"))


def not_counted(watermark_us: int | None) -> Column:
    """True for a valid order the stream does not count: a repeat, or at or before the watermark."""
    if watermark_us is None:
        return F.col(REPEAT_COLUMN)
    return F.col(REPEAT_COLUMN) | (F.unix_micros("ordered_at") <= F.lit(watermark_us))


def count_batch(valid: DataFrame, watermark_us: int | None, size: str, slide: str | None) -> BatchCount:
    """Count `valid` (a batch's valid orders with `repeat`) from `watermark_us`, in `size`/`slide`
    windows (the app's `window` config)."""
    late = F.lit(False)
    if watermark_us is not None:
        late = ~F.col(REPEAT_COLUMN) & (F.unix_micros("ordered_at") <= F.lit(watermark_us))
    totals = windowed_revenue(valid.filter(~not_counted(watermark_us)), size, slide).select(
        "location_id",
        "order_type",
        F.unix_micros("window_start").alias("window_start_us"),
        "order_count",
        "revenue",
    )
    # The facts ride in the same job as one more row (its window start null). A global aggregate has
    # its row whatever the input; Spark's `observe` observes nothing when the optimizer folds an
    # input away or it has no partitions (a batch without data).
    facts = valid.agg(
        F.count(F.lit(1)).alias("order_count"),
        F.count_if(F.col(REPEAT_COLUMN)).alias("repeats"),
        F.count_if(late).alias("late"),
        F.max(watermark_event_us()).alias("watermark_event_us"),
    )
    # Arrow: a window-heavy batch hands back ~100,000 rows, which Row objects would take seconds for.
    rows = totals.unionByName(facts, allowMissingColumns=True).toArrow().to_pylist()
    [batch] = [row for row in rows if row["window_start_us"] is None]
    latest = batch["watermark_event_us"]
    return BatchCount(
        watermark_us=watermark_us,
        valid=int(batch["order_count"]),
        repeats=int(batch["repeats"]),
        late=int(batch["late"]),
        watermark_event_us=None if latest is None else int(latest),
        windows=[
            (
                str(row["location_id"]),
                str(row["order_type"]),
                int(row["window_start_us"]),
                int(row["order_count"]),
                int(row["revenue"].scaleb(MONEY_SCALE)),  # exact: a Decimal of two places, as cents
            )
            for row in rows
            if row["window_start_us"] is not None
        ],
    )
