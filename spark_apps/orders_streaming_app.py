"""The orders revenue streaming app: Kafka orders in, exact windowed revenue out.

One streaming query per deployment (spark_apps.engine.micro_batch): each micro-batch reads the orders topic
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
revenue topic) is preceded by a lease check (`contract.fencing.LeaseFence`), so a driver whose
deployment was handed to a successor fails its batch before committing anything more.

Run: spark-submit spark_apps/orders_streaming_app.py --config include/config/streaming_app.yaml \
        --set deployment_id=blue --set trigger.mode=available_now
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from spark_apps.contract import fault_points
from spark_apps.contract.config import AppConfigError, StreamingAppConfig, load_config, with_kafka_security
from spark_apps.contract.driver_exit import DRIVER_CRASHED, DRIVER_REFUSED, DRIVER_SUPERSEDED
from spark_apps.contract.fencing import LeaseFence, LeaseRejectedError, verify_lease, write_driver_status
from spark_apps.contract.kafka_cluster import KafkaClusterCheckError, KafkaClusterUnreachableError
from spark_apps.contract.kafka_security import KafkaClientSecurity, KafkaSecurityError
from spark_apps.contract.topic_ownership import TopicOwnershipError, verify_topic_ownership
from spark_apps.engine.checkpoints import CheckpointMigrationError
from spark_apps.engine.observability import last_executed_batch, query_failure
from spark_apps.engine.queries import PreparedQueries, prepare_queries
from spark_apps.engine.session import BATCH_CACHE_CONF, DELTA_CONF, LOCAL_FILES_CONF, build_spark_session
from spark_apps.engine.stopping import is_stop_refusal
from spark_apps.storage.tables import delta_rs_storage_options

LOG = logging.getLogger("orders_streaming_app")


CODEGEN_CACHE_ENTRIES = 1000
# The engine MERGEs a local relation of a few hundred window totals into gold. Delta copies a MERGE
# source first unless told otherwise, in case reading it twice gives other rows; a local relation
# cannot, and the copy and the shuffle before the write were a fifth of the MERGE's time for such a
# source (0.94 -> 0.82 s median; bench/results/history.md, "the one-query engine", its former name).
LOCAL_SOURCE_MERGE_CONF = {
    "spark.databricks.delta.merge.materializeSource": "none",
    "spark.databricks.delta.merge.repartitionBeforeWrite.enabled": "false",
}


def build_session(config: StreamingAppConfig) -> SparkSession:
    """The app's SparkSession; master and jars come from spark-submit (or the caller's builder)."""
    return build_spark_session(
        config.names.spark_app_name,
        extra_conf={
            **DELTA_CONF,
            "spark.sql.shuffle.partitions": str(config.shuffle_partitions),
            # A batch's writes (bronze, the Kafka side outputs, gold) run side by side in threads
            # of the driver: FAIR shares the executors among their jobs instead of queueing the
            # small ones behind the largest.
            "spark.scheduler.mode": "FAIR",
            **BATCH_CACHE_CONF,
            # Checkpoint files and Delta's log without a chmod and readlink process each: ~67 per live
            # batch on a local lake; wal + commit of a batch 49-68 -> 3 ms (bench/results/history.md,
            # "Stop 66").
            **LOCAL_FILES_CONF,
            # Spark keeps the last 100 generated classes (default). A batch pair runs ~130 distinct
            # ones, plus a few per batch whose code holds the batch's literals (batch ids, the
            # watermark, gold's window range), so the stable ones were evicted and compiled again
            # every batch, and the JIT compiled them again too: 934 compilations in a 75 s live run,
            # 305 with a 5,000-entry cache (bench/results/history.md, "live batches, the JIT and Spark's code
            # cache"). A static conf: set before the session.
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


class _DriverLoop:
    """The driver's watch over one deployment's queries: starts them one after the other (a replay's
    history query to its end, then the Kafka one), writes the heartbeat, checks the lease, and stops
    the queries between micro-batches when asked to (SIGTERM) or superseded."""

    def __init__(
        self,
        config: StreamingAppConfig,
        prepared: PreparedQueries,
        fence: LeaseFence,
        started_at: datetime,
        side_file_options: dict[str, str],
        stop_requested: threading.Event | None = None,
    ) -> None:
        self.config = config
        self.prepared = prepared
        self.registry_root = fence.registry_root
        self.registry_storage_options = fence.storage_options
        # Where the heartbeat goes: the lake's object store (its delta-rs options) or a local disk.
        self.side_file_options = side_file_options
        self.started_at = started_at
        self.queries: list[StreamingQuery] = []
        self.ready: set[str] = set()
        # Shared with the batches (`prepare_queries`): once set, none starts (`engine.stopping`).
        self.stop_requested = stop_requested or threading.Event()
        self.superseded: LeaseRejectedError | None = None
        # Side steps that failed last time they ran (`_unless_unreachable`): logged once per outage.
        self.unreachable: set[str] = set()

    def start_next(self) -> None:
        self.queries.append(self.prepared.starters[len(self.queries)]())
        LOG.info("deployment %s started query %s", self.config.deployment_id, self.queries[-1].name)

    def request_stop(self, signum: int, _frame: Any) -> None:
        # Only a flag: stopping a query from a signal handler would cut a batch in half. The watch
        # stops an idle query; a busy one ends when its next batch refuses to start.
        LOG.info("signal %s: stopping queries after their current micro-batch", signum)
        self.stop_requested.set()

    def watch(self) -> None:
        """Until the queries end, one fails, or a stop is requested and they have stopped."""
        next_heartbeat = 0.0
        next_lease_check = time.monotonic() + LEASE_CHECK_INTERVAL_S
        while self._keep_watching():
            if self.stop_requested.is_set():
                self._stop_idle_queries()
            now = time.monotonic()
            # Until every query is ready, check each turn: the first "ready" heartbeat is what a
            # deploy waits for, so an app that fails on its first trigger is reported as failed.
            due = now >= next_heartbeat or len(self.ready) < self.prepared.ready_after
            if due and self._unless_unreachable("write its heartbeat", self.write_status):
                next_heartbeat = now + HEARTBEAT_INTERVAL_S
            if self.config.lease_token is not None and now >= next_lease_check:
                next_lease_check = now + LEASE_CHECK_INTERVAL_S
                self._unless_unreachable("read its lease", self._check_lease)
            time.sleep(0.5)

    def _unless_unreachable(self, what: str, step: Callable[[], None]) -> bool:
        """Run a side step of the watch (heartbeat, lease check); when the lake cannot be reached
        (an object store restarting, a full disk) say so once per outage and go on: the next turn tries
        again. The queries decide whether the app survives an outage (a batch that cannot write fails
        its query); a heartbeat must not end an app its batches would carry through, and the lease is
        also checked in every gold commit."""
        try:
            step()
        except Exception as error:  # pyarrow's OSError, delta-rs's errors: whatever the store says
            if what not in self.unreachable:
                LOG.warning(
                    "deployment %s could not %s, trying again: %s", self.config.deployment_id, what, error
                )
            self.unreachable.add(what)
            return False
        if what in self.unreachable:
            self.unreachable.discard(what)
            LOG.info("deployment %s can %s again", self.config.deployment_id, what)
        return True

    def _failures(self) -> list[Any]:
        """The queries' errors, but for the refusal of a batch that began after a stop was asked for."""
        errors = [q.exception() for q in self.queries if q.exception() is not None]
        if self.stop_requested.is_set():
            return [error for error in errors if not is_stop_refusal(error)]
        return errors

    def _keep_watching(self) -> bool:
        if any(q.exception() is not None for q in self.queries):
            # A query failed (or refused a batch once the stop was asked for): stop the other too,
            # so the supervisor restarts both.
            return False
        if not any(q.isActive for q in self.queries):
            if len(self.queries) == len(self.prepared.starters) or self.stop_requested.is_set():
                return False
            self.start_next()  # the previous phase of a bounded run has ended
        return True

    def _stop_idle_queries(self) -> None:
        for query in self.queries:
            if query.isActive and not query.status.get("isTriggerActive", False):
                query.stop()

    def _check_lease(self) -> None:
        if self.config.lease_token is None:
            return
        try:
            verify_lease(
                self.registry_root,
                self.config.deployment_id,
                self.config.lease_token,
                self.registry_storage_options,
            )
        except LeaseRejectedError as error:
            LOG.error("%s", error)
            self.superseded = error
            self.stop_requested.set()

    def write_status(self, running: bool = True) -> None:
        states = _query_states(self.queries, self.ready)
        ready = running and len(self.ready) >= self.prepared.ready_after
        write_driver_status(
            self.config.names, self.config.lease_token, self.started_at, states, ready, self.side_file_options
        )

    def stop_queries(self, session: SparkSession) -> None:
        """Stop what still runs, let the listener publish each query's last progress, close clients."""
        for query in self.queries:
            if query.isActive:
                query.stop()
        # A stopped query's last progress event may never reach the listener: do not hold a stop for it.
        publish_timeout_s = 5.0 if self.stop_requested.is_set() else 30.0
        publisher = self.prepared.publisher
        for query in self.queries:
            # The newest batch that ran: an idle query's last progress names one that never will.
            executed = last_executed_batch(query.recentProgress)
            if executed is not None:
                publisher.wait_until_published(query.name, executed, publish_timeout_s)
        session.streams.removeListener(publisher)
        publisher.close()
        self.prepared.close_clients()

    def raise_outcome(self, fence: LeaseFence) -> None:
        """Raise what ended the run, if it did not simply end."""
        failures = self._failures()
        if fence.rejected is not None:
            # A batch refused to commit: the lease moved to another driver. Not a crash to restart from.
            raise fence.rejected
        if failures:
            raise RuntimeError(f"streaming query failed: {query_failure(str(failures[0]))}")
        if self.superseded is not None:
            raise self.superseded


def _set_merge_conf(session: SparkSession) -> dict[str, str | None]:
    """Set LOCAL_SOURCE_MERGE_CONF on `session`; returns what it replaced, for `_restore_conf`."""
    before = {key: session.conf.get(key, None) for key in LOCAL_SOURCE_MERGE_CONF}
    for key, value in LOCAL_SOURCE_MERGE_CONF.items():
        session.conf.set(key, value)
    return before


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
    merge_conf_before = _set_merge_conf(session)
    registry_root = config.registry_root or config.lake_root
    started_at = datetime.now(UTC)
    fence = fence or LeaseFence(
        registry_root,
        config.deployment_id,
        config.lease_token,
        delta_rs_storage_options(registry_root, session),
    )
    stop_requested = threading.Event()
    try:
        prepared = prepare_queries(session, config, fence, stop_requested)
    except BaseException:
        _restore_conf(session, merge_conf_before)  # a caller's session must not keep them
        raise
    side_file_options = delta_rs_storage_options(config.names.progress_dir, session)
    loop = _DriverLoop(config, prepared, fence, started_at, side_file_options, stop_requested)
    loop.start_next()
    if spark is None:  # only the spark-submit entry point owns the process's signals
        signal.signal(signal.SIGTERM, loop.request_stop)
    try:
        loop.watch()
    finally:
        loop.stop_queries(session)
        _restore_conf(session, merge_conf_before)
        loop.write_status(running=False)
        if spark is None:
            # The app owns its session: stop it here, in order, rather than leave it to the JVM's
            # shutdown hooks, which close the RocksDB state stores while their maintenance may still
            # run. That is the suspect of a driver holding 20M order ids dying of std::bad_alloc at
            # exit after its last batch had committed (bench/results/history.md, "std::bad_alloc").
            session.stop()
            LOG.info("Spark session stopped")
    loop.raise_outcome(fence)


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
        return DRIVER_REFUSED
    try:
        fault_points.armed_point()
    except fault_points.FaultPointError as error:
        print(f"ERROR: {error}", file=sys.stderr)
        return DRIVER_REFUSED
    registry_root = config.registry_root or config.lake_root
    registry_options = delta_rs_storage_options(registry_root)
    if config.lease_token is not None:
        # Before any Spark work: a fenced-off driver must not even start its queries.
        try:
            verify_lease(registry_root, config.deployment_id, config.lease_token, registry_options)
        except LeaseRejectedError as error:
            print(f"ERROR: {error}", file=sys.stderr)
            return DRIVER_SUPERSEDED
        LOG.info("lease %s of deployment %s verified", config.lease_token, config.deployment_id)
    try:
        # Whoever launched it (a DAG, `--set`, a hand-edited file): its outputs never land in a topic
        # some deployment reads or another one writes.
        verify_topic_ownership(registry_root, config, registry_options)
    except TopicOwnershipError as error:
        print(f"ERROR: {error}", file=sys.stderr)
        return DRIVER_REFUSED
    try:
        run(config)
    except LeaseRejectedError as error:
        print(f"ERROR: superseded: {error}", file=sys.stderr)
        return DRIVER_SUPERSEDED
    except KafkaClusterUnreachableError as error:
        # No broker answered in time: a restart may find them back.
        print(f"ERROR: {error}", file=sys.stderr)
        return DRIVER_CRASHED
    except (KafkaClusterCheckError, CheckpointMigrationError) as error:
        # Refused before any query read a checkpoint (another Kafka cluster's, a retired engine's):
        # the message is the whole story, not a stack trace, and a restart would refuse again.
        print(f"ERROR: {error}", file=sys.stderr)
        return DRIVER_REFUSED
    return 0


if __name__ == "__main__":
    sys.exit(main())
