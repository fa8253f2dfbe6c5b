"""Progress the control plane can read, and offsets that Kafka's lag tools can see.

A StreamingQueryListener writes the app's latest progress (rates, batch duration, offsets
behind latest, DLQ and late counts, a heartbeat) as JSON under the deployment's progress
folder, and commits the end offsets reflected in gold to a consumer group named after the
deployment: Spark keeps offsets only in its checkpoint, so without this `kafka-consumer-groups
--describe` would show no lag at all.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.streaming.listener import JStreamingQueryListener, StreamingQueryListener

from spark_apps.contract.naming import query_progress_file
from spark_apps.contract.records import DEAD_LETTERS_OF_KIND, VALIDATOR_DLQ_REASON_KINDS
from spark_apps.contract.side_files import read_json, write_json
from spark_apps.engine.stopping import is_stop_refusal

LOG = logging.getLogger("orders_streaming_app.progress")

# Streaming observation (reported in each query's progress, computed by the batch's own jobs): the
# records and dead letters a batch read.
INGEST_METRICS = "ingest_totals"
READ_ALL_AT = "kafka_read_all_at"
"""Progress field: the latest moment every record Kafka held was read into gold, the start of the newest
batch that read up to Kafka's latest offsets or the newest idle report. Consumer lag in seconds is at most
the time since (`revenue_stream_consumer_lag_seconds`): every record not yet in gold arrived after it."""


def ingest_totals(dlq_reason: Column) -> list[Column]:
    """The `INGEST_METRICS` observation of validated records: all of them, the dead letters, and the dead
    letters of each reason kind (a dozen null-safe comparisons per record; valid ones are null)."""
    per_kind = [
        F.count(F.when(dlq_reason.startswith(f"{kind}:") | (dlq_reason == kind), 1)).alias(
            DEAD_LETTERS_OF_KIND.format(kind)
        )
        for kind in VALIDATOR_DLQ_REASON_KINDS
    ]
    return [F.count(F.lit(1)).alias("records"), F.count(dlq_reason).alias("dead_letters"), *per_kind]


def query_failure(error: str) -> str:
    """A failed query's error without the logical plan and JVM stack frames Spark adds to it: pages of
    them would push the cause out of the driver log's tail, which is what the control plane reports."""
    described = error.split("=== Streaming Query ===", 1)[0]
    lines = [line for line in described.splitlines() if not line.startswith(("\tat ", "\t... "))]
    return "\n".join(lines).strip()


class BatchCounters:
    """Per-deployment counters that foreachBatch functions add to (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._totals: dict[str, int] = {}

    def add(self, name: str, amount: int) -> None:
        with self._lock:
            self._totals[name] = self._totals.get(name, 0) + amount

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._totals)


def last_executed_batch(recent_progress: Sequence[Any]) -> int | None:
    """The id of the newest batch among `recent_progress` (a query's `recentProgress`: progress objects
    read like dicts, or dicts) that ran, or None.

    An idle query's `lastProgress` is not a batch's: every `noDataProgressEventInterval` Spark records
    a progress with the id of the batch it would run next and no `addBatch` step, and reports it to
    listeners as an idle event, never as a progress. Waiting for that id to be published waits for a
    batch that never ran (a graceful stop of an idle app waited out its whole timeout that way)."""
    for progress in reversed(recent_progress):
        if "addBatch" in (progress["durationMs"] or {}):
            return int(progress["batchId"])
    return None


def summarize_progress(progress: dict[str, Any], counters: dict[str, int]) -> dict[str, Any]:
    """The fields operators and the supervisor need, from one StreamingQueryProgress (as a dict)."""
    # One source per query: Kafka for the app's query, a Delta table for a replay's history query
    # (which has no Kafka offsets; ProgressPublisher says whether the history is still pending).
    source = (progress.get("sources") or [{}])[0]
    reads_kafka = str(source.get("description", "")).startswith("Kafka")
    metrics = source.get("metrics") or {}
    dropped_late = sum(
        int(op.get("numRowsDroppedByWatermark", 0)) for op in progress.get("stateOperators", [])
    )
    behind = metrics.get("maxOffsetsBehindLatest")
    return {
        "query_name": progress.get("name"),
        "run_id": progress.get("runId"),
        "batch_id": progress.get("batchId"),
        "batch_timestamp": progress.get("timestamp"),
        "heartbeat_at": datetime.now(UTC).isoformat(),
        "num_input_rows": progress.get("numInputRows"),
        "input_rows_per_second": progress.get("inputRowsPerSecond"),
        "processed_rows_per_second": progress.get("processedRowsPerSecond"),
        "batch_duration_ms": (progress.get("durationMs") or {}).get("triggerExecution"),
        "end_offsets": _parse_offsets(source.get("endOffset")) if reads_kafka else {},
        "max_offsets_behind_latest": int(behind) if behind not in (None, "") else None,
        "history_pending": False,
        "rows_dropped_by_watermark": dropped_late,
        "watermark": (progress.get("eventTime") or {}).get("watermark"),
        "counters": counters,
    }


def _parse_offsets(raw: Any) -> dict[str, dict[str, int]]:
    if raw in (None, ""):
        return {}
    offsets = json.loads(raw) if isinstance(raw, str) else raw
    return {topic: {str(p): int(o) for p, o in parts.items()} for topic, parts in offsets.items()}


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def _moment(document: dict[str, Any], field: str) -> datetime | None:
    """A UTC datetime from the ISO text (Spark's trailing Z too) in `document[field]`; None if absent."""
    value = document.get(field)
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def offsets_behind_latest(
    end_offsets: dict[str, dict[str, int]], latest_offsets: dict[str, dict[str, int]]
) -> int | None:
    """How many records the furthest-behind partition held past `end_offsets` when Kafka's latest
    offsets were `latest_offsets`; None while either is unknown, never a made-up 0."""
    if not end_offsets or not latest_offsets:
        return None
    return max(
        latest - end_offsets.get(topic, {}).get(partition, 0)
        for topic, partitions in latest_offsets.items()
        for partition, latest in partitions.items()
    )


def _latest_offsets(progress: dict[str, Any]) -> dict[str, dict[str, int]]:
    kafka = [s for s in progress.get("sources") or [] if str(s.get("description", "")).startswith("Kafka")]
    return _parse_offsets(kafka[0].get("latestOffset")) if kafka else {}


class JsonProgressListener(StreamingQueryListener):
    """A streaming query listener whose progress events cross from the JVM as Spark's JSON, handed to
    `on_progress` as a dict.

    PySpark's own bridge builds a Python object of every progress: a py4j call per field, per state
    operator metric and per source, and for each observed metric a lookup of `PythonSQLUtils` through py4j's
    imported packages (a failing class-loader search over Spark's ~300 jars each). On the listener thread
    that was 5 % of the driver JVM's CPU in a live run (bench/results/history.md, "The progress listener"),
    on a 2-core machine the batches share. Here a progress costs one call, `progress().json()`. The
    other events (started, idle, terminated: a few per query) go through PySpark's bridge as before."""

    def onQueryProgress(self, event: Any) -> None:
        """PySpark's callback (an event built by PySpark's bridge): its JSON to `on_progress`."""
        self.on_progress(json.loads(event.progress.json))

    def on_progress(self, progress: dict[str, Any]) -> None:
        """One batch's progress (`StreamingQueryProgress.json`, parsed)."""

    def onQueryStarted(self, event: Any) -> None:
        """A query started (PySpark's event)."""

    def onQueryTerminated(self, event: Any) -> None:
        """A query ended (PySpark's event)."""

    @property
    def _jlistener(self) -> Any:
        from pyspark import SparkContext

        if not hasattr(self, "_jlistenerobj"):
            jvm: Any = SparkContext._jvm
            self._jlistenerobj = jvm.PythonStreamingQueryListenerWrapper(_ProgressAsJson(self))
        return self._jlistenerobj


class _ProgressAsJson(JStreamingQueryListener):
    """PySpark's py4j bridge (`JStreamingQueryListener`), but a progress event crosses as its JSON."""

    def __init__(self, listener: JsonProgressListener) -> None:
        super().__init__(listener)
        self.listener = listener

    def onQueryProgress(self, jevent: Any) -> None:
        self.listener.on_progress(json.loads(jevent.progress().json()))


class ProgressPublisher(JsonProgressListener):
    """Publishes the progress of this app's query and commits the Kafka offsets reflected in gold.

    The query reads Kafka and commits gold in each micro-batch, and Spark reports a batch's progress
    after the batch committed: the end offsets of its Kafka source are the records gold reflects. The
    progress file carries them, with the lag behind Kafka's latest offsets as that batch saw them, and
    they are committed to the deployment's consumer group, so `kafka-consumer-groups` shows how far
    gold is behind.

    A replay from bronze first runs a history query to its end, and only then the Kafka query. The
    history's batches are published in the same file with `history_pending: true` (`_on_history`),
    the Kafka query's with false: every batch of it comes after the history ended. So the file says
    the history is pending until the Kafka query has committed a batch. Nothing of this needs to
    survive a restart: one in the middle of the history runs the history query again, which
    publishes again; one after it finds the history query ended and runs the Kafka query, whose first
    event says the history is done (its first batch, or an idle event if that batch had committed
    before the restart but went unpublished).
    """

    def __init__(
        self,
        progress_dir: str,
        counters: BatchCounters,
        consumer_group: str,
        kafka_config: dict[str, Any],
        query: str,
        batch_facts: Callable[[int], dict[str, Any]] | None = None,
        history_query: str | None = None,
        history_facts: Callable[[int], dict[str, Any]] | None = None,
        storage_options: Mapping[str, str] | None = None,
    ) -> None:
        self.progress_dir = progress_dir
        # delta-rs's options of the lake's object store (empty for a local lake): where the file goes.
        self.storage_options = dict(storage_options or {})
        self.counters = counters
        self.consumer_group = consumer_group
        self.kafka_config = kafka_config
        self.query = query
        # The query has no Spark watermark: its batches tell their own (`batch_facts`).
        self.batch_facts = batch_facts
        self.history_query = history_query
        self.history_facts = history_facts
        self._consumer: Any = None
        self._last_batch: dict[str, int] = {}
        self._seen = threading.Condition()
        # Listener events arrive on one thread, but wait_until_published reads from another.
        self._state_lock = threading.Lock()
        # What the query's newest batch published (or, after a restart, what the last run wrote).
        self._summary: dict[str, Any] | None = None
        self._committed_offsets: dict[str, dict[str, int]] = {}
        # Query id -> name (idle events carry only the id), and the query's latest idle event since
        # its last batch.
        self._query_names: dict[str, str] = {}
        self._idle_at: datetime | None = None
        self._engine_watermark: str | None = None
        # The latest moment the app had read every record Kafka held (`kafka_read_all_at`); a restart
        # goes on from the last run's, so the lag in seconds keeps growing across a slow restart.
        self._read_all_at: datetime | None = _moment((self._read_published() or {}), READ_ALL_AT)

    def _read_published(self) -> dict[str, Any] | None:
        return read_json(query_progress_file(self.progress_dir, self.query), self.storage_options)

    def _write_published(self, summary: dict[str, Any]) -> None:
        write_json(query_progress_file(self.progress_dir, self.query), summary, self.storage_options)

    def onQueryStarted(self, event: Any) -> None:
        LOG.info("query %s started (id %s, run %s)", event.name, event.id, event.runId)
        with self._state_lock:
            self._query_names[str(event.id)] = event.name

    def on_progress(self, progress: dict[str, Any]) -> None:
        try:
            with self._state_lock:
                self._query_names[str(progress.get("id"))] = str(progress.get("name"))
                if progress.get("name") == self.query:
                    self._on_batch(progress)
                elif self.history_query is not None and progress.get("name") == self.history_query:
                    self._on_history(progress)
        except Exception:  # a monitoring hiccup must never stop the pipeline
            LOG.exception("could not publish streaming progress")
        finally:
            with self._seen:
                self._last_batch[str(progress.get("name"))] = int(progress.get("batchId", -1))
                self._seen.notify_all()

    def _on_batch(self, progress: dict[str, Any]) -> None:
        """A committed batch of the Kafka query: publish where it left gold, and commit that position."""
        self._count_ingested(progress)
        self._idle_at = None  # it had records to read (or a watermark to move): caught up no more
        summary = summarize_progress(progress, self.counters.snapshot())
        summary["max_offsets_behind_latest"] = offsets_behind_latest(
            summary["end_offsets"], _latest_offsets(progress)
        )
        if summary["max_offsets_behind_latest"] == 0:
            # The batch read up to the offsets Kafka's latest were when its trigger started.
            self._read_all(_moment(summary, "batch_timestamp"))
        if self.batch_facts is not None:
            facts = self.batch_facts(int(progress["batchId"]))
            if facts.get("watermark") is not None:
                self._engine_watermark = facts["watermark"]
            # A listener far behind may find a batch's facts gone; the watermark never moves back.
            summary.update({**facts, "watermark": self._engine_watermark})
        self._summary = summary
        self._publish(commit=True)

    def _count_ingested(self, progress: dict[str, Any]) -> None:
        """Add a batch's records and dead letters (its `INGEST_METRICS` observation) to the counters."""
        totals = (progress.get("observedMetrics") or {}).get(INGEST_METRICS) or {}
        self.counters.add("records_archived", int(totals.get("records") or 0))
        self.counters.add("dead_letters", int(totals.get("dead_letters") or 0))
        for kind in VALIDATOR_DLQ_REASON_KINDS:
            name = DEAD_LETTERS_OF_KIND.format(kind)
            self.counters.add(name, int(totals.get(name) or 0))

    def _on_history(self, progress: dict[str, Any]) -> None:
        """A batch of the replay's history query: the file says the history is still being read, with
        the history's rates and the engine's watermark; no Kafka position or lag yet."""
        self._count_ingested(progress)
        summary = summarize_progress(progress, self.counters.snapshot())
        facts = self.history_facts(int(progress["batchId"])) if self.history_facts else {}
        if facts.get("watermark") is not None:
            self._engine_watermark = facts["watermark"]
        summary.update(
            {
                **facts,
                "query_name": self.query,
                "reading": "history",
                "watermark": self._engine_watermark,
                "end_offsets": {},
                "max_offsets_behind_latest": None,
                "history_pending": True,
            }
        )
        self._write_published(summary)

    def _publish(self, commit: bool) -> None:
        if self._summary is None:
            return
        summary = {
            **self._summary,
            "heartbeat_at": datetime.now(UTC).isoformat(),
            # The Kafka query runs only once a replay's history has ended (see the class docstring).
            "history_pending": False,
            "caught_up_at": _iso(self._idle_at),
            READ_ALL_AT: _iso(self._read_all_at),
            "counters": self.counters.snapshot(),
        }
        if self._idle_at is not None:
            # Idle: the query found nothing new in Kafka and its batches before have committed, so
            # nothing is behind, even right after a restart, before a batch has said where Kafka ends.
            summary["max_offsets_behind_latest"] = 0
        self._write_published(summary)
        # Offsets are committed on progress only, and only when they moved: a failing commit is not
        # retried every idle event, and a batch with no records asks nothing of Kafka.
        end_offsets = summary["end_offsets"]
        if commit and end_offsets and end_offsets != self._committed_offsets:
            self._commit(end_offsets)
            self._committed_offsets = end_offsets

    def _read_all(self, moment: datetime | None) -> None:
        """Every record Kafka held at `moment` is in gold (never moves back)."""
        if moment is not None and (self._read_all_at is None or moment > self._read_all_at):
            self._read_all_at = moment

    def wait_until_published(self, query_name: str, batch_id: int, timeout_s: float = 30.0) -> bool:
        """Block until progress of `batch_id` of `query_name` was handled (events arrive asynchronously)."""
        with self._seen:
            return self._seen.wait_for(lambda: self._last_batch.get(query_name, -1) >= batch_id, timeout_s)

    def onQueryIdle(self, event: Any) -> None:
        """Spark reports an idle query every `spark.sql.streaming.noDataProgressEventInterval` (10 s)
        instead of a progress: publish that the app has caught up.

        The query's trigger at the event's time found nothing new in Kafka, and its batches before had
        committed gold, so every record Kafka held then is in gold: that moment is `caught_up_at`. An
        idle stream's watermark stands still (it moves only with new records), so this is how the
        control plane knows that a quiet hour is over.
        """
        try:
            at = datetime.fromisoformat(str(event.timestamp).replace("Z", "+00:00"))
            with self._state_lock:
                if self._query_names.get(str(event.id)) != self.query:
                    return
                self._idle_at = at
                self._read_all(at)
                if self._summary is None:
                    # Restarted with nothing new to read: no batch has run, so publish on what the last
                    # run wrote (its watermark is the checkpoint's). That may be the history query's
                    # last batch (the Kafka query's first one committed but went unpublished): the
                    # history has ended since, so its marker goes.
                    self._summary = self._read_published()
                    if self._summary is not None:
                        self._summary.pop("reading", None)
                self._publish(commit=False)
        except Exception:  # a monitoring hiccup must never stop the pipeline
            LOG.exception("could not publish idleness")

    def onQueryTerminated(self, event: Any) -> None:
        if event.exception is not None and is_stop_refusal(event.exception):
            LOG.info("query %s stopped: its next batch did not start, the driver is stopping", event.id)
            return
        LOG.info(
            "query %s terminated (exception: %s)",
            event.id,
            None if event.exception is None else query_failure(event.exception),
        )

    def close(self) -> None:
        """Release the Kafka client used for offset commits."""
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def _commit(self, end_offsets: dict[str, dict[str, int]]) -> None:
        from confluent_kafka import Consumer, TopicPartition

        if self._consumer is None:
            self._consumer = Consumer(
                {**self.kafka_config, "group.id": self.consumer_group, "enable.auto.commit": False}
            )
        partitions = [
            TopicPartition(topic, int(partition), offset)
            for topic, parts in end_offsets.items()
            for partition, offset in parts.items()
        ]
        self._consumer.commit(offsets=partitions, asynchronous=False)
