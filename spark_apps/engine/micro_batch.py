"""The app's engine, one micro-batch at a time: each micro-batch reads Kafka once and commits bronze,
the side outputs and gold before the next one starts (`engine: micro_batch`).

The retired two-query engine (ingest, then revenue streaming from bronze) made a record wait for two
pipeline stages, each with its own trigger and batch; live latency was about four batch times
(bench/results/history.md, "one query per batch, measured as a prototype"). Here a record waits for one.
Per-order state (which copies are repeats, `spark_apps.revenue.dedupe`) lives in Spark's state store,
before the batch reaches foreachBatch; revenue state (the watermark and the open windows' totals,
O(windows)) lives in the driver (`spark_apps.revenue.state`). One job validates the batch, dedupes it and
counts it on the executors (`spark_apps.revenue.counting`: the driver receives the changed windows'
totals, never an order; a cache keeps the rows for the writes), then three writes run side by side:
bronze, the Kafka side outputs, and gold followed by the revenue topic. Gold's MERGE of a few hundred
window rows is made by the driver itself (delta-rs, ~30 ms) when the table is on this machine's filesystem
or on the lake's object store (with put-if-absent commits), and by Spark's Delta otherwise (~10 small
jobs; bench/results/history.md, "Why the gold step fell").

Exactly once, per batch N. Its writes, in any order or overlap:
  - bronze append, once per batch (`storage.bronze.BronzeAppender`: skipped when bronze's commits
    already record the batch), whose `superseded` column marks every valid order the stream did not
    count (a repeat or late), and whose commit records the batch id and the watermark after it;
  - dead letters and split-topic orders (at least once);
  - the revenue topic (the changed windows' absolute totals, compacted by window key), then the
    gold MERGE of the same totals (rewriting them is a no-op). The topic goes first because it is
    what a reader of fresh revenue waits for; a crash between the two leaves the topic one batch
    ahead of gold, and the redone batch writes the same totals to both.
Once all have ended, Spark commits the batch's offsets and the dedupe state. After a crash anywhere,
Spark runs batch N again from the dedupe state after N - 1 (so the same copies are repeats), and
the engine resumes the revenue state after N - 1 (`MicroBatchPipeline.resume`): the watermark batch
N - 1's bronze commit recorded and the open windows' totals from gold. When gold already
holds batch N's MERGE, the batch is redone without adding to those totals; when only the revenue
topic got them, the redone batch counts N on top of gold's totals after N - 1, which are the same
totals again. So the bronze append is skipped (already committed) or made with the same verdicts,
and gold and the revenue topic get the same totals.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Generator
from contextlib import contextmanager
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from pyspark import InheritableThread
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType, LongType, StringType, StructField, StructType

from spark_apps.contract import fault_points
from spark_apps.contract.config import StreamingAppConfig
from spark_apps.contract.config_rules import interval_seconds
from spark_apps.contract.fencing import LeaseFence, LeaseRejectedError
from spark_apps.contract.records import (
    DEAD_LETTERS_OF_KIND,
    MONEY_SCALE,
    REVENUE_PRECISION,
    STORE_ADDRESS_COLUMNS,
    DlqReason,
)
from spark_apps.engine.observability import BatchCounters
from spark_apps.engine.resume import RedoWindows, iso_us, resume_revenue_state
from spark_apps.engine.stopping import refuse_if_stopping
from spark_apps.revenue.counting import count_batch, not_counted
from spark_apps.revenue.state import MICROS_PER_SECOND, RevenueState, WindowSpec
from spark_apps.revenue.stores import enrich_with_stores
from spark_apps.storage.bronze import BronzeAppender, BronzeLogCheckpoints, bronze_rows
from spark_apps.storage.gold import merge_gold
from spark_apps.storage.gold_from_driver import gold_writable_from_driver, merge_gold_from_driver
from spark_apps.storage.kafka import write_to_kafka
from spark_apps.storage.revenue_topic import ProducerFencedError, RevenueTopicWriter
from spark_apps.storage.stores import StoresTable
from spark_apps.storage.tables import delta_rs_storage_options, local_table
from spark_apps.validation.routing import side_output_records

LOG = logging.getLogger("orders_streaming_app.micro_batch")

_WINDOW_ROWS_SCHEMA = StructType(
    [
        StructField("location_id", StringType()),
        StructField("order_type", StringType()),
        StructField("window_start_us", LongType()),
        StructField("window_end_us", LongType()),
        StructField("order_count", LongType(), False),
        StructField("revenue", DecimalType(REVENUE_PRECISION, MONEY_SCALE)),
    ]
)
# How many batches' watermarks the listener may still ask for (it runs behind the batches).
_KEEP_BATCH_FACTS = 64
# The engine's first batch id of the Kafka query that follows a replay's history query (whose batches
# are 0, 1, ...): far above any history's batch count, and with room for 2^31 more below 2^32, the
# bound of a batch in a gold commit stamp (`fencing.CommitStamp`).
LIVE_AFTER_HISTORY_BATCH_BASE = 1 << 30


def window_spec(config: StreamingAppConfig) -> WindowSpec:
    size = interval_seconds(config.window.size) * MICROS_PER_SECOND
    slide = interval_seconds(config.window.slide) * MICROS_PER_SECOND if config.window.slide else size
    return WindowSpec(size, slide)


class MicroBatchPipeline:
    """foreachBatch of the engine: each micro-batch counted, then written to bronze, the side outputs,
    gold and the revenue topic, exactly once (see the module docstring). Not thread-safe: Spark calls
    it from the query's thread, one batch at a time; `batch_facts` may be read from the listener's."""

    def __init__(
        self,
        config: StreamingAppConfig,
        fence: LeaseFence,
        counters: BatchCounters,
        stores: StoresTable,
        revenue_topic: RevenueTopicWriter | None = None,
        batch_base: int = 0,
        stop_requested: threading.Event | None = None,
    ) -> None:
        """`batch_base` is added to the query's batch ids: a replay's history is read by a query of
        its own first (batches 0, 1, ...), and the Kafka query after it counts on from
        `LIVE_AFTER_HISTORY_BATCH_BASE`, so the engine's batch ids (bronze's ingest batch, gold's
        batch and commit stamp) keep growing across the two. Once `stop_requested` is set, a batch
        refuses to start (`engine.stopping`)."""
        self.config = config
        self.stop_requested = stop_requested or threading.Event()
        self.batch_base = batch_base
        self.fence = fence
        self.counters = counters
        self.stores = stores
        self.windows = window_spec(config)
        self.delay_us = interval_seconds(config.window.watermark) * MICROS_PER_SECOND
        self._state: RevenueState | None = None
        # Set when the state was resumed after this batch's gold commit: the windows it wrote.
        self._redo_windows: list[tuple[str, str, int, int, int, int]] | None = None
        self._next_batch: int | None = None
        self._facts: dict[int, dict[str, Any]] = {}
        self._facts_lock = threading.Lock()
        self._gold_from_driver: bool | None = None
        self._gold_storage_options: dict[str, str] = {}
        bronze_table = config.names.bronze_orders_table
        # Bronze's log is checkpointed beside the batches, not inside an append (`BronzeLogCheckpoints`).
        self.bronze = BronzeAppender(bronze_table, BronzeLogCheckpoints(bronze_table))
        # Created with the driver, before its first batch: its producer fences every older driver's.
        self.revenue_topic = revenue_topic or RevenueTopicWriter(config)

    def batch_facts(self, query_batch_id: int) -> dict[str, Any]:
        """What the listener publishes for the query's batch `query_batch_id` beyond Spark's progress:
        the watermark after it (the event time up to which windows are final once it committed) and
        the late orders."""
        with self._facts_lock:
            return dict(self._facts.get(query_batch_id, {}))

    def __call__(self, validated: DataFrame, query_batch_id: int) -> None:
        batch_id = self.batch_base + query_batch_id
        refuse_if_stopping(self.stop_requested, batch_id)  # before it reads or writes anything
        validated.persist()
        try:
            self._run(validated, batch_id, query_batch_id)
            self._next_batch = batch_id + 1
        except BaseException:
            self._state = None  # half-applied: resume from bronze and gold before the next batch
            self.bronze.forget()  # and read which batch bronze holds again
            raise
        finally:
            validated.unpersist()

    def _state_for(self, spark: SparkSession, batch_id: int) -> RevenueState:
        if self._state is None or self._next_batch != batch_id:
            # Past batch 0 the resume also tells the appender which batch bronze holds; a failed
            # batch made it forget what it knew (`__call__`).
            self._state, self._redo_windows = self.resume(spark, batch_id)
        return self._state

    def resume(self, spark: SparkSession, batch_id: int) -> tuple[RevenueState, RedoWindows | None]:
        """The state after batch `batch_id` - 1 and, when gold already holds this batch's MERGE, the
        windows it wrote (`resume.resume_revenue_state`)."""
        return resume_revenue_state(
            spark, self.config.names, self.windows, self.delay_us, batch_id, self.bronze
        )

    def _run(self, validated: DataFrame, batch_id: int, query_batch_id: int) -> None:
        spark = validated.sparkSession
        started_us = time.time_ns() // 1000  # bounds the watermark (`RevenueState.apply`)
        steps = _Steps()
        with steps.timed("resume"):  # only after a restart: the state is in memory otherwise
            state = self._state_for(spark, batch_id)
            watermark_before = state.watermark_us
        with steps.timed("validate_and_count"):
            window = self.config.window
            counted = count_batch(
                validated.filter(F.col("dlq_reason").isNull()), watermark_before, window.size, window.slide
            )
        # The writes run side by side: each is mostly waiting (Delta's log, Kafka acks, small jobs),
        # and none needs another's result. Exactly once needs only that all of them end before the
        # batch does (Spark then commits its offsets); see the module docstring.
        writes = _Writes(steps)
        writes.start("side_outputs", lambda: self._write_side_outputs(validated))
        try:
            with steps.timed("state"):
                redo, self._redo_windows = self._redo_windows, None
                outcome = state.apply(counted, add_to_windows=redo is None, not_after_us=started_us)
                if redo is not None:
                    outcome.windows = redo  # gold's totals after this batch: written again, published
            watermark_after = outcome.watermark_us
            writes.start(
                "bronze",
                lambda: self._append_bronze(validated, batch_id, watermark_before, watermark_after),
            )
            where = {"windows": len(outcome.windows)}
            if outcome.windows:
                writes.start(
                    "gold", lambda: self._publish_windows(spark, outcome.windows, batch_id, where, steps)
                )
        except BaseException:
            writes.join()  # no write outlives a failed batch; the batch's own error is the one raised
            raise
        writes.wait()
        self.counters.add("windows_updated", len(outcome.windows))
        self.counters.add("orders_late", outcome.late)
        self.counters.add("orders_duplicate", outcome.duplicates)
        # Conflicting copies are repeats (in orders_duplicate) that went to the dead-letter topic: the
        # listener counts the validator's dead letters, the batch these.
        self.counters.add("dead_letters", counted.conflicting_copies)
        self.counters.add(DEAD_LETTERS_OF_KIND.format(DlqReason.CONFLICTING_COPY), counted.conflicting_copies)
        with self._facts_lock:
            self._facts[query_batch_id] = {
                "watermark": iso_us(outcome.watermark_us),
                "rows_dropped_by_watermark": outcome.late,
                # The state's size for operators (a metric): it grows with stores x open windows.
                "state_open_windows": state.open_windows,
                "batch_steps_ms": steps.elapsed_ms,
            }
            for old in [b for b in self._facts if b <= query_batch_id - _KEEP_BATCH_FACTS]:
                del self._facts[old]
        LOG.info(
            "batch %d: %d valid orders (%d late, %d duplicates of which %d conflicting copies), %d windows; "
            "ms per step %s",
            batch_id,
            counted.valid,
            outcome.late,
            outcome.duplicates,
            counted.conflicting_copies,
            len(outcome.windows),
            steps.elapsed_ms,
        )
        fault_points.reached("revenue.before_checkpoint_commit", batch_id, where)

    def _write_side_outputs(self, validated: DataFrame) -> None:
        kafka = self.config.kafka
        side_outputs = side_output_records(
            validated, kafka.dlq_topic, kafka.general_orders_topic, kafka.restaurant_orders_topic
        )
        self.fence.check("the dead-letter and split-topic write")
        write_to_kafka(side_outputs, self.config)

    def _append_bronze(
        self,
        validated: DataFrame,
        batch_id: int,
        watermark_before: int | None,
        watermark_us: int | None,
    ) -> None:
        self.fence.check("the bronze append")
        appended = self.bronze.append(
            # What the batch did not count (`count_batch`'s rule): repeats, and orders at or before
            # the watermark the batch started from.
            bronze_rows(validated, batch_id, not_counted(watermark_before)),
            batch_id,
            # What a restart resumes from (`resume`): the watermark after this batch.
            metadata={"watermark_us": watermark_us},
        )
        if not appended:
            LOG.info("batch %d: bronze already holds this batch; not appended again", batch_id)
        fault_points.reached("ingest.after_bronze_commit", batch_id)

    def _publish_windows(
        self,
        spark: SparkSession,
        windows: list[tuple[str, str, int, int, int, int]],
        batch_id: int,
        where: dict[str, Any],
        steps: _Steps,
    ) -> None:
        """The changed windows' totals to the revenue topic, then into gold (the batch's step "gold":
        its parts "revenue_topic" and "gold_merge")."""
        table = self.config.names.gold_revenue_table
        if self._gold_from_driver is None:
            self._gold_from_driver = self._driver_can_merge_gold(spark, table)
            LOG.info("gold MERGE by %s", "the driver (delta-rs)" if self._gold_from_driver else "Spark")
        stores = self.stores.current(spark)  # refreshes the addresses when the stores topic moved
        rows = _enriched_gold_rows(windows, self.stores.addresses, batch_id)

        # The revenue topic first, then gold: an order is visible as soon as its window's record is,
        # and the MERGE (~50-300 ms) no longer stands between the two. Both carry the windows'
        # absolute totals after this batch, so a crash between them leaves the topic one batch ahead
        # of gold until the redone batch writes the same totals to both (see the module docstring).
        self.fence.check("the revenue topic write")
        fault_points.reached("revenue.before_revenue_topic_write", batch_id, where)
        try:
            with steps.timed("revenue_topic"):
                self.revenue_topic.write(rows)
        except ProducerFencedError as error:
            raise self.fence.refused(error) from None
        fault_points.reached("revenue.after_revenue_topic_write", batch_id, where)

        def fence() -> None:
            self.fence.check("the gold MERGE")
            fault_points.reached("revenue.before_gold_commit", batch_id, where)

        stamp = self.fence.stamp(batch_id)
        try:
            with steps.timed("gold_merge"):
                if self._gold_from_driver:
                    merge_gold_from_driver(
                        rows, table, fence, stamp=stamp, storage_options=self._gold_storage_options
                    )
                else:
                    merge_gold(
                        self._gold_rows(spark, windows, batch_id, stores),
                        table,
                        _utc(min(w[2] for w in windows)),
                        _utc(max(w[2] for w in windows)),
                        before_commit=fence,
                        stamp=stamp,
                    )
        except LeaseRejectedError as error:
            raise self.fence.refused(error) from None
        fault_points.reached("revenue.after_gold_commit", batch_id, where)

    def _driver_can_merge_gold(self, spark: SparkSession, table: str) -> bool:
        """Whether this driver MERGEs gold itself (delta-rs); keeps the storage options it needs."""
        try:
            self._gold_storage_options = delta_rs_storage_options(table, spark)
        except ValueError as error:
            # A store reached otherwise than through the launcher's S3A settings and environment (an
            # instance role, core-site.xml): Spark knows how, delta-rs does not.
            LOG.warning("gold on %s stays with Spark's MERGE: delta-rs cannot reach it (%s)", table, error)
            return False
        return gold_writable_from_driver(table, self._gold_storage_options)

    def _gold_rows(
        self,
        spark: SparkSession,
        windows: list[tuple[str, str, int, int, int, int]],
        batch_id: int,
        stores: DataFrame,
    ) -> DataFrame:
        rows = [
            (location, kind, start, end, count, Decimal(cents).scaleb(-MONEY_SCALE))
            for location, kind, start, end, count, cents in windows
        ]
        totals = local_table(spark, rows, _WINDOW_ROWS_SCHEMA).select(
            "location_id",
            "order_type",
            # Micros, not datetimes, cross from Python: no time zone can shift them.
            F.timestamp_micros("window_start_us").alias("window_start"),
            F.timestamp_micros("window_end_us").alias("window_end"),
            "order_count",
            "revenue",
        )
        enriched = enrich_with_stores(totals, stores)
        return enriched.withColumn("batch_id", F.lit(batch_id).cast("long"))


class _Steps:
    """Wall time of each step of a batch, in ms (steps may overlap): published with the batch's
    progress, so an operator (and the bench) can see where a batch's time went."""

    def __init__(self) -> None:
        self.elapsed_ms: dict[str, int] = {}
        self._lock = threading.Lock()

    @contextmanager
    def timed(self, step: str) -> Generator[None, None, None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            with self._lock:
                self.elapsed_ms[step] = round((time.perf_counter() - started) * 1000)


class _Writes:
    """The batch's writes, each in a thread of its own (InheritableThread: Spark's local properties,
    such as the scheduler pool, carry over). `wait` joins all of them, then raises the first failure:
    no write is left running when a batch fails."""

    def __init__(self, steps: _Steps) -> None:
        self._steps = steps
        self._threads: list[InheritableThread] = []
        self._errors: list[BaseException] = []

    def start(self, step: str, write: Callable[[], None]) -> None:
        def run() -> None:
            try:
                with self._steps.timed(step):
                    write()
            except BaseException as error:  # re-raised by wait(), in the batch's own thread
                self._errors.append(error)

        thread = InheritableThread(target=run, name=f"batch-write-{step}")
        thread.start()
        self._threads.append(thread)

    def join(self) -> None:
        for thread in self._threads:
            thread.join()

    def wait(self) -> None:
        self.join()
        if self._errors:
            raise self._errors[0]


def _enriched_gold_rows(
    windows: list[tuple[str, str, int, int, int, int]],
    addresses: dict[str, tuple[str | None, ...]],
    batch_id: int,
) -> list[tuple[Any, ...]]:
    """The windows as gold rows (GOLD_SCHEMA's order) for the driver's MERGE: what `_gold_rows` plus
    `enrich_with_stores` give Spark's (an unknown store gets null address columns)."""
    unknown = (None,) * len(STORE_ADDRESS_COLUMNS)
    return [
        (
            location,
            kind,
            _utc(start),
            _utc(end),
            count,
            Decimal(cents).scaleb(-MONEY_SCALE),
            *addresses.get(location, unknown),
            batch_id,
        )
        for location, kind, start, end, count, cents in windows
    ]


def _utc(micros: int) -> datetime:
    """A window start as the MERGE's range bound: an aware datetime, which Spark reads as the same
    instant whatever the driver's local time zone (a naive one would be read in local time)."""
    return datetime.fromtimestamp(micros / MICROS_PER_SECOND, UTC)
