"""Progress the control plane can read, and offsets that Kafka's lag tools can see.

A StreamingQueryListener writes each query's latest progress (rates, batch duration,
offsets behind latest, DLQ and late counts, a heartbeat) as JSON under the deployment's
progress folder, and commits the processed end offsets to a consumer group named after
the deployment: Spark keeps offsets only in its checkpoint, so without this `kafka-
consumer-groups --describe` would show no lag at all.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener

from spark_apps.naming import local_path, query_progress_file

LOG = logging.getLogger("orders_streaming_app.progress")

# Streaming observations (reported in each query's progress, computed by the batch's own jobs):
# records and dead letters seen by the ingest query, and the newest ingest batch the revenue
# query has read from bronze.
INGEST_METRICS = "ingest_totals"
REVENUE_INPUT_METRICS = "revenue_input"


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


def summarize_progress(progress: dict[str, Any], counters: dict[str, int]) -> dict[str, Any]:
    """The fields operators and the supervisor need, from one StreamingQueryProgress (as a dict)."""
    sources = progress.get("sources") or [{}]
    # A replay from bronze reads two sources (bronze history, then Kafka): offsets and lag are Kafka's.
    kafka_sources = [s for s in sources if str(s.get("description", "")).startswith("Kafka")]
    source = kafka_sources[0] if kafka_sources else sources[0]
    history = [s for s in sources if s is not source]
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
        "end_offsets": _parse_offsets(source.get("endOffset")) if source in kafka_sources else {},
        "max_offsets_behind_latest": int(behind) if behind not in (None, "") else None,
        "history_pending": any(not _snapshot_consumed(s.get("endOffset")) for s in history),
        "rows_dropped_by_watermark": dropped_late,
        "watermark": (progress.get("eventTime") or {}).get("watermark"),
        "counters": counters,
    }


def _snapshot_consumed(raw_offset: Any) -> bool:
    """True once a Delta source's offset has moved past the table snapshot it started from.

    The replay history is a table written in one commit; the Delta source reports no lag metrics,
    but its offset says `isStartingVersion: false` once every file of that snapshot was read.
    """
    if raw_offset in (None, "", "null"):
        return False
    offset = json.loads(raw_offset) if isinstance(raw_offset, str) else raw_offset
    return offset.get("isStartingVersion") is False


def _parse_offsets(raw: Any) -> dict[str, dict[str, int]]:
    if raw in (None, ""):
        return {}
    offsets = json.loads(raw) if isinstance(raw, str) else raw
    return {topic: {str(p): int(o) for p, o in parts.items()} for topic, parts in offsets.items()}


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) else None


def write_json_atomically(path: Path, document: dict[str, Any]) -> None:
    """Readers never see a half-written file: write a temp file, then rename over the target."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(handle, "w") as out:
        json.dump(document, out, indent=2, default=str)
    os.replace(temporary, path)


def kafka_position(
    covered_batch: int | None,
    ingest_end_offsets: dict[int, dict[str, dict[str, int]]],
    latest_offsets: dict[str, dict[str, int]],
) -> tuple[dict[str, dict[str, int]], int | None]:
    """(end offsets, max offsets behind latest) of a query that has read ingest batches ≤ `covered_batch`.

    The revenue query reads bronze, not Kafka; bronze commits are admitted whole, so having read
    ingest batch k means having read every Kafka record up to that batch's end offsets. The lag is
    unknown (None) until the covered batch's offsets and Kafka's latest offsets (an ingest progress
    of this run) are known.
    """
    if covered_batch is None or covered_batch not in ingest_end_offsets:
        return {}, None
    covered = ingest_end_offsets[covered_batch]
    if not latest_offsets:
        return covered, None
    behind = 0
    for topic, partitions in latest_offsets.items():
        for partition, latest in partitions.items():
            behind = max(behind, latest - covered.get(topic, {}).get(partition, 0))
    return covered, behind


def caught_up_at(
    ingest_idle: tuple[datetime, datetime] | None, revenue_idle: tuple[datetime, datetime] | None
) -> datetime | None:
    """A moment by which every record Kafka held is reflected in gold, from the two queries' idle streaks
    (first and latest idle event since their last batch); None while either query has work.

    The ingest query found nothing new in Kafka all through its streak, so bronze has not changed since
    the streak began. A revenue query idle at some point after that has read all of bronze. Both were
    idle at the earlier of the two latest events, so every record appended before it is in gold. An idle
    stream's watermark stands still (it moves only with new records), so this is how the control plane
    knows that a quiet hour is over.
    """
    if ingest_idle is None or revenue_idle is None:
        return None
    ingest_since, ingest_latest = ingest_idle
    _, revenue_latest = revenue_idle
    if revenue_latest < ingest_since:
        return None
    return min(ingest_latest, revenue_latest)


def _latest_offsets(progress: dict[str, Any]) -> dict[str, dict[str, int]]:
    kafka = [s for s in progress.get("sources") or [] if str(s.get("description", "")).startswith("Kafka")]
    return _parse_offsets(kafka[0].get("latestOffset")) if kafka else {}


class ProgressPublisher(StreamingQueryListener):
    """Publishes progress of this app's queries and commits the offsets reflected in gold to Kafka.

    The ingest query reads Kafka; its file carries Kafka's own lag. The revenue query reads bronze;
    its file carries the Kafka position of the newest ingest batch it has read (an observed metric
    on its input), so lag and catch-up judge what is in gold, and the consumer group's committed
    offsets (what `kafka-consumer-groups` shows) are the records reflected in gold. The mapping of
    ingest batches to Kafka offsets is kept in `_positions.json`, so a restart keeps it.
    """

    POSITIONS_FILE = "_positions.json"
    KEEP_INGEST_BATCHES = 200

    def __init__(
        self,
        progress_dir: str,
        counters: BatchCounters,
        consumer_group: str,
        kafka_config: dict[str, Any],
        ingest_query: str,
        revenue_query: str,
        batch_facts: Callable[[int], dict[str, Any]] | None = None,
        history_query: str | None = None,
        history_facts: Callable[[int], dict[str, Any]] | None = None,
    ) -> None:
        self.progress_dir = local_path(progress_dir)
        self.counters = counters
        self.consumer_group = consumer_group
        self.kafka_config = kafka_config
        self.ingest_query = ingest_query
        self.revenue_query = revenue_query
        # The one-query engine: one query reads Kafka and commits gold, so it plays both roles; it has
        # no Spark watermark, and its batches tell their own (`batch_facts`).
        self.one_query = ingest_query == revenue_query
        self.batch_facts = batch_facts
        # A replay's history query (one-query engine) runs before the revenue query starts; its
        # progress is published as the revenue query's, with `history_pending` (`_on_history`).
        self.history_query = history_query
        self.history_facts = history_facts
        self._consumer: Any = None
        self._last_batch: dict[str, int] = {}
        self._seen = threading.Condition()
        # Listener events arrive on one thread, but wait_until_published reads from another.
        self._state_lock = threading.Lock()
        self._ingest_end_offsets: dict[int, dict[str, dict[str, int]]] = {}
        self._latest_offsets: dict[str, dict[str, int]] = {}
        self._ingest_summary: dict[str, Any] | None = None
        self._revenue_summary: dict[str, Any] | None = None
        self._covered_batch: int | None = None
        self._committed_batch: int | None = None
        self._history_done_batch: int | None = None
        # Query id -> name (idle events carry only the id), and each idle query's streak of idle
        # events since its last batch: (first, latest).
        self._query_names: dict[str, str] = {}
        self._idle: dict[str, tuple[datetime, datetime]] = {}
        self._engine_watermark: str | None = None
        self._load_positions()

    def _progress_file(self, query_name: str) -> Path:
        return local_path(query_progress_file(str(self.progress_dir), query_name))

    def onQueryStarted(self, event: Any) -> None:
        LOG.info("query %s started (id %s, run %s)", event.name, event.id, event.runId)
        with self._state_lock:
            self._query_names[str(event.id)] = event.name

    def onQueryProgress(self, event: Any) -> None:
        try:
            progress = json.loads(event.progress.json)
            with self._state_lock:
                self._query_names[str(progress.get("id"))] = progress.get("name")
                self._idle.pop(progress.get("name"), None)
                if progress.get("name") == self.ingest_query:
                    self._on_ingest(progress)
                if progress.get("name") == self.revenue_query:
                    self._on_revenue(progress)
                if self.history_query is not None and progress.get("name") == self.history_query:
                    self._on_history(progress)
                else:
                    self._publish_revenue()
        except Exception:  # a monitoring hiccup must never stop the pipeline
            LOG.exception("could not publish streaming progress")
        finally:
            with self._seen:
                self._last_batch[event.progress.name] = event.progress.batchId
                self._seen.notify_all()

    def _on_ingest(self, progress: dict[str, Any]) -> None:
        self._count_ingested(progress)
        summary = summarize_progress(progress, self.counters.snapshot())
        if not self.one_query:
            # With one query the file is the revenue one, which `_publish_revenue` writes whole:
            # writing the bare summary first would show its readers a null watermark meanwhile.
            write_json_atomically(self._progress_file(self.ingest_query), summary)
        self._ingest_summary = summary
        self._latest_offsets = _latest_offsets(progress) or self._latest_offsets
        if summary["end_offsets"]:
            self._ingest_end_offsets[int(progress["batchId"])] = summary["end_offsets"]
        reads_history = len(progress.get("sources") or []) > 1
        if reads_history and not summary["history_pending"] and self._history_done_batch is None:
            self._history_done_batch = int(progress["batchId"])
        self._save_positions()

    def _on_revenue(self, progress: dict[str, Any]) -> None:
        observed = (progress.get("observedMetrics") or {}).get(REVENUE_INPUT_METRICS) or {}
        read_batch = observed.get("ingest_batch_id")
        if self.one_query:
            read_batch = progress.get("batchId")  # its own Kafka offsets are in gold once it commits
        if read_batch is not None:
            self._covered_batch = max(int(read_batch), self._covered_batch or -1)
        self._revenue_summary = summarize_progress(progress, self.counters.snapshot())
        if self.batch_facts is not None and progress.get("batchId") is not None:
            facts = self.batch_facts(int(progress["batchId"]))
            if facts.get("watermark") is not None:
                self._engine_watermark = facts["watermark"]
            # A listener far behind may find a batch's facts gone; the watermark never moves back.
            self._revenue_summary.update({**facts, "watermark": self._engine_watermark})
        self._save_positions()

    def _count_ingested(self, progress: dict[str, Any]) -> None:
        """Add a batch's records and dead letters (its `INGEST_METRICS` observation) to the counters."""
        totals = (progress.get("observedMetrics") or {}).get(INGEST_METRICS) or {}
        self.counters.add("records_archived", int(totals.get("records") or 0))
        self.counters.add("dead_letters", int(totals.get("dead_letters") or 0))

    def _on_history(self, progress: dict[str, Any]) -> None:
        """A batch of the replay's history query: the revenue file says the history is still being
        read, with the history's rates and the engine's watermark; no Kafka position or lag yet."""
        self._count_ingested(progress)
        summary = summarize_progress(progress, self.counters.snapshot())
        facts = self.history_facts(int(progress["batchId"])) if self.history_facts else {}
        if facts.get("watermark") is not None:
            self._engine_watermark = facts["watermark"]
        summary.update(
            {
                **facts,
                "query_name": self.revenue_query,
                "reading": "history",
                "watermark": self._engine_watermark,
                "end_offsets": {},
                "max_offsets_behind_latest": None,
                "history_pending": True,
            }
        )
        write_json_atomically(self._progress_file(self.revenue_query), summary)

    def _publish_revenue(self, commit: bool = True) -> None:
        if self._revenue_summary is None:
            return
        end_offsets, behind = kafka_position(
            self._covered_batch, self._ingest_end_offsets, self._latest_offsets
        )
        if self._covered_batch is None and not self._ingest_end_offsets:
            # Nothing ingested yet: the revenue query is exactly as far as ingest.
            behind = (self._ingest_summary or {}).get("max_offsets_behind_latest")
        caught_up = caught_up_at(self._idle.get(self.ingest_query), self._idle.get(self.revenue_query))
        if caught_up is not None:
            # Ingest found nothing new in Kafka and revenue has read all of bronze since: no lag, even
            # right after a restart, before any ingest progress has said where Kafka ends.
            behind = 0
        history_pending = bool((self._ingest_summary or {}).get("history_pending")) or (
            self._history_done_batch is not None
            and (self._covered_batch is None or self._covered_batch < self._history_done_batch)
        )
        summary = {
            **self._revenue_summary,
            "heartbeat_at": datetime.now(UTC).isoformat(),
            "end_offsets": end_offsets,
            "max_offsets_behind_latest": behind,
            "history_pending": history_pending,
            "ingest_batch_read": self._covered_batch,
            "caught_up_at": _iso(caught_up),
            "counters": self.counters.snapshot(),
        }
        write_json_atomically(self._progress_file(self.revenue_query), summary)
        # Offsets are committed on progress only: a failing commit is not retried every idle event.
        if commit and end_offsets and self._covered_batch != self._committed_batch:
            self._commit(end_offsets)
            self._committed_batch = self._covered_batch

    def _load_positions(self) -> None:
        path = self.progress_dir / self.POSITIONS_FILE
        if not path.exists():
            return
        try:
            saved = json.loads(path.read_text())
        except ValueError:
            LOG.warning("ignoring unreadable %s", path)
            return
        self._ingest_end_offsets = {int(b): o for b, o in (saved.get("ingest_end_offsets") or {}).items()}
        self._covered_batch = saved.get("revenue_ingest_batch_read")
        self._history_done_batch = saved.get("history_done_batch")

    def _save_positions(self) -> None:
        # Keep the covered batch's offsets and the newer ones; older batches are never needed again.
        floor = self._covered_batch if self._covered_batch is not None else -1
        kept = sorted(b for b in self._ingest_end_offsets if b >= floor)[-self.KEEP_INGEST_BATCHES :]
        self._ingest_end_offsets = {b: self._ingest_end_offsets[b] for b in kept}
        write_json_atomically(
            self.progress_dir / self.POSITIONS_FILE,
            {
                "ingest_end_offsets": self._ingest_end_offsets,
                "revenue_ingest_batch_read": self._covered_batch,
                "history_done_batch": self._history_done_batch,
            },
        )

    def revenue_read_batch(self) -> int | None:
        """The newest ingest batch the revenue query has read in a committed batch (kept across
        restarts in `_positions.json`); None before its first batch. Never ahead of the checkpoint:
        progress is reported after a batch commits."""
        with self._state_lock:
            return self._covered_batch

    def wait_until_published(self, query_name: str, batch_id: int, timeout_s: float = 30.0) -> bool:
        """Block until progress of `batch_id` of `query_name` was handled (events arrive asynchronously)."""
        with self._seen:
            return self._seen.wait_for(lambda: self._last_batch.get(query_name, -1) >= batch_id, timeout_s)

    def onQueryIdle(self, event: Any) -> None:
        """Spark reports an idle query every `spark.sql.streaming.noDataProgressEventInterval` (10 s)
        instead of a progress: record the streak and publish whether the app has caught up."""
        try:
            at = datetime.fromisoformat(str(event.timestamp).replace("Z", "+00:00"))
            with self._state_lock:
                name = self._query_names.get(str(event.id))
                if name not in (self.ingest_query, self.revenue_query):
                    return
                since = self._idle.get(name, (at, at))[0]
                self._idle[name] = (since, at)
                if self._revenue_summary is None:
                    # Restarted with nothing new to read: no batch has run, so publish on what the last
                    # run wrote (its watermark is the checkpoint's).
                    self._revenue_summary = _read_json(self._progress_file(self.revenue_query))
                self._publish_revenue(commit=False)
        except Exception:  # a monitoring hiccup must never stop the pipeline
            LOG.exception("could not publish idleness")

    def onQueryTerminated(self, event: Any) -> None:
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
