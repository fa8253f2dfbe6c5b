"""The orders revenue streaming app: Kafka orders in, exact windowed revenue out.

One streaming query per deployment (spark_apps.one_query): each micro-batch reads the orders topic
once, validates every record once, appends it to the bronze Delta archive with its typed fields
(idempotent per batch), sends dead letters (with a reason) and valid orders (split by type) to
Kafka, deduplicates by orderId and counts each order into its event-time windows, enriches them with
the latest store address, MERGEs the window totals into gold and publishes them to the compacted
revenue topic keyed location|type|window_start. A replay from another deployment's bronze reads
that history first, by a query of its own in bounded batches. Bad data never stops the app: it is
routed, counted and kept.

The two-query engine (an ingest query, then a revenue query streaming from bronze) is retired: a
deployment whose checkpoints it wrote is refused with the way out, a blue-green replay into a new
deployment (docs/streaming-app.md).

Fencing: every write of a batch (bronze, Kafka side outputs, each gold MERGE attempt, the
revenue topic) is preceded by a lease check (`fencing.LeaseFence`), so a driver whose
deployment was handed to a successor fails its batch before committing anything more.

Run: spark-submit spark_apps/orders_streaming_app.py --config include/config/streaming_app.yaml \
        --set deployment_id=blue --set trigger.mode=available_now
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from spark_apps import fault_points, io
from spark_apps.config import AppConfigError, StreamingAppConfig, load_config, with_kafka_security
from spark_apps.dedupe import initial_repeat_state, with_repeats
from spark_apps.fencing import LeaseFence, LeaseRejectedError, verify_lease, write_driver_status
from spark_apps.kafka_security import KafkaClientSecurity, KafkaSecurityError
from spark_apps.naming import HISTORY_QUERY_ROLE as HISTORY_QUERY
from spark_apps.naming import REVENUE_QUERY_ROLE as REVENUE_QUERY
from spark_apps.observability import (
    INGEST_METRICS,
    BatchCounters,
    ProgressPublisher,
    query_failure,
)
from spark_apps.one_query import LIVE_AFTER_HISTORY_BATCH_BASE, OneQueryBatch
from spark_apps.session import DELTA_CONF, build_spark_session
from spark_apps.topic_ownership import TopicOwnershipError, verify_topic_ownership
from spark_apps.transformations import (
    parse_and_validate_orders,
)

LOG = logging.getLogger("orders_streaming_app")
# Checkpoints of designs this app replaced, which it cannot continue: the two-query engine's ingest
# query and the two-Kafka-reader design's archive query.
RETIRED_TWO_QUERY_CHECKPOINT = "ingest"
RETIRED_ARCHIVE_QUERY = "archive"


class CheckpointMigrationError(RuntimeError):
    """The deployment's checkpoints were written by a retired design (the two-query engine or the
    two-Kafka-reader design before it)."""


def _trigger(config: StreamingAppConfig) -> dict[str, Any]:
    if config.trigger.mode == "available_now":
        return {"availableNow": True}
    return {"processingTime": config.trigger.interval}


def _path_exists(spark: SparkSession, path: str) -> bool:
    """Whether `path` exists on its file system (local or object store), through Hadoop's FS API."""
    jvm_path = spark._jvm.org.apache.hadoop.fs.Path(path)  # type: ignore[union-attr]
    return bool(jvm_path.getFileSystem(spark._jsc.hadoopConfiguration()).exists(jvm_path))


# The checkpoint of the app's query (its name has the revenue role: the control plane reads its
# progress where it read the two-query engine's revenue query's).
ONE_QUERY_CHECKPOINT = "pipeline"
# The checkpoint of the query that reads a replay's history from bronze before that one starts.
HISTORY_CHECKPOINT = "history"


def _has_committed(spark: SparkSession, checkpoint: str) -> bool:
    """Whether the query of `checkpoint` committed a batch (its `commits` folder lists one)."""
    jvm_path = spark._jvm.org.apache.hadoop.fs.Path(f"{checkpoint}/commits")  # type: ignore[union-attr]
    fs = jvm_path.getFileSystem(spark._jsc.hadoopConfiguration())
    return bool(fs.exists(jvm_path)) and any(
        not status.getPath().getName().startswith(".") for status in fs.listStatus(jvm_path)
    )


# The dedupe operator's state variables before its ids were kept in buckets (one value per order id,
# a timer each). Spark starts the bucketed operator on such a checkpoint without complaint and with
# none of the old ids, so a copy re-sent across the upgrade would count twice: it is refused instead.
RETIRED_DEDUPE_STATE_VARIABLES = frozenset({"last_arrival_ms"})


def _dedupe_state_variables(spark: SparkSession, checkpoint: str) -> set[str]:
    """The state variables named by the oldest operator metadata the query of `checkpoint` kept (its
    stateful operator's `state/0/_metadata/v2/<batch>`); empty when it has none."""
    folder = spark._jvm.org.apache.hadoop.fs.Path(f"{checkpoint}/state/0/_metadata/v2")  # type: ignore[union-attr]
    fs = folder.getFileSystem(spark._jsc.hadoopConfiguration())
    if not fs.exists(folder):
        return set()
    batches = [s.getPath() for s in fs.listStatus(folder) if s.getPath().getName().isdigit()]
    if not batches:
        return set()
    oldest = min(batches, key=lambda path: int(path.getName()))
    stream = fs.open(oldest)
    try:
        text = spark._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")  # type: ignore[union-attr]
    finally:
        stream.close()
    # Line 1 is the format's version ("v2"), line 2 the operator's metadata as JSON.
    metadata = json.loads(text.splitlines()[1])
    properties = json.loads(metadata.get("operatorPropertiesJson") or "{}")
    return {variable["stateName"] for variable in properties.get("stateVariables", [])}


def refuse_retired_checkpoints(spark: SparkSession, config: StreamingAppConfig) -> None:
    """A deployment started by an earlier design cannot continue from its checkpoints: the two-query
    engine's (`ingest`: its offsets, its revenue query's Spark state and bronze's `superseded` marks
    mean nothing to this engine), the two-Kafka-reader design's before it (`archive`), and this
    engine's before its dedupe moved into Spark's state store (a query that committed batches
    without a `state` folder: Spark cannot add a stateful operator to a running query, and the ids
    it remembered lived in a driver that is gone), and one whose dedupe state is keyed by order id
    (`RETIRED_DEDUPE_STATE_VARIABLES`). A config that still names `engine: two_queries` is refused
    the same way."""
    names = config.names
    retired = [
        f"{names.checkpoint(query)} exists"
        for query in (RETIRED_TWO_QUERY_CHECKPOINT, RETIRED_ARCHIVE_QUERY)
        if _path_exists(spark, names.checkpoint(query))
    ]
    retired += [
        f"{names.checkpoint(query)} committed batches without a dedupe state"
        for query in (ONE_QUERY_CHECKPOINT, HISTORY_CHECKPOINT)
        if _has_committed(spark, names.checkpoint(query))
        and not _path_exists(spark, f"{names.checkpoint(query)}/state")
    ]
    retired += [
        f"{names.checkpoint(query)} keeps its dedupe state by order id, before it was bucketed"
        for query in (ONE_QUERY_CHECKPOINT, HISTORY_CHECKPOINT)
        if _dedupe_state_variables(spark, names.checkpoint(query)) & RETIRED_DEDUPE_STATE_VARIABLES
    ]
    if config.engine == "two_queries" or retired:
        found = f" ({retired[0]})" if retired else " (its config says engine: two_queries)"
        raise CheckpointMigrationError(
            f"deployment {config.deployment_id} was started by a retired engine{found}; this version "
            "cannot continue it. Roll it out as a new deployment with the blue_green_replay DAG (a "
            "replay from earliest offsets or from its bronze archive) and retire the old one; see "
            "docs/streaming-app.md."
        )


@dataclass
class PreparedQueries:
    """What `prepare_queries` made ready: a starter per query, in the order they run (each once the one
    before has ended); the listener; what closes the clients they hold (the stores table, the revenue
    topic's producer); and how many queries must have got through their first trigger for the driver
    to report ready (a replay's history query may run for hours before the Kafka query starts)."""

    starters: list[Callable[[], StreamingQuery]]
    publisher: ProgressPublisher
    close_clients: Callable[[], None]
    ready_after: int = 0

    def __post_init__(self) -> None:
        self.ready_after = self.ready_after or len(self.starters)


def prepare_queries(spark: SparkSession, config: StreamingAppConfig, fence: LeaseFence) -> PreparedQueries:
    """Make one deployment ready to run: its listener, its tables, and a starter per query, each
    batch writing behind `fence`: its query; for a replay from bronze, first a query that reads the
    history in bounded batches to its end, then the query that reads Kafka from the cut-over."""
    names = config.names
    refuse_retired_checkpoints(spark, config)
    counters = BatchCounters()
    stores = io.StoresTable(config)
    history_first = config.history is not None
    live = OneQueryBatch(
        config, fence, counters, stores, batch_base=LIVE_AFTER_HISTORY_BATCH_BASE if history_first else 0
    )
    history = (
        OneQueryBatch(config, fence, counters, stores, revenue_topic=live.revenue_topic)
        if history_first
        else None
    )
    publisher = ProgressPublisher(
        names.progress_dir,
        counters,
        names.consumer_group,
        io.kafka_admin_config(config),
        query=names.query_name(REVENUE_QUERY),
        batch_facts=live.batch_facts,
        history_query=names.query_name(HISTORY_QUERY) if history else None,
        history_facts=history.batch_facts if history else None,
    )
    spark.streams.addListener(publisher)
    # Both tables exist before the query starts: no batch has to ask whether they exist.
    io.ensure_bronze_table(spark, names.bronze_orders_table)
    io.ensure_gold_table(spark, names.gold_revenue_table)

    def validated(raw: DataFrame, initial_dedupe: DataFrame | None = None) -> DataFrame:
        # Counted by a streaming observation (reported with the query's progress): no extra job.
        checked = parse_and_validate_orders(raw, config.order_rules()).observe(
            INGEST_METRICS, F.count(F.lit(1)).alias("records"), F.count("dlq_reason").alias("dead_letters")
        )
        return with_repeats(
            checked, config.dedupe.horizon_seconds, config.window.delay_seconds, initial_dedupe
        )

    def start_one_query() -> StreamingQuery:
        # After a replay's history, a new Kafka query starts from the order ids the history saw within
        # the horizon: a copy re-sent across the cut-over is a repeat like any other.
        initial_dedupe = None
        if history_first and not _has_committed(spark, names.checkpoint(ONE_QUERY_CHECKPOINT)):
            initial_dedupe = initial_repeat_state(
                io.read_bronze(spark, names.bronze_orders_table), config.dedupe.horizon_seconds
            )
        writer = (
            validated(io.read_orders_stream(spark, config), initial_dedupe)
            .writeStream.queryName(names.query_name(REVENUE_QUERY))
            .foreachBatch(live)
            .option("checkpointLocation", names.checkpoint(ONE_QUERY_CHECKPOINT))
            .trigger(**_trigger(config))
        )
        return writer.start()

    def close_clients() -> None:
        stores.close()
        live.revenue_topic.close()

    if history is None:
        return PreparedQueries([start_one_query], publisher, close_clients)

    def start_history() -> StreamingQuery:
        writer = (
            validated(io.read_replay_history_stream(spark, config))
            .writeStream.queryName(names.query_name(HISTORY_QUERY))
            .foreachBatch(history)
            .option("checkpointLocation", names.checkpoint(HISTORY_CHECKPOINT))
            # To its end, then it stops and the Kafka query starts (a restart finds it ended).
            .trigger(availableNow=True)
        )
        return writer.start()

    return PreparedQueries([start_history, start_one_query], publisher, close_clients, ready_after=1)


CODEGEN_CACHE_ENTRIES = 1000
# The one-query engine MERGEs a local relation of a few hundred window totals into gold. Delta
# copies a MERGE source first unless told otherwise, in case reading it twice gives other rows; a
# local relation cannot, and the copy and the shuffle before the write were a fifth of the MERGE's
# time for such a source (0.94 -> 0.82 s median, docs/performance.md, stop 18).
ONE_QUERY_MERGE_CONF = {
    "spark.databricks.delta.merge.materializeSource": "none",
    "spark.databricks.delta.merge.repartitionBeforeWrite.enabled": "false",
}


def build_session(config: StreamingAppConfig) -> SparkSession:
    """The app's SparkSession; master and jars come from spark-submit (or the caller's builder)."""
    return build_spark_session(
        f"orders-revenue-{config.deployment_id}",
        extra_conf={
            **DELTA_CONF,
            "spark.sql.shuffle.partitions": str(config.shuffle_partitions),
            # A batch's writes (bronze, the Kafka side outputs, gold) run side by side in threads
            # of the driver: FAIR shares the executors among their jobs instead of queueing the
            # small ones behind the largest.
            "spark.scheduler.mode": "FAIR",
            # The ingest batch is cached once and read by the bronze append and the Kafka write:
            # compressing the cache cost ~2.5 s per 500,000 records (docs/performance.md, stop 15),
            # more than the memory it saves is worth for a batch that lives a few seconds.
            "spark.sql.inMemoryColumnarStorage.compressed": "false",
            # Spark keeps the last 100 generated classes (default). A batch pair runs ~130 distinct
            # ones, plus a few per batch whose code holds the batch's literals (batch ids, the
            # watermark, gold's window range), so the stable ones were evicted and compiled again
            # every batch, and the JIT compiled them again too: 934 compilations in a 75 s live run,
            # 305 with a 5,000-entry cache (docs/performance.md, stop 16). A static conf: set before
            # the session.
            "spark.sql.codegen.cache.maxEntries": str(CODEGEN_CACHE_ENTRIES),
        },
    )


HEARTBEAT_INTERVAL_S = 5.0
# Not a safety check (every write is fenced): it only makes an idle, superseded driver exit.
LEASE_CHECK_INTERVAL_S = 30.0


# Status messages of a query that got through a trigger (a first batch with data must complete).
_READY_MESSAGES = ("Waiting for next trigger", "Waiting for data to arrive")


def _query_states(queries: list[StreamingQuery], ready: set[str]) -> list[dict[str, Any]]:
    """State of each query; adds to `ready` the queries that got through their first trigger."""
    states = []
    for query in queries:
        status = query.status if query.isActive else {}
        message = status.get("message") or ""
        if query.isActive and (query.lastProgress is not None or message.startswith(_READY_MESSAGES)):
            ready.add(query.name)
        states.append(
            {
                "name": query.name,
                "active": query.isActive,
                "ready": query.name in ready,
                "trigger_active": bool(status.get("isTriggerActive", False)),
                "message": message,
            }
        )
    return states


def _restore_conf(session: SparkSession, before: dict[str, str | None]) -> None:
    for key, previous in before.items():
        if previous is None:
            session.conf.unset(key)
        else:
            session.conf.set(key, previous)


def run(
    config: StreamingAppConfig, spark: SparkSession | None = None, fence: LeaseFence | None = None
) -> None:
    """Run the app until its queries end (available_now), one fails, or it is told to stop (SIGTERM).

    `fence` checks the lease before each write (default: the config's token against its registry);
    a rejection stops the app with LeaseRejectedError.

    SIGTERM is a graceful stop: each query is stopped only while no micro-batch is running, so the
    batch in flight finishes and commits first. Whoever sent it forces a kill after its own timeout.
    """
    session = spark or build_session(config)
    session.conf.set("spark.sql.shuffle.partitions", str(config.shuffle_partitions))
    clamped = config.skew_clamp_reason()
    if clamped:
        LOG.warning("deployment %s: %s", config.deployment_id, clamped)
    # Restored when the run ends: a caller's session (tests share one) may MERGE other sources next.
    merge_conf_before = {key: session.conf.get(key, None) for key in ONE_QUERY_MERGE_CONF}
    for key, value in ONE_QUERY_MERGE_CONF.items():
        session.conf.set(key, value)
    names = config.names
    registry_root = config.registry_root or config.lake_root
    started_at = datetime.now(UTC)
    fence = fence or LeaseFence(registry_root, config.deployment_id, config.lease_token)
    try:
        prepared = prepare_queries(session, config, fence)
    except BaseException:
        _restore_conf(session, merge_conf_before)  # a caller's session must not keep them
        raise
    starters, publisher, close_clients = prepared.starters, prepared.publisher, prepared.close_clients
    # The queries run one after the other: a replay's history query to its end, then the Kafka one.
    queries: list[StreamingQuery] = []

    def start_next() -> None:
        queries.append(starters[len(queries)]())
        LOG.info("deployment %s started query %s", config.deployment_id, queries[-1].name)

    start_next()
    stop_requested = threading.Event()

    def request_stop(signum: int, _frame: Any) -> None:
        # Only a flag: stopping a query from a signal handler would cut a batch in half.
        LOG.info("signal %s: stopping queries after their current micro-batch", signum)
        stop_requested.set()

    if spark is None:  # only the spark-submit entry point owns the process's signals
        signal.signal(signal.SIGTERM, request_stop)
    superseded: LeaseRejectedError | None = None
    ready: set[str] = set()
    next_heartbeat = 0.0
    next_lease_check = time.monotonic() + LEASE_CHECK_INTERVAL_S
    try:
        while True:
            if any(q.exception() is not None for q in queries):
                break  # one query failed: stop the other too, so the supervisor restarts both
            if not any(q.isActive for q in queries):
                if len(queries) == len(starters) or stop_requested.is_set():
                    break
                start_next()  # the previous phase of a bounded run has ended
            if stop_requested.is_set():
                for query in queries:
                    if query.isActive and not query.status.get("isTriggerActive", False):
                        query.stop()
            now = time.monotonic()
            # Until every query is ready, check each turn: the first "ready" heartbeat is what a
            # deploy waits for, so an app that fails on its first trigger is reported as failed.
            if now >= next_heartbeat or len(ready) < prepared.ready_after:
                states = _query_states(queries, ready)
                write_driver_status(
                    names, config.lease_token, started_at, states, len(ready) >= prepared.ready_after
                )
                next_heartbeat = now + HEARTBEAT_INTERVAL_S
            if config.lease_token is not None and now >= next_lease_check:
                next_lease_check = now + LEASE_CHECK_INTERVAL_S
                try:
                    verify_lease(registry_root, config.deployment_id, config.lease_token)
                except LeaseRejectedError as error:
                    LOG.error("%s", error)
                    superseded = error
                    stop_requested.set()
            time.sleep(0.5)
    finally:
        for query in queries:
            if query.isActive:
                query.stop()
        # A stopped query's last progress event may never reach the listener: do not hold a stop for it.
        publish_timeout_s = 5.0 if stop_requested.is_set() else 30.0
        for query in queries:
            if query.lastProgress:
                publisher.wait_until_published(query.name, query.lastProgress["batchId"], publish_timeout_s)
        session.streams.removeListener(publisher)
        publisher.close()
        close_clients()
        _restore_conf(session, merge_conf_before)
        write_driver_status(names, config.lease_token, started_at, _query_states(queries, ready), False)
    failures = [q.exception() for q in queries if q.exception() is not None]
    if fence.rejected is not None:
        # A batch refused to commit: the lease moved to another driver. Not a crash to restart from.
        raise fence.rejected
    if failures:
        raise RuntimeError(f"streaming query failed: {query_failure(str(failures[0]))}")
    if superseded is not None:
        raise superseded


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Orders revenue streaming app")
    parser.add_argument("--config", help="YAML config file (see include/config/streaming_app.yaml)")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override a config field, e.g. --set window.size='1 minute' (repeatable)",
    )
    parser.add_argument(
        "--lease-token",
        help="fencing token from the deployment registry; the app exits (status 3) unless it is current",
    )
    parser.add_argument("--registry-root", help="lake root of the deployment registry (default: lake_root)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # py4j logs every gateway round trip at INFO: ~40 KB/min of driver log while the app is idle.
    logging.getLogger("py4j").setLevel(logging.WARNING)
    try:
        config = load_config(args.config, args.overrides)
        if args.lease_token is not None or args.registry_root is not None:
            config = config.model_copy(
                update={
                    "lease_token": args.lease_token or config.lease_token,
                    "registry_root": args.registry_root or config.registry_root,
                }
            )
        # Credentials arrive in the environment from the launcher, never on the command line.
        config = with_kafka_security(config, KafkaClientSecurity.from_environment())
    except (AppConfigError, KafkaSecurityError) as error:
        print(f"ERROR: {error}", file=sys.stderr)
        return 2
    try:
        fault_points.armed_point()
    except fault_points.FaultPointError as error:
        print(f"ERROR: {error}", file=sys.stderr)
        return 2
    if config.lease_token is not None:
        # Before any Spark work: a fenced-off driver must not even start its queries.
        try:
            verify_lease(config.registry_root or config.lake_root, config.deployment_id, config.lease_token)
        except LeaseRejectedError as error:
            print(f"ERROR: {error}", file=sys.stderr)
            return 3
        LOG.info("lease %s of deployment %s verified", config.lease_token, config.deployment_id)
    try:
        # Whoever launched it (a DAG, `--set`, a hand-edited file): its outputs never land in a topic
        # some deployment reads or another one writes.
        verify_topic_ownership(config.registry_root or config.lake_root, config)
    except TopicOwnershipError as error:
        print(f"ERROR: {error}", file=sys.stderr)
        return 2
    try:
        run(config)
    except LeaseRejectedError as error:
        print(f"ERROR: superseded: {error}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
