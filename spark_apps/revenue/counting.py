"""One micro-batch counted on the executors: which valid orders count, their totals per window, and the
four numbers the driver's revenue state needs (`revenue.state.BatchCount`).

An order counts when it is not a repeat (`revenue.dedupe`) and its event time is after the watermark
the batch started from; the counted orders are summed per location, type and window with the
reprocess job's own window and sums (`windows.event_window`, `windows.revenue_sums`), so the stream
and the batch job window and sum alike. One aggregation, one shuffle of partial sums: the facts
(valid, repeats, late, the latest event time a valid order moves the watermark with) are aggregated
per window beside the sums and added up in the driver (a second aggregate for them, or Spark's
`observe`, cost a batch of 40,000 orders 30-100 % more; bench/results/history.md, "each batch counted on the
executors"). The driver
receives one row per window the batch touched, never an order: the cost in the driver is
O(windows) per batch, whatever the batch's size.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType

from spark_apps.contract.config_rules import interval_seconds
from spark_apps.contract.records import CONFLICT_COLUMN, MONEY_SCALE
from spark_apps.revenue.dedupe import REPEAT_COLUMN
from spark_apps.revenue.state import MICROS_PER_SECOND, BatchCount
from spark_apps.revenue.windows import event_window, revenue_from_sums, revenue_sums


@dataclass(frozen=True)
class _FixedColumns:
    event_us: Column
    repeat: Column
    not_repeat: Column
    once: Column
    window: Column
    facts: list[Column]
    latest: Column
    output: list[Column]


def watermark_event_us() -> Column:
    """The event time an order moves the watermark with: its own, but never past its Kafka timestamp
    (the broker's clock on LogAppendTime topics), so one order dated ahead cannot make the honest
    orders behind it late."""
    return F.least(F.unix_micros("ordered_at"), F.unix_micros("timestamp"))


# Event times compared with the watermark as DECIMAL(19, 0) microseconds. Every long fits, so no
# event time a validated order can carry overflows the cast (with ANSI on, DECIMAL(18, 0) failed the
# batch on every retry for an order dated in the year 40000); and Spark does not count long ->
# DECIMAL(19, 0) as a widening, so its optimizer does not unwrap the comparison back into a long
# one with a long literal, as it does for DECIMAL(20, 0). A value below 10^18 stays a long inside
# Spark's Decimal.
# Spark writes a long literal into the Java source it generates for a stage, so a watermark that moves every
# batch made every batch's counting and bronze stages compile anew, and run as fresh classes the JIT had not
# seen; a decimal literal is passed to the generated class as a reference instead, and the class compiled
# for the first batch serves every later one (bench/results/history.md, "per-batch values out of generated
# code").
_MICROS = DecimalType(19, 0)


def at_or_before(event_us: Column, watermark_us: int) -> Column:
    """`event_us` <= `watermark_us`, without `watermark_us` in the generated code (see `_MICROS`)."""
    return event_us.cast(_MICROS) <= F.lit(Decimal(watermark_us)).cast(_MICROS)


def not_counted(watermark_us: int | None) -> Column:
    """True for a valid order the stream does not count: a repeat, or at or before the watermark."""
    if watermark_us is None:
        return F.col(REPEAT_COLUMN)
    return F.col(REPEAT_COLUMN) | at_or_before(F.unix_micros("ordered_at"), watermark_us)


@lru_cache(maxsize=16)
def _fixed_count_columns(size: str, slide: str | None, with_conflicts: bool) -> _FixedColumns:
    """What `count_batch` builds the same for every batch of a window config, built once: each Column
    is a round trip to the JVM (py4j), and a live batch spent 130-160 ms of its 2-core machine's time
    on 686 of them before its job started; with these kept, 226 and 80-110 ms (bench/results/history.md,
    "Stop 65"). Only what holds the watermark is built per batch, in the same shape as before
    (`at_or_before`): the plans, and so the generated code, stay the same from batch to batch
    (tests/unit/spark_apps/engine/test_batch_code_compiled_once.py)."""
    event_us = F.unix_micros("ordered_at")
    repeat = F.col(REPEAT_COLUMN)
    # Each order's facts count once: in its latest window when windows hop (it is in several).
    once = F.lit(True)
    if slide is not None and slide != size:
        slide_us = interval_seconds(slide) * MICROS_PER_SECOND
        once = F.unix_micros(F.col("window.start")) == event_us - F.pmod(event_us, F.lit(slide_us))
    conflicting = F.col(CONFLICT_COLUMN) if with_conflicts else F.lit(False)
    return _FixedColumns(
        event_us=event_us,
        repeat=repeat,
        not_repeat=~repeat,
        once=once,
        window=event_window(size, slide),
        facts=[
            F.count_if(once).alias("valid"),
            F.count_if(once & repeat).alias("repeats"),
            F.count_if(once & conflicting).alias("conflicting_copies"),
        ],
        latest=F.max(watermark_event_us()).alias("watermark_event_us"),
        output=[
            F.col("location_id"),
            F.col("order_type"),
            F.unix_micros("window.start").alias("window_start_us"),
            F.col("order_count"),
            revenue_from_sums(),
            *map(F.col, ("valid", "repeats", "conflicting_copies", "late", "watermark_event_us")),
        ],
    )


def count_batch(valid: DataFrame, watermark_us: int | None, size: str, slide: str | None) -> BatchCount:
    """Count `valid` (a batch's valid orders with `repeat`) from `watermark_us`, in `size`/`slide`
    windows (the app's `window` config)."""
    fixed = _fixed_count_columns(size, slide, CONFLICT_COLUMN in valid.columns)
    if watermark_us is None:
        late, counted = F.lit(False), fixed.not_repeat
    else:
        at_or_before_watermark = at_or_before(fixed.event_us, watermark_us)
        late = fixed.not_repeat & at_or_before_watermark
        counted = ~(fixed.repeat | at_or_before_watermark)
    in_windows = valid.withColumn("window", fixed.window)  # a row per window an order is in
    grouped = in_windows.groupBy("location_id", "order_type", "window").agg(
        *revenue_sums(counted=counted),
        *fixed.facts,
        F.count_if(fixed.once & late).alias("late"),
        fixed.latest,
    )
    # Arrow: a window-heavy batch hands back ~100,000 rows, which Row objects would take seconds for.
    rows = grouped.select(*fixed.output).toArrow().to_pylist()
    latest = [row["watermark_event_us"] for row in rows]
    return BatchCount(
        watermark_us=watermark_us,
        valid=sum(row["valid"] for row in rows),
        repeats=sum(row["repeats"] for row in rows),
        conflicting_copies=sum(row["conflicting_copies"] for row in rows),
        late=sum(row["late"] for row in rows),
        watermark_event_us=max(latest) if latest else None,
        # A window only late orders or repeats fell into is not changed.
        windows=[
            (
                str(row["location_id"]),
                str(row["order_type"]),
                int(row["window_start_us"]),
                int(row["order_count"]),
                int(row["revenue"].scaleb(MONEY_SCALE)),  # exact: a Decimal of two places, as cents
            )
            for row in rows
            if row["order_count"] > 0
        ],
    )
