"""Gold writes through Spark's Delta: the per-batch MERGE, the reprocess repair, and the conflict retry
both share (and that the driver's own writer, `gold_from_driver`, uses too).

The MERGE upserts absolute window totals, so replaying a batch after a crash rewrites the same
values instead of adding them again. `gold_frame` is gold as a Spark DataFrame (the control plane's
delta-rs reader is `revenue_platform.gold_table.read_gold`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator
from contextlib import contextmanager
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_apps.contract.fencing import GOLD_COMMIT_APP_ID, CommitStamp
from spark_apps.contract.gold_layout import GOLD_HOUR_COLUMN, SPARK_HOUR_PATTERN, window_hour
from spark_apps.contract.records import GOLD_KEY_COLUMNS
from spark_apps.storage.tables import LIVE_TABLE_PROPERTIES, ensure_delta_table
from spark_apps.validation.schemas import GOLD_TABLE_SCHEMA

LOG = logging.getLogger("orders_streaming_app.io")


# Gold has two writers by design: the app's MERGE per micro-batch and a reprocess repair. Delta's
# optimistic concurrency makes the later commit fail when both touched the same files; both write
# absolute totals, so re-running the MERGE against the new snapshot is correct.
GOLD_WRITE_ATTEMPTS = 5
GOLD_WRITE_BACKOFF_S = 0.5


def retry_concurrent_gold_write(
    write: Callable[[], object],
    what: str,
    sleep: Callable[[float], None] = time.sleep,
    conflicts: tuple[type[BaseException], ...] | None = None,
) -> None:
    """Run `write` (an idempotent gold MERGE); on a Delta write-write conflict run it again, up to
    GOLD_WRITE_ATTEMPTS times. Schema or protocol changes are not retried: they need a person.

    `conflicts`: the writer's conflict errors; None means Spark's Delta (delta-rs raises its own).
    """
    if conflicts is None:
        from delta.exceptions.base import (
            ConcurrentAppendException,
            ConcurrentDeleteDeleteException,
            ConcurrentDeleteReadException,
        )

        conflicts = (
            ConcurrentAppendException,
            ConcurrentDeleteReadException,
            ConcurrentDeleteDeleteException,
        )
    for attempt in range(1, GOLD_WRITE_ATTEMPTS + 1):
        try:
            write()
            return
        except conflicts as error:
            if attempt == GOLD_WRITE_ATTEMPTS:
                raise
            LOG.warning(
                "%s conflicted with another gold writer (attempt %d): %s; retrying", what, attempt, error
            )
            sleep(GOLD_WRITE_BACKOFF_S * attempt)


def ensure_gold_table(spark: SparkSession, table_path: str) -> None:
    """Create the (empty) gold table once, before the first batch: no existence check per batch.
    Partitioned by the hour of its windows (`contract.gold_layout`); an existing table keeps its layout."""
    ensure_delta_table(
        spark, table_path, GOLD_TABLE_SCHEMA, GOLD_HOUR_COLUMN, properties=LIVE_TABLE_PROPERTIES
    )


def with_window_hour(windows: DataFrame) -> DataFrame:
    """Gold rows with their layout column: the UTC hour of window_start (`gold_layout.window_hour`)."""
    return windows.withColumn(GOLD_HOUR_COLUMN, F.date_format("window_start", SPARK_HOUR_PATTERN))


def partitioned_by_hour(table: Any) -> bool:
    """Whether a gold table (delta.tables.DeltaTable) is in the hourly layout; a table created before
    it has no `window_hour` column and keeps its writers' old MERGE. Reads the snapshot's schema only."""
    return GOLD_HOUR_COLUMN in table.toDF().columns


def merge_gold(
    updates: DataFrame,
    table_path: str,
    first_window: Any = None,
    last_window: Any = None,
    before_commit: Callable[[], None] | None = None,
    stamp: CommitStamp | None = None,
) -> None:
    """Upsert window rows into the existing gold table on (location_id, order_type, window_start).

    Rows carry each window's full current totals, so a MERGE of the same batch twice is a no-op.
    `first_window`/`last_window` (window starts as aware datetimes, both or neither) bound the batch:
    the range predicate lets Delta skip every gold file outside it instead of scanning the whole
    table, and in the hourly layout every hour's files outside it.
    `before_commit` runs before every attempt (the streaming app's lease check); what it raises
    aborts the MERGE. With a `stamp`, the commit records the driver's lease epoch through Delta's
    idempotent DML (`spark.databricks.delta.write.txnAppId`/`txnVersion`): Delta skips the MERGE when
    the table records a newer epoch, checked in the commit; `before_commit` runs again after it to
    report the moved lease.
    """
    from delta.tables import DeltaTable

    condition = _gold_key_match("updates")
    if first_window is not None and last_window is not None:
        condition = condition & F.col("gold.window_start").between(F.lit(first_window), F.lit(last_window))

    spark = updates.sparkSession
    if partitioned_by_hour(DeltaTable.forPath(spark, table_path)):
        updates = with_window_hour(updates)
        if first_window is not None and last_window is not None:
            # A literal range on the partition column: Delta reads and rewrites only those hours' files.
            hours = F.col(f"gold.{GOLD_HOUR_COLUMN}")
            condition = condition & hours.between(
                F.lit(window_hour(first_window)), F.lit(window_hour(last_window))
            )

    def attempt() -> None:
        if before_commit is not None:
            before_commit()
        with _idempotent_dml(spark, stamp):
            (
                DeltaTable.forPath(spark, table_path)
                .alias("gold")
                .merge(updates.alias("updates"), condition)
                .whenMatchedUpdateAll()
                .whenNotMatchedInsertAll()
                .execute()
            )
        if stamp is not None and before_commit is not None:
            # Delta skips a stale MERGE silently; a newer epoch exists only if the lease moved, which
            # the check reports before this driver writes anything after gold.
            before_commit()

    retry_concurrent_gold_write(attempt, "gold MERGE")


_TXN_APP_ID_CONF = "spark.databricks.delta.write.txnAppId"
_TXN_VERSION_CONF = "spark.databricks.delta.write.txnVersion"


@contextmanager
def _idempotent_dml(spark: SparkSession, stamp: CommitStamp | None) -> Generator[None]:
    """Delta DML in this block carries `stamp` as its application transaction (none without one).

    Session settings, so they are set for the MERGE alone and removed after it; the other Delta
    writes that may run meanwhile (the bronze append) set their transaction as writer options,
    which Delta prefers over these."""
    if stamp is None:
        yield
        return
    spark.conf.set(_TXN_APP_ID_CONF, GOLD_COMMIT_APP_ID)
    spark.conf.set(_TXN_VERSION_CONF, str(stamp.version))
    try:
        yield
    finally:
        spark.conf.unset(_TXN_APP_ID_CONF)
        spark.conf.unset(_TXN_VERSION_CONF)


def _gold_key_match(source_alias: str) -> Column:
    """gold.<key> = <source>.<key> for every gold key column."""
    condition = F.lit(True)
    for column in GOLD_KEY_COLUMNS:
        condition = condition & (F.col(f"gold.{column}") == F.col(f"{source_alias}.{column}"))
    return condition


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
        ensure_gold_table(spark, table_path)
    if partitioned_by_hour(DeltaTable.forPath(spark, table_path)):
        recomputed = with_window_hour(recomputed)
    # A string literal cast to TIMESTAMP is read in the session time zone (UTC), as before; a
    # Python datetime literal would be converted with the driver process's local zone instead.
    in_range = (F.col("gold.window_start") >= F.lit(range_start.isoformat()).cast("timestamp")) & (
        F.col("gold.window_end") <= F.lit(range_end.isoformat()).cast("timestamp")
    )
    if location_ids:
        in_range = in_range & F.col("gold.location_id").isin([str(location) for location in location_ids])
    retry_concurrent_gold_write(
        lambda: (
            DeltaTable.forPath(spark, table_path)
            .alias("gold")
            .merge(recomputed.alias("fixed"), _gold_key_match("fixed"))
            .whenMatchedUpdateAll()
            .whenNotMatchedInsertAll()
            .whenNotMatchedBySourceDelete(condition=in_range)
            .execute()
        ),
        "gold repair",
    )


def gold_frame(spark: SparkSession, table_path: str) -> DataFrame:
    """One deployment's gold table (windowed revenue) as a Spark DataFrame (a batch read)."""
    return spark.read.format("delta").load(table_path)
