"""What the app's progress file says: its query's Kafka position and lag, when the app had read all of
Kafka (from Spark's idle events), and whether a replay's history is still being read."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from spark_apps.engine.observability import BatchCounters, ProgressPublisher

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
QUERY, HISTORY = "blue__revenue", "blue__history"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


class RecordingPublisher(ProgressPublisher):
    """The real publisher, with the consumer group's offset commits recorded instead of sent."""

    def __init__(self, progress_dir: Path, **kwargs: Any) -> None:
        super().__init__(
            str(progress_dir),
            BatchCounters(),
            consumer_group="revenue-platform-blue",
            kafka_config={},
            query=QUERY,
            **kwargs,
        )
        self.commits: list[dict[str, dict[str, int]]] = []

    def _commit(self, end_offsets: dict[str, dict[str, int]]) -> None:
        self.commits.append(end_offsets)


def kafka_source(end: dict[str, int], latest: dict[str, int]) -> dict[str, Any]:
    return {
        "description": "KafkaV2[Subscribe[orders]]",
        "endOffset": json.dumps({"orders": end}),
        "latestOffset": json.dumps({"orders": latest}),
    }


def progress_event(
    query_id: uuid.UUID,
    name: str,
    batch_id: int,
    sources: list[dict[str, Any]] | None = None,
    started_s: float = 0,
) -> SimpleNamespace:
    document = {
        "id": str(query_id),
        "runId": str(uuid.uuid4()),
        "name": name,
        "batchId": batch_id,
        "timestamp": at(started_s).strftime("%Y-%m-%dT%H:%M:%S.000Z"),
        "numInputRows": 0,
        "eventTime": {"watermark": "2026-11-22T09:41:00.000Z"},
        "sources": sources or [],
    }
    return SimpleNamespace(progress=SimpleNamespace(json=json.dumps(document), name=name, batchId=batch_id))


def idle_event(query_id: uuid.UUID, seconds: float) -> SimpleNamespace:
    stamp = at(seconds).strftime("%Y-%m-%dT%H:%M:%S.") + f"{at(seconds).microsecond // 1000:03d}Z"
    return SimpleNamespace(id=query_id, runId=uuid.uuid4(), timestamp=stamp)


def started(listener: ProgressPublisher, name: str) -> uuid.UUID:
    query_id = uuid.uuid4()
    listener.onQueryStarted(SimpleNamespace(id=query_id, runId=uuid.uuid4(), name=name))
    return query_id


def published(progress_dir: Path) -> dict[str, Any]:
    return dict(json.loads((progress_dir / f"{QUERY}.json").read_text()))


def test_a_batch_publishes_and_commits_its_own_end_offsets_with_the_lag_it_saw(tmp_path: Path) -> None:
    listener = RecordingPublisher(tmp_path)
    query = started(listener, QUERY)
    listener.onQueryProgress(
        progress_event(query, QUERY, 7, [kafka_source({"0": 180, "1": 90}, {"0": 200, "1": 90})])
    )
    document = published(tmp_path)
    assert document["end_offsets"] == {"orders": {"0": 180, "1": 90}}
    assert document["max_offsets_behind_latest"] == 20
    assert document["batch_id"] == 7
    assert (document["history_pending"], document["caught_up_at"]) == (False, None)
    assert listener.commits == [{"orders": {"0": 180, "1": 90}}]

    # A batch that read nothing new (it only moved time on) leaves the committed position as it is.
    listener.onQueryProgress(
        progress_event(query, QUERY, 8, [kafka_source({"0": 180, "1": 90}, {"0": 180, "1": 90})])
    )
    assert published(tmp_path)["max_offsets_behind_latest"] == 0
    assert len(listener.commits) == 1
    listener.onQueryProgress(
        progress_event(query, QUERY, 9, [kafka_source({"0": 200, "1": 95}, {"0": 200, "1": 99})])
    )
    assert listener.commits[-1] == {"orders": {"0": 200, "1": 95}}
    assert published(tmp_path)["max_offsets_behind_latest"] == 4


def test_the_lag_is_unknown_while_the_batch_did_not_say_where_kafka_ends(tmp_path: Path) -> None:
    listener = RecordingPublisher(tmp_path)
    query = started(listener, QUERY)
    source = {"description": "KafkaV2[Subscribe[orders]]", "endOffset": '{"orders": {"0": 180}}'}
    listener.onQueryProgress(progress_event(query, QUERY, 3, [source]))
    assert published(tmp_path)["max_offsets_behind_latest"] is None, "never a made-up 0"


def test_idle_events_publish_caught_up_at_and_a_batch_clears_it(tmp_path: Path) -> None:
    listener = RecordingPublisher(tmp_path)
    query = started(listener, QUERY)
    listener.onQueryProgress(progress_event(query, QUERY, 3, [kafka_source({"0": 180}, {"0": 200})]))
    assert published(tmp_path)["caught_up_at"] is None

    # The query found nothing new in Kafka: everything Kafka held then is in gold, nothing behind.
    listener.onQueryIdle(idle_event(query, 10))
    document = published(tmp_path)
    assert (document["caught_up_at"], document["max_offsets_behind_latest"]) == (at(10).isoformat(), 0)
    assert document["watermark"] == "2026-11-22T09:41:00.000Z"
    listener.onQueryIdle(idle_event(query, 20))
    assert published(tmp_path)["caught_up_at"] == at(20).isoformat()

    # New records: a batch ran, so nothing is caught up until the query is idle again.
    listener.onQueryProgress(progress_event(query, QUERY, 4, [kafka_source({"0": 250}, {"0": 260})]))
    document = published(tmp_path)
    assert (document["caught_up_at"], document["max_offsets_behind_latest"]) == (None, 10)
    listener.onQueryIdle(idle_event(query, 30))
    assert published(tmp_path)["caught_up_at"] == at(30).isoformat()
    # Idle events commit nothing: the position was committed with the batch.
    assert listener.commits == [{"orders": {"0": 180}}, {"orders": {"0": 250}}]


def test_the_file_says_when_the_app_last_had_read_all_of_kafka(tmp_path: Path) -> None:
    """`kafka_read_all_at`: the lag in seconds is at most the time since; it never moves back."""
    listener = RecordingPublisher(tmp_path)
    query = started(listener, QUERY)
    listener.onQueryProgress(progress_event(query, QUERY, 3, [kafka_source({"0": 180}, {"0": 200})], 5))
    assert published(tmp_path)["kafka_read_all_at"] is None, "behind from the start: not known yet"
    # A batch that read up to the latest offsets its trigger saw: all Kafka held at its start is in gold.
    listener.onQueryProgress(progress_event(query, QUERY, 4, [kafka_source({"0": 200}, {"0": 200})], 12))
    assert published(tmp_path)["kafka_read_all_at"] == at(12).isoformat()
    # A batch capped by maxOffsetsPerTrigger (behind) leaves it where it was, however late it starts.
    listener.onQueryProgress(progress_event(query, QUERY, 5, [kafka_source({"0": 300}, {"0": 900})], 40))
    assert published(tmp_path)["kafka_read_all_at"] == at(12).isoformat()
    listener.onQueryIdle(idle_event(query, 70))
    assert published(tmp_path)["kafka_read_all_at"] == at(70).isoformat()
    # A restarted driver goes on from the last run's until it has read all of Kafka again.
    restarted = RecordingPublisher(tmp_path)
    again = started(restarted, QUERY)
    restarted.onQueryProgress(progress_event(again, QUERY, 6, [kafka_source({"0": 950}, {"0": 990})], 90))
    assert published(tmp_path)["kafka_read_all_at"] == at(70).isoformat()


def test_a_restarted_app_with_nothing_to_read_publishes_on_its_last_progress(tmp_path: Path) -> None:
    (tmp_path / f"{QUERY}.json").write_text(
        json.dumps(
            {
                "query_name": QUERY,
                "batch_id": 41,
                "watermark": "2026-11-22T09:41:00.000Z",
                "end_offsets": {"orders": {"0": 180}},
                "max_offsets_behind_latest": 12,
                "history_pending": False,
            }
        )
    )
    listener = RecordingPublisher(tmp_path)
    query = started(listener, QUERY)
    # No batch ran in this run: the query found nothing new in Kafka, so its last batch left gold
    # with everything, and the position is the last run's.
    listener.onQueryIdle(idle_event(query, 10))
    document = published(tmp_path)
    assert (document["batch_id"], document["watermark"]) == (41, "2026-11-22T09:41:00.000Z")
    assert document["end_offsets"] == {"orders": {"0": 180}}
    assert document["max_offsets_behind_latest"] == 0
    assert document["caught_up_at"] == at(10).isoformat()
    assert listener.commits == []
    # Idle events of another query of the session change nothing.
    listener.onQueryIdle(idle_event(started(listener, "blue__other"), 50))
    assert published(tmp_path)["caught_up_at"] == at(10).isoformat()


def test_the_file_says_history_pending_until_the_kafka_query_has_committed_a_batch(tmp_path: Path) -> None:
    facts = {0: {"watermark": "2026-11-22T09:30:00.000Z"}, 1: {"watermark": "2026-11-22T09:40:00.000Z"}}
    live_facts: dict[int, dict[str, Any]] = {0: {"late_orders": 0}}  # its first batch moved no watermark
    listener = RecordingPublisher(
        tmp_path, history_query=HISTORY, history_facts=facts.__getitem__, batch_facts=live_facts.__getitem__
    )
    history = started(listener, HISTORY)
    delta = {"description": "DeltaSource[file:/lake/bronze/replay_history/blue]", "endOffset": "{}"}
    for batch in (0, 1):
        listener.onQueryProgress(progress_event(history, HISTORY, batch, [delta]))
        document = published(tmp_path)
        assert (document["query_name"], document["reading"]) == (QUERY, "history")
        assert (document["history_pending"], document["end_offsets"]) == (True, {})
        assert document["max_offsets_behind_latest"] is None
        assert document["watermark"] == facts[batch]["watermark"]
    assert listener.commits == []

    # The history ended and the Kafka query started: its first batch is after the history.
    query = started(listener, QUERY)
    listener.onQueryProgress(progress_event(query, QUERY, 0, [kafka_source({"0": 10}, {"0": 10})]))
    document = published(tmp_path)
    assert (document["history_pending"], document["max_offsets_behind_latest"]) == (False, 0)
    assert "reading" not in document
    assert document["watermark"] == "2026-11-22T09:40:00.000Z", "the history's watermark stands"
    assert listener.commits == [{"orders": {"0": 10}}]


def test_a_restart_after_the_history_ended_publishes_it_done(tmp_path: Path) -> None:
    # The last run's history wrote the file; the Kafka query's first batch committed, unpublished.
    (tmp_path / f"{QUERY}.json").write_text(
        json.dumps(
            {
                "query_name": QUERY,
                "batch_id": 9,
                "reading": "history",
                "watermark": "2026-11-22T09:40:00.000Z",
                "end_offsets": {},
                "max_offsets_behind_latest": None,
                "history_pending": True,
            }
        )
    )
    listener = RecordingPublisher(tmp_path, history_query=HISTORY)
    # The history query found its history read and ended at once; the Kafka query is idle.
    listener.onQueryIdle(idle_event(started(listener, QUERY), 10))
    document = published(tmp_path)
    assert (document["history_pending"], document["max_offsets_behind_latest"]) == (False, 0)
    assert "reading" not in document
    assert document["caught_up_at"] == at(10).isoformat()
