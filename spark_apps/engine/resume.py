"""Where a micro-batch's revenue state comes from after a restart (or a failed batch): the watermark
the batch before recorded with its bronze commit (or a scan of bronze, for batches before it did)
and the open windows' totals from gold. Nothing here grows with the window size or the history.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_apps.contract.naming import DeploymentNames
from spark_apps.contract.records import MONEY_SCALE
from spark_apps.revenue.counting import watermark_event_us
from spark_apps.revenue.state import MICROS_PER_SECOND, RevenueState, WindowSpec
from spark_apps.storage.bronze import BronzeAppender, read_bronze
from spark_apps.storage.gold import gold_frame

LOG = logging.getLogger("orders_streaming_app.micro_batch")
# A window gold holds as (location, type, start us, end us, count, cents).
RedoWindows = list[tuple[str, str, int, int, int, int]]


def resume_revenue_state(
    spark: SparkSession,
    names: DeploymentNames,
    windows: WindowSpec,
    delay_us: int,
    batch_id: int,
    bronze: BronzeAppender,
) -> tuple[RevenueState, RedoWindows | None]:
    """The state after batch `batch_id` - 1, from what that batch left rather than from the orders:
    the watermark its bronze commit recorded and the open windows' totals from gold. Nothing here
    grows with the window size or the history (the per-order dedupe state is Spark's, restored
    from the checkpoint). Also returns, when gold already holds batch `batch_id`'s own MERGE (a
    crash after it), the windows that MERGE wrote: the batch is then redone without adding to
    them (`RevenueState.apply(add_to_windows=False)`).

    A query's first batch (`batch_id` 0) starts empty without reading anything: no batch before it
    can have written bronze or gold (their reads found nothing anyway, in seconds of cold Spark jobs
    at every new deployment's start). Redoing it after a crash past its gold MERGE writes the same
    totals again, as gold's rows carry the windows' totals.

    `bronze` (the appender of `names`' bronze table) reads bronze's latest commits for the recorded
    watermark and keeps what it read for its next append (`BronzeAppender.recorded_before`)."""
    if batch_id == 0:
        LOG.info("batch 0: the query's first batch; starting with empty revenue state")
        return RevenueState(windows, delay_us), None
    recorded = bronze.recorded_before(spark, batch_id)
    if recorded is not None:
        watermark = recorded.get("watermark_us")
        source = "the watermark bronze recorded"
    else:  # a batch before the watermark was recorded with bronze's commits: scan bronze once
        archived = read_bronze(spark, names.bronze_orders_table).filter(
            F.col("dlq_reason").isNull() & (F.col("ingest_batch_id") < F.lit(batch_id))
        )
        watermark = _scanned_watermark(archived, delay_us)
        source = "a scan of bronze"
    if watermark is None:
        LOG.info("batch %d: no orders in bronze before it; starting with empty revenue state", batch_id)
        return RevenueState(windows, delay_us), None
    gold = _open_gold_windows(spark, names.gold_revenue_table, watermark)
    state = RevenueState.resumed(
        windows,
        delay_us,
        watermark,
        [(loc, kind, start, count, cents) for loc, kind, start, count, cents, _ in gold],
    )
    # A batch's windows all end after the watermark it started from: gold holds every one of them.
    redo = [
        (loc, kind, start, start + windows.size_us, count, cents)
        for loc, kind, start, count, cents, written_by in gold
        if written_by == batch_id
    ]
    LOG.info(
        "batch %d: resumed revenue state (watermark %s from %s): %d open windows from gold%s",
        batch_id,
        iso_us(watermark),
        source,
        state.open_windows,
        f"; gold already holds this batch's {len(redo)} windows" if redo else "",
    )
    return state, (redo or None)


def _scanned_watermark(valid_bronze: DataFrame, delay_us: int) -> int | None:
    """The watermark after bronze's valid orders: the latest event time, each bounded by its Kafka
    timestamp (`revenue.counting.watermark_event_us`), minus the delay. Reads all of bronze."""
    latest = valid_bronze.agg(F.max(watermark_event_us()).alias("latest")).first()
    if latest is None or latest["latest"] is None:
        return None
    return int(latest["latest"]) - delay_us


def _open_gold_windows(
    spark: SparkSession, table: str, watermark_us: int
) -> list[tuple[str, str, int, int, int, int]]:
    """Gold's windows that end after `watermark_us` (the ones the state keeps open) as (location,
    type, start us, count, cents, batch that wrote it). Data skipping on window_end reads only the
    files that can hold them."""
    rows = (
        gold_frame(spark, table)
        .filter(F.col("window_end") > F.timestamp_micros(F.lit(watermark_us)))
        .select(
            "location_id",
            "order_type",
            F.unix_micros("window_start").alias("start_us"),
            "order_count",
            "revenue",
            "batch_id",
        )
        .toArrow()
        .to_pylist()
    )
    return [
        (
            row["location_id"],
            row["order_type"],
            int(row["start_us"]),
            int(row["order_count"]),
            int(row["revenue"].scaleb(MONEY_SCALE)),
            -1 if row["batch_id"] is None else int(row["batch_id"]),
        )
        for row in rows
    ]


def iso_us(micros: int | None) -> str | None:
    if micros is None:
        return None
    return datetime.fromtimestamp(micros / MICROS_PER_SECOND, UTC).isoformat().replace("+00:00", "Z")
