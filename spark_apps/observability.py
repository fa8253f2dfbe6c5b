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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener

LOG = logging.getLogger("orders_streaming_app.progress")


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
    source = next((s for s in sources if str(s.get("description", "")).startswith("Kafka")), sources[0])
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
        "end_offsets": _parse_offsets(source.get("endOffset")),
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


def write_json_atomically(path: Path, document: dict[str, Any]) -> None:
    """Readers never see a half-written file: write a temp file, then rename over the target."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(handle, "w") as out:
        json.dump(document, out, indent=2, default=str)
    os.replace(temporary, path)


class ProgressPublisher(StreamingQueryListener):
    """Publishes progress of this app's queries and commits processed offsets to Kafka."""

    def __init__(
        self,
        progress_dir: str,
        counters: BatchCounters,
        consumer_group: str,
        kafka_config: dict[str, Any],
        commit_for_query: str,
    ) -> None:
        self.progress_dir = Path(progress_dir.removeprefix("file:"))
        self.counters = counters
        self.consumer_group = consumer_group
        self.kafka_config = kafka_config
        self.commit_for_query = commit_for_query
        self._consumer: Any = None
        self._last_batch: dict[str, int] = {}
        self._seen = threading.Condition()

    def onQueryStarted(self, event: Any) -> None:
        LOG.info("query %s started (id %s, run %s)", event.name, event.id, event.runId)

    def onQueryProgress(self, event: Any) -> None:
        try:
            summary = summarize_progress(json.loads(event.progress.json), self.counters.snapshot())
            write_json_atomically(self.progress_dir / f"{summary['query_name']}.json", summary)
            if summary["query_name"] == self.commit_for_query and summary["end_offsets"]:
                self._commit(summary["end_offsets"])
        except Exception:  # a monitoring hiccup must never stop the pipeline
            LOG.exception("could not publish streaming progress")
        finally:
            with self._seen:
                self._last_batch[event.progress.name] = event.progress.batchId
                self._seen.notify_all()

    def wait_until_published(self, query_name: str, batch_id: int, timeout_s: float = 30.0) -> bool:
        """Block until progress of `batch_id` of `query_name` was handled (events arrive asynchronously)."""
        with self._seen:
            return self._seen.wait_for(lambda: self._last_batch.get(query_name, -1) >= batch_id, timeout_s)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        LOG.info("query %s terminated (exception: %s)", event.id, event.exception)

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
