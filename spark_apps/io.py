"""All reads and writes of the orders app: Kafka sources and sinks, Delta bronze and gold.

Business logic lives in spark_apps.transformations; this module only moves DataFrames
in and out. Exactly-once hinges on two writes here: the bronze append is made
idempotent per micro-batch with Delta's txnAppId/txnVersion, and the gold MERGE
upserts absolute window totals, so replaying a batch after a crash rewrites the same
values instead of adding them again.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Generator
from contextlib import contextmanager
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from spark_apps.config import StreamingAppConfig
from spark_apps.contract import ARRIVAL_ORDER, GOLD_KEY_COLUMNS
from spark_apps.fencing import GOLD_COMMIT_APP_ID, CommitStamp
from spark_apps.schemas import (
    BRONZE_ORDER_COLUMNS,
    BRONZE_SCHEMA,
    GOLD_SCHEMA,
    KAFKA_RAW_COLUMNS,
    STORE_SCHEMA,
)
from spark_apps.transformations import latest_stores

LOG = logging.getLogger("orders_streaming_app.io")


def _kafka_client_options(config: StreamingAppConfig) -> dict[str, str]:
    """Options of Spark's Kafka source/sink: servers, the config's own options, the connection's security."""
    options = {"kafka.bootstrap.servers": config.kafka.bootstrap_servers}
    options.update({f"kafka.{key}": value for key, value in config.kafka.options.items()})
    if config.kafka.security is not None:
        options.update(config.kafka.security.java_options())
    return options


def read_orders_stream(spark: SparkSession, config: StreamingAppConfig) -> DataFrame:
    """The `orders` topic as a stream of raw Kafka records (binary key/value plus position). With
    `config.history` (a replay from bronze) Kafka is read from the per-partition cut-over offsets on:
    the history before them is read by a query of its own first (`read_replay_history_stream`)."""
    reader = (
        spark.readStream.format("kafka")
        .options(**_kafka_client_options(config))
        .option("subscribe", config.kafka.orders_topic)
        # Silently skipping records lost to retention would make revenue wrong; stop and say so.
        .option("failOnDataLoss", "true")
        .option("includeHeaders", "false")
    )
    if config.history is not None:
        reader = reader.option("startingOffsets", history_cut_over_offsets(config))
    else:
        reader = reader.option("startingOffsets", config.kafka.starting_offsets)
        if config.kafka.starting_timestamp_ms is not None:
            reader = reader.option("startingTimestamp", str(config.kafka.starting_timestamp_ms))
    if config.kafka.max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(config.kafka.max_offsets_per_trigger))
    if config.kafka.min_partitions is not None:
        reader = reader.option("minPartitions", str(config.kafka.min_partitions))
    return reader.load().select(*KAFKA_RAW_COLUMNS)


def read_bronze(spark: SparkSession, table_path: str) -> DataFrame:
    """A batch read of one deployment's bronze table (``BRONZE_SCHEMA``)."""
    return spark.read.format("delta").load(table_path)


# A replay's history is read in micro-batches of at most `kafka.max_offsets_per_trigger` records (the
# same bound as a replay from Kafka's earliest offsets; this many when unset), in this many files
# each: the files of one batch are read in parallel.
DEFAULT_HISTORY_RECORDS_PER_BATCH = 500_000
HISTORY_FILES_PER_BATCH = 8


def history_records_per_file(config: StreamingAppConfig) -> int:
    per_batch = config.kafka.max_offsets_per_trigger or DEFAULT_HISTORY_RECORDS_PER_BATCH
    return max(1, -(-per_batch // HISTORY_FILES_PER_BATCH))


def read_replay_history_stream(spark: SparkSession, config: StreamingAppConfig) -> DataFrame:
    """The history of a replay from bronze (the archived records before the cut-over) as a stream of
    raw Kafka records in bounded micro-batches, in the order the archiving deployment received them:
    the copy's files hold consecutive stretches of that order (`materialize_replay_history`) and the
    Delta source admits them in the order of its log (read as changes from version 0, the copy's
    commit: a table's initial snapshot would be ordered by file time instead),
    `HISTORY_FILES_PER_BATCH` per batch. So a
    batch's memory does not grow with the history, and the watermark a batch moves never passes
    history still to come by more than the archiving stream's own batches did."""
    return (
        spark.readStream.format("delta")
        .option("startingVersion", "0")
        .option("maxFilesPerTrigger", str(HISTORY_FILES_PER_BATCH))
        .load(materialize_replay_history(spark, config))
        .select(*KAFKA_RAW_COLUMNS)
    )


def history_cut_over_offsets(config: StreamingAppConfig) -> str:
    """Spark startingOffsets JSON: Kafka is read from the first offset bronze does not hold."""
    assert config.history is not None
    offsets = {str(p): o for p, o in sorted(config.history.kafka_offsets.items())}
    return json.dumps({config.kafka.orders_topic: offsets})


def materialize_replay_history(spark: SparkSession, config: StreamingAppConfig) -> str:
    """Copy the history (bronze records before the cut-over) into this deployment's own frozen table.

    Read as a stream, the source bronze would keep growing while its deployment runs; a frozen copy
    lets the stream finish the history and report it done. The copy is one Delta commit made once:
    after a crash it either exists whole or is made again, and a restart reuses it. Its rows are
    range-partitioned and sorted by the archiving deployment's arrival order (`ARRIVAL_ORDER`) into
    files of at most `history_records_per_file` records, so the commit lists consecutive stretches of
    that order, in order (Delta records a write's files in the order of its tasks).
    """
    from delta.tables import DeltaTable

    assert config.history is not None
    target = config.names.replay_history_table
    if DeltaTable.isDeltaTable(spark, target):
        return target
    before_cut_over = F.lit(False)
    for partition, offset in config.history.kafka_offsets.items():
        if offset >= 0:
            before_cut_over = before_cut_over | (
                (F.col("partition") == partition) & (F.col("offset") < offset)
            )
    history = (
        spark.read.format("delta")
        .load(config.history.bronze_table)
        .where((F.col("topic") == config.kafka.orders_topic) & before_cut_over)
        .select(*KAFKA_RAW_COLUMNS, "ingest_batch_id")
    )
    per_file = history_records_per_file(config)
    files = max(1, -(-history.count() // per_file))
    order = [F.col(column).asc_nulls_last() for column in ARRIVAL_ORDER]
    (
        history.repartitionByRange(files, *order)
        .sortWithinPartitions(*order)
        .select(*KAFKA_RAW_COLUMNS)
        .write.format("delta")
        .mode("overwrite")
        .option("maxRecordsPerFile", str(per_file))
        .save(target)
    )
    return target


def read_stores_table(spark: SparkSession, config: StreamingAppConfig) -> DataFrame:
    """Latest store per locationId from the compacted `stores` topic (a bounded batch read)."""
    raw = (
        spark.read.format("kafka")
        .options(**_kafka_client_options(config))
        .option("subscribe", config.kafka.stores_topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
        .select(*KAFKA_RAW_COLUMNS)
    )
    return latest_stores(raw)


def read_orders_batch(
    spark: SparkSession, config: StreamingAppConfig, starting: str, ending: str
) -> DataFrame:
    """A bounded batch of raw `orders` records between explicit per-partition offsets (JSON)."""
    reader = (
        spark.read.format("kafka")
        .options(**_kafka_client_options(config))
        .option("subscribe", config.kafka.orders_topic)
        .option("startingOffsets", starting)
        .option("endingOffsets", ending)
        .option("failOnDataLoss", "true")
    )
    if config.kafka.min_partitions is not None:
        reader = reader.option("minPartitions", str(config.kafka.min_partitions))
    return reader.load().select(*KAFKA_RAW_COLUMNS)


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


def write_to_kafka(records: DataFrame, config: StreamingAppConfig, topic: str | None = None) -> None:
    """Batch-write Kafka sink columns (key, value[, headers]) to `topic` (at-least-once).

    Without `topic` each row names its own in a `topic` column (several topics, one job).
    """
    writer = records.write.format("kafka").options(**_kafka_client_options(config))
    if topic is not None:
        writer = writer.option("topic", topic)
    writer.save()


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


def ensure_delta_table(spark: SparkSession, table_path: str, schema: StructType, *partition_by: str) -> None:
    """Create an empty Delta table with `schema` unless one exists (a stream can only read a table)."""
    from delta.tables import DeltaTable

    builder = DeltaTable.createIfNotExists(spark).location(table_path).addColumns(schema)
    if partition_by:
        builder = builder.partitionedBy(*partition_by)
    builder.execute()


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
    """Create the (empty) gold table once, before the first batch: no existence check per batch."""
    ensure_delta_table(spark, table_path, GOLD_SCHEMA)


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
    `first_window`/`last_window` (window starts, both or neither) bound the batch: the range
    predicate lets Delta skip every gold file outside it instead of scanning the whole table.
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


def local_table_path(table_path: str) -> str | None:
    """The filesystem path of a table on this machine's filesystem, or None for any other store.

    A table path without a scheme, or with `file:`, is local; `s3a://`, `abfss://` and the like are
    not (their commits need the store's own coordination, which only Spark's Delta is set up for).
    """
    from urllib.parse import urlparse

    parsed = urlparse(table_path)
    if parsed.scheme == "":
        return table_path
    if parsed.scheme == "file":
        return parsed.path
    return None


# What the driver's writer (delta-rs) is known to write correctly: the protocol `ensure_gold_table`
# creates. A gold table someone upgraded (change data feed, deletion vectors, column mapping) keeps
# Spark's MERGE.
DRIVER_WRITABLE_PROTOCOL = (1, 2)


def gold_writable_from_driver(table_path: str) -> bool:
    """Whether the streaming app's driver may MERGE into this gold table itself
    (`merge_gold_from_driver`): a table on this machine's filesystem, in the plain protocol."""
    from deltalake import DeltaTable

    local = local_table_path(table_path)
    if local is None:
        return False
    protocol = DeltaTable(local).protocol()
    return (protocol.min_reader_version, protocol.min_writer_version) <= DRIVER_WRITABLE_PROTOCOL and not (
        protocol.writer_features or protocol.reader_features
    )


def merge_gold_from_driver(
    rows: list[tuple[Any, ...]],
    table_path: str,
    before_commit: Callable[[], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    stamp: CommitStamp | None = None,
) -> None:
    """`merge_gold` for a few hundred rows the driver holds, without Spark: delta-rs, in process.

    The same upsert on the gold key, with the same result, in ~30 ms instead of Spark's ~10 small
    jobs (0.8 s on a quiet machine, 2-3 s beside a live batch's other writes; docs/performance.md,
    stop 19). The commit is an ordinary Delta commit: Spark's readers and writers (reprocessing,
    repairs) see it, and a commit that conflicts with theirs is retried like Spark's. `rows` are in
    GOLD_SCHEMA's column order, timestamps as aware UTC datetimes, money as Decimal.

    With a `stamp`, the commit records the driver's lease epoch, and a table whose snapshot already
    records a newer one refuses it with LeaseRejectedError (`fencing.CommitStamp`).
    """
    import pyarrow as pa
    from deltalake import CommitProperties, DeltaTable, Transaction
    from deltalake.exceptions import CommitFailedError
    from pyspark.sql.pandas.types import to_arrow_schema

    local = local_table_path(table_path)
    if local is None:
        raise ValueError(f"{table_path} is not on this machine's filesystem: use merge_gold")
    schema = to_arrow_schema(GOLD_SCHEMA, timezone="UTC")
    updates = pa.Table.from_pylist([dict(zip(schema.names, row, strict=True)) for row in rows], schema)
    # Column names are fixed identifiers; no value of a row ever becomes predicate text.
    predicate = " AND ".join(f"gold.{column} = updates.{column}" for column in GOLD_KEY_COLUMNS)

    def attempt() -> None:
        if before_commit is not None:
            before_commit()
        table = DeltaTable(local)
        commit = None
        if stamp is not None:
            # Read from the snapshot the MERGE commits against: a newer lease's commit after it makes
            # this commit conflict, and the retry reads again.
            refusal = stamp.refusal(table.transaction_version(GOLD_COMMIT_APP_ID))
            if refusal is not None:
                raise refusal
            commit = CommitProperties(
                app_transactions=[Transaction(app_id=GOLD_COMMIT_APP_ID, version=stamp.version)]
            )
        (
            table.merge(
                updates, predicate, source_alias="updates", target_alias="gold", commit_properties=commit
            )
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )

    retry_concurrent_gold_write(attempt, "gold MERGE", sleep, conflicts=(CommitFailedError,))


def _gold_key_match(source_alias: str) -> Column:
    """gold.<key> = <source>.<key> for every gold key column."""
    condition = F.lit(True)
    for column in GOLD_KEY_COLUMNS:
        condition = condition & (F.col(f"gold.{column}") == F.col(f"{source_alias}.{column}"))
    return condition


def local_table(spark: SparkSession, rows: list[tuple[Any, ...]], schema: StructType) -> DataFrame:
    """`rows` as a local relation: a join broadcasts it from the driver without running a Spark job.

    (`createDataFrame` of a list of rows makes an RDD instead, which every batch's broadcast join
    would read again with a job of its own; from pandas it makes a local relation.)
    """
    import pandas as pd

    return spark.createDataFrame(pd.DataFrame.from_records(rows, columns=schema.fieldNames()), schema)


class StoresTable:
    """The latest store per locationId, re-read only when the `stores` topic's end offsets move.

    Stores change rarely; re-reading and re-aggregating the whole compacted topic every revenue
    batch was a Spark job per batch for nothing. A cheap watermark query (librdkafka, no Spark)
    tells whether anything was appended since the last read. The table is small (one row per
    location) and held as a local relation, so joining it costs no job of its own.
    """

    def __init__(self, config: StreamingAppConfig) -> None:
        self._config = config
        self._end_offsets: dict[int, int] | None = None
        self._table: DataFrame | None = None
        self._addresses: dict[str, tuple[str | None, ...]] = {}
        self._consumer: Any = None

    def current(self, spark: SparkSession) -> DataFrame:
        from confluent_kafka import KafkaException

        try:
            end_offsets: dict[int, int] | None = self._stores_end_offsets()
        except KafkaException as error:
            # A broker going away (a leader killed, a rolling restart) must not fail the batch: keep
            # the table already read, or read it with Spark's client (which waits for a new leader),
            # and ask again next batch with a new client.
            LOG.warning("could not check the stores topic's end offsets (%s); asking again next batch", error)
            self.close()
            end_offsets = None
            if self._table is not None:
                return self._table
        if self._table is None or end_offsets is None or end_offsets != self._end_offsets:
            rows = [tuple(row) for row in read_stores_table(spark, self._config).collect()]
            self._table = local_table(spark, rows, STORE_SCHEMA)
            self._addresses = {row[0]: row[1:] for row in rows}
            self._end_offsets = end_offsets
        return self._table

    @property
    def addresses(self) -> dict[str, tuple[str | None, ...]]:
        """The table `current` last returned, as location_id -> its address columns (in
        STORE_ADDRESS_COLUMNS' order)."""
        return self._addresses

    def _stores_end_offsets(self) -> dict[int, int]:
        from confluent_kafka import Consumer, TopicPartition

        if self._consumer is None:
            self._consumer = Consumer(
                {
                    **kafka_admin_config(self._config),
                    "group.id": "stores-watermarks",
                    "enable.auto.commit": False,
                }
            )
        topic = self._config.kafka.stores_topic
        metadata = self._consumer.list_topics(topic, timeout=10)
        partitions = sorted(metadata.topics[topic].partitions) if topic in metadata.topics else []
        return {
            p: self._consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in partitions
        }

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


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


def read_gold(spark: SparkSession, table_path: str) -> DataFrame:
    """The gold windowed-revenue table of one deployment."""
    return spark.read.format("delta").load(table_path)


def kafka_admin_config(config: StreamingAppConfig) -> dict[str, Any]:
    """librdkafka settings for side channels of the app (committing offsets to its consumer group).

    Only servers and security: `kafka.options` are the Java client's keys, which librdkafka rejects.
    """
    security = config.kafka.security.librdkafka_config() if config.kafka.security is not None else {}
    return {"bootstrap.servers": config.kafka.bootstrap_servers, **security}
