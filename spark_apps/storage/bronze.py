"""The bronze table: each deployment's archive of every record it read with its validation outcome.

Each micro-batch is appended once (`BronzeAppender`): its commit records the batch id and metadata
(Delta's userMetadata), where a restarted driver finds them (`recorded_bronze_batch_metadata`,
`newest_bronze_batch`) and skips a batch bronze already holds.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from functools import lru_cache
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType, StructField, StructType

from spark_apps.contract.object_store import delta_rs_uri
from spark_apps.storage.tables import (
    LIVE_TABLE_PROPERTIES,
    delta_rs_storage_options,
    ensure_delta_table,
    local_table,
)
from spark_apps.validation.schemas import BRONZE_ORDER_COLUMNS, BRONZE_SCHEMA, KAFKA_RAW_COLUMNS

LOG = logging.getLogger("orders_streaming_app.bronze")


def read_bronze(spark: SparkSession, table_path: str) -> DataFrame:
    """A batch read of one deployment's bronze table (``BRONZE_SCHEMA``)."""
    return spark.read.format("delta").load(table_path)


def read_bronze_raw(spark: SparkSession, table_path: str) -> DataFrame:
    """The raw Kafka records archived in bronze (the columns of a Kafka read) and the ingest batch
    that archived each (the dedupe rule's first key)."""
    return read_bronze(spark, table_path).select(*KAFKA_RAW_COLUMNS, "ingest_batch_id")


def newest_archived_time(spark: SparkSession, table_path: str) -> datetime | None:
    """The Kafka timestamp of bronze's newest record (None: bronze holds none), from the statistics the
    Delta log keeps for each data file (delta-rs, in the driver): no data file is read. Spark's
    `max(timestamp)` read every data file of bronze instead, a cost that grew with every day the
    deployment archived (issue 57). Kafka timestamps are whole milliseconds, the precision Delta keeps
    them in, so the statistic is the exact maximum. Spark's aggregate is still used where the log cannot
    answer: a file without statistics, or a store delta-rs cannot reach from this driver."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    try:
        options = delta_rs_storage_options(table_path, spark)
        table = DeltaTable(delta_rs_uri(table_path), storage_options=options or None)
        files = pa.table(table.get_add_actions(flatten=True))
    except Exception as error:  # delta-rs cannot read this log (a store only Spark's settings reach)
        LOG.info("bronze's newest record by a scan: delta-rs cannot open %s (%s)", table_path, error)
        return _newest_by_scan(spark, table_path)
    if files.num_rows == 0:
        return None
    names = set(files.column_names)
    if not {"num_records", "max.timestamp", "null_count.timestamp"} <= names:
        return _newest_by_scan(spark, table_path)
    records, nulls = files.column("num_records"), files.column("null_count.timestamp")
    maxes = files.column("max.timestamp")
    # A file with records but neither a maximum nor only nulls has no statistics for the column.
    unknown = pc.and_(pc.is_null(maxes), pc.not_equal(pc.fill_null(nulls, -1), pc.fill_null(records, 0)))
    if pc.any(pc.or_(unknown, pc.is_null(records))).as_py():
        return _newest_by_scan(spark, table_path)
    newest = pc.max(maxes).as_py()
    return None if newest is None else newest.astimezone(UTC)


def _newest_by_scan(spark: SparkSession, table_path: str) -> datetime | None:
    # Microseconds, not a datetime, cross from Spark: no local time zone can shift them.
    newest = read_bronze(spark, table_path).agg(F.unix_micros(F.max("timestamp")).alias("us")).first()
    micros = None if newest is None else newest["us"]
    return None if micros is None else datetime.fromtimestamp(micros / 1_000_000, UTC)


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
    fixed = _fixed_bronze_columns()
    superseded = fixed.never_superseded
    if not_counted is not None:
        superseded = fixed.valid & F.coalesce(not_counted, fixed.never_superseded)
    return validated.select(
        *fixed.leading,
        superseded.alias("superseded"),
        _batch_id_column(validated.sparkSession, ingest_batch_id).alias("ingest_batch_id"),
        fixed.ingest_date,
    )


@dataclass(frozen=True)
class _FixedBronzeColumns:
    leading: tuple[Column, ...]
    valid: Column
    never_superseded: Column
    ingest_date: Column


@lru_cache(maxsize=1)
def _fixed_bronze_columns() -> _FixedBronzeColumns:
    """What `bronze_rows` builds the same for every batch, built once (a Column is a py4j round trip;
    `revenue.counting._fixed_count_columns` does the same for the count)."""
    return _FixedBronzeColumns(
        leading=tuple(F.col(column) for column in (*KAFKA_RAW_COLUMNS, "dlq_reason", *BRONZE_ORDER_COLUMNS)),
        valid=F.col("dlq_reason").isNull(),
        never_superseded=F.lit(False),
        ingest_date=F.to_date("timestamp").alias("ingest_date"),
    )


def _batch_id_column(spark: SparkSession, batch_id: int | None) -> Column:
    """`batch_id` as a long column that Spark does not write into the code it generates.

    A long literal is part of the generated Java source, so a batch id that changes every batch made
    the bronze write compile its stage anew each batch and run it as a class the JIT had not seen.
    Here it is a scalar subquery of a one-row local table (no Spark job) holding a DECIMAL: its value
    reaches the generated code as a reference, and the class compiled for the first batch serves every later
    one (bench/results/history.md, "per-batch values out of generated code"; `revenue.counting.at_or_before`
    is the same for the watermark)."""
    if batch_id is None:
        return F.lit(None).cast("long")
    one = local_table(spark, [(Decimal(batch_id),)], _BATCH_ID_ROW)
    return one.scalar().cast("long")


_BATCH_ID_ROW = StructType([StructField("batch_id", DecimalType(20, 0), False)])


_POSITION = ("topic", "partition", "offset")

# Commits between two checkpoints of bronze's log (Delta's default is 10: a reader, a restart or the
# reprocess job, replays at most 99 small commits after the checkpoint).
BRONZE_CHECKPOINT_INTERVAL = 100
# Spark's Delta writes a checkpoint inside the append whose version is a multiple of the table's
# `delta.checkpointInterval`: inside a live batch, which then took 2.9-3.7 s instead of ~0.3-0.5 (it
# rebuilds the table's state in Spark jobs), and the next batch carried the 15,000-20,000 orders that
# waited; whenever it fell in the bench's measured minute it was most of that minute's p99
# (bench/results/history.md, "Stop 67"). So no append of bronze checkpoints (the interval is past
# any version a table reaches: a version is a multiple of it only at 0, which Delta never
# checkpoints), and the driver writes the checkpoint beside the batches (`BronzeLogCheckpoints`).
APPENDS_NEVER_CHECKPOINT = 2**31 - 1  # Delta's checkpointInterval is a Java int
BRONZE_TABLE_PROPERTIES = {
    "delta.checkpointInterval": str(APPENDS_NEVER_CHECKPOINT),
    **LIVE_TABLE_PROPERTIES,
}


def ensure_bronze_table(spark: SparkSession, table_path: str) -> bool:
    """Create the bronze table, or add the columns a table written by an earlier version lacks
    (an empty append with schema merging: no SQL text, no rewrite; old rows read them as null).
    True when this call created it: bronze then holds no batch (`BronzeAppender.holds_no_batch`)."""
    from delta.tables import DeltaTable

    created = not DeltaTable.isDeltaTable(spark, table_path)
    ensure_delta_table(
        spark,
        table_path,
        BRONZE_SCHEMA,
        "ingest_date",
        properties=BRONZE_TABLE_PROPERTIES,
    )
    existing = set(DeltaTable.forPath(spark, table_path).toDF().columns)
    if not set(BRONZE_SCHEMA.fieldNames()) <= existing:
        (
            spark.createDataFrame([], BRONZE_SCHEMA)
            .write.format("delta")
            .mode("append")
            .option("mergeSchema", "true")
            .save(table_path)
        )
    return created


class BronzeAppender:
    """Appends each micro-batch to one bronze table once, even when a batch is run again.

    Once-only was Delta's txnAppId/txnVersion before. Delta 4.4 answers that lookup only
    after rebuilding the table's whole snapshot state (three Spark jobs per append, their cost growing with
    bronze's file count): a 30,000-row append took 1.6-2.0 s warm that way against 0.5-0.9 s plain, and a
    live 5,000/s batch's bronze step ~2.5 s against ~1.2 s (bench/results/history.md, "bronze's append
    without Delta's idempotent-append lookup"). Here the appender knows which batch bronze holds last: the
    one it appended itself; after a start or a failed batch (`forget`) it reads the newest batch id recorded
    by bronze's latest commits, once, and skips every batch up to it. That
    read is a Spark job (Delta's history, ~0.5 s cold): a restart's resume makes it for both
    (`recorded_before`), and a driver that has just created bronze makes none (`holds_no_batch`).

    What this gives up: Delta refused an idempotent append whose batch a concurrent writer committed
    first; a plain append is never refused. Two drivers of one deployment appending one batch at once
    (a stalled old driver woken between its lease check and its append, while its successor appends
    that batch) can archive it twice. Gold and the revenue topic are fenced in their commits and stay
    exact; readers of bronze count an order once by the dedupe rule, so a doubled archive row is a
    repeat there, never a second count."""

    _UNKNOWN = object()

    def __init__(self, table_path: str, log_checkpoints: BronzeLogCheckpoints | None = None) -> None:
        """`log_checkpoints`: who checkpoints bronze's log once enough appends committed (the app's
        driver); none for an appender that only appends a few batches (tests)."""
        self.table_path = table_path
        self.log_checkpoints = log_checkpoints
        self._holds_through: object | int | None = self._UNKNOWN

    def holds_no_batch(self) -> None:
        """Bronze is known to hold no batch (this driver just created it): the first append need not
        read bronze's commits (a Spark job of ~0.5 s in a new deployment's first batch)."""
        self._holds_through = None

    def forget(self) -> None:
        """Read what bronze holds again before the next append (after a failed or redone batch)."""
        self._holds_through = self._UNKNOWN

    def recorded_before(self, spark: SparkSession, batch_id: int) -> dict[str, Any] | None:
        """What `recorded_bronze_batch_metadata` returns, from one read of bronze's latest commits that
        also tells the next `append` which batch bronze holds: a restart reads them once, not twice."""
        recent = _recent_bronze_batches(spark, self.table_path)
        self._holds_through = _newest_batch(recent)
        return _newest_before(recent, batch_id)

    def append(self, rows: DataFrame, batch_id: int, metadata: dict[str, Any] | None = None) -> bool:
        """Append `rows` as batch `batch_id` unless bronze holds it already; True when appended.

        `metadata` (JSON, with `batch_id` added) is recorded with the commit (Delta's userMetadata),
        where `recorded_bronze_batch_metadata` finds it."""
        if self._holds_through is self._UNKNOWN:
            self._holds_through = newest_bronze_batch(rows.sparkSession, self.table_path)
        holds = self._holds_through
        if isinstance(holds, int) and batch_id <= holds:
            return False
        recorded = {**(metadata or {}), "batch_id": batch_id}
        (
            rows.write.format("delta")
            .mode("append")
            .partitionBy("ingest_date")
            .option("userMetadata", json.dumps(recorded, sort_keys=True))
            .save(self.table_path)
        )
        self._holds_through = batch_id
        if self.log_checkpoints is not None:
            self.log_checkpoints.appended(rows.sparkSession)
        return True

    def close(self, timeout_s: float = 60.0) -> None:
        """Let a log checkpoint in progress end (a stopping driver's last act on bronze)."""
        if self.log_checkpoints is not None:
            self.log_checkpoints.wait(timeout_s)


class BronzeLogCheckpoints:
    """Checkpoints bronze's Delta log beside the batches: once every `every` appends of this driver
    (and at its first, so a driver that restarts often still checkpoints), a thread of its own writes
    the checkpoint of the table's newest version with delta-rs, in this process, and drops the log
    entries older than the table's log retention (`storage.tables.LIVE_TABLE_PROPERTIES`), as Spark's
    checkpoint did. No batch waits for it: appends go on meanwhile (a checkpoint is of one version and
    commits nothing), and an append that finds the previous checkpoint still being written leaves
    the next one to a later append. A failed checkpoint is logged and tried again at the next append;
    bronze stays readable either way (readers replay more commits until one is written), as with
    Delta's own post-commit checkpoint, whose failure does not fail the commit either."""

    def __init__(self, table_path: str, every: int = BRONZE_CHECKPOINT_INTERVAL) -> None:
        if every < 1:
            raise ValueError(f"checkpoint every {every} appends: must be at least 1")
        self.table_path = table_path
        self.every = every
        self._since_last = every - 1  # the first append checkpoints
        self._thread: threading.Thread | None = None
        self.written: list[int] = []  # the versions this driver checkpointed (logs and tests)

    def appended(self, spark: SparkSession) -> None:
        """One more append committed: start a checkpoint when one is due and none is being written."""
        self._since_last += 1
        if self._since_last < self.every or (self._thread is not None and self._thread.is_alive()):
            return
        self._since_last = 0
        options = delta_rs_storage_options(self.table_path, spark)
        self._thread = threading.Thread(
            target=self._checkpoint, args=(options,), name="bronze-log-checkpoint", daemon=True
        )
        self._thread.start()

    def wait(self, timeout_s: float) -> None:
        """Until the checkpoint being written (if any) is, at most `timeout_s`."""
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _checkpoint(self, storage_options: dict[str, str]) -> None:
        from deltalake import DeltaTable

        started = time.perf_counter()
        try:
            table = DeltaTable(delta_rs_uri(self.table_path), storage_options=storage_options or None)
            table.create_checkpoint()
            table.cleanup_metadata()
        except Exception as error:  # delta-rs's errors, an unreachable store: the next append retries
            self._since_last = self.every - 1
            LOG.warning(
                "bronze %s: log checkpoint failed, the next append tries again: %s", self.table_path, error
            )
            return
        version = table.version()
        self.written.append(version)
        LOG.info(
            "bronze: log checkpoint at version %d in %d ms, beside the batches",
            version,
            round((time.perf_counter() - started) * 1000),
        )


# How many of bronze's latest commits are looked through for the batches they recorded. The app's own
# appends are its only commits, one per batch, so the batch before a restart is one of the last two.
_RECENT_BRONZE_COMMITS = 20


def _recent_bronze_batches(spark: SparkSession, table_path: str) -> list[dict[str, Any]]:
    """The metadata recorded by bronze's latest commits that name a batch (`BronzeAppender.append`).
    Reads only the newest commits of the log, never the data."""
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, table_path):
        return []
    recent = DeltaTable.forPath(spark, table_path).history(_RECENT_BRONZE_COMMITS).select("userMetadata")
    return recorded_batches([row["userMetadata"] for row in recent.collect()])


def recorded_batches(user_metadata: list[str | None]) -> list[dict[str, Any]]:
    """Of commits' userMetadata texts, the JSON objects that name an integer `batch_id`."""
    found = []
    for text in user_metadata:
        try:
            metadata = json.loads(text or "null")
        except ValueError:
            continue
        if isinstance(metadata, dict) and isinstance(metadata.get("batch_id"), int):
            found.append(metadata)
    return found


def newest_bronze_batch(spark: SparkSession, table_path: str) -> int | None:
    """The newest batch id among bronze's latest commits; None when none records one."""
    return _newest_batch(_recent_bronze_batches(spark, table_path))


def recorded_bronze_batch_metadata(
    spark: SparkSession, table_path: str, before_batch: int
) -> dict[str, Any] | None:
    """The metadata recorded by the bronze append of the newest batch before `before_batch`
    (`BronzeAppender.append`), if it is among bronze's latest commits; None otherwise (no such
    commit, or one written without it). Reads only the newest commits of the log, never the data."""
    return _newest_before(_recent_bronze_batches(spark, table_path), before_batch)


def _newest_batch(recorded: list[dict[str, Any]]) -> int | None:
    return max((int(m["batch_id"]) for m in recorded), default=None)


def _newest_before(recorded: list[dict[str, Any]], before_batch: int) -> dict[str, Any] | None:
    earlier = [m for m in recorded if m["batch_id"] < before_batch]
    return max(earlier, key=lambda m: int(m["batch_id"]), default=None)
