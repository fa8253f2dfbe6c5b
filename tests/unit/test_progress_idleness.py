"""When both queries of the app are idle, its revenue progress says by when it had read all of Kafka."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

from spark_apps.observability import BatchCounters, ProgressPublisher, caught_up_at

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_caught_up_needs_both_queries_idle_and_revenue_idle_after_ingest_went_idle() -> None:
    assert caught_up_at(None, (at(0), at(10))) is None
    assert caught_up_at((at(0), at(10)), None) is None
    # Revenue's last idle event is older than ingest's last batch: it may not have read that batch.
    assert caught_up_at((at(20), at(30)), (at(0), at(10))) is None
    # Both idle at the earlier of the two latest events.
    assert caught_up_at((at(0), at(30)), (at(5), at(25))) == at(25)
    assert caught_up_at((at(0), at(30)), (at(5), at(45))) == at(30)


def publisher(progress_dir: Path) -> ProgressPublisher:
    return ProgressPublisher(
        str(progress_dir),
        BatchCounters(),
        consumer_group="revenue-platform-blue",
        kafka_config={},
        ingest_query="blue__ingest",
        revenue_query="blue__revenue",
    )


def progress_event(query_id: uuid.UUID, name: str, batch_id: int) -> SimpleNamespace:
    document = {
        "id": str(query_id),
        "runId": str(uuid.uuid4()),
        "name": name,
        "batchId": batch_id,
        "timestamp": at(0).isoformat(),
        "numInputRows": 0,
        "eventTime": {"watermark": "2026-11-22T09:41:00.000Z"},
        "sources": [],
    }
    return SimpleNamespace(progress=SimpleNamespace(json=json.dumps(document), name=name, batchId=batch_id))


def idle_event(query_id: uuid.UUID, seconds: float) -> SimpleNamespace:
    stamp = at(seconds).strftime("%Y-%m-%dT%H:%M:%S.") + f"{at(seconds).microsecond // 1000:03d}Z"
    return SimpleNamespace(id=query_id, runId=uuid.uuid4(), timestamp=stamp)


def published(progress_dir: Path) -> dict[str, object]:
    return dict(json.loads((progress_dir / "blue__revenue.json").read_text()))


def test_idle_events_publish_caught_up_at_and_a_batch_clears_it(tmp_path: Path) -> None:
    listener = publisher(tmp_path)
    ingest, revenue = uuid.uuid4(), uuid.uuid4()
    listener.onQueryStarted(SimpleNamespace(id=ingest, runId=uuid.uuid4(), name="blue__ingest"))
    listener.onQueryStarted(SimpleNamespace(id=revenue, runId=uuid.uuid4(), name="blue__revenue"))
    listener.onQueryProgress(progress_event(revenue, "blue__revenue", 3))
    assert published(tmp_path)["caught_up_at"] is None

    listener.onQueryIdle(idle_event(ingest, 10))
    assert published(tmp_path)["caught_up_at"] is None  # revenue not idle yet
    listener.onQueryIdle(idle_event(revenue, 12.5))
    assert published(tmp_path)["caught_up_at"] == at(10).isoformat()
    listener.onQueryIdle(idle_event(ingest, 20))
    listener.onQueryIdle(idle_event(revenue, 22.5))
    assert published(tmp_path)["caught_up_at"] == at(20).isoformat()
    assert published(tmp_path)["watermark"] == "2026-11-22T09:41:00.000Z"

    # New records: ingest runs a batch, so nothing is caught up until both are idle again, with
    # revenue's idleness after ingest's.
    listener.onQueryProgress(progress_event(ingest, "blue__ingest", 8))
    assert published(tmp_path)["caught_up_at"] is None
    listener.onQueryIdle(idle_event(revenue, 32.5))
    listener.onQueryIdle(idle_event(ingest, 40))
    assert published(tmp_path)["caught_up_at"] is None
    listener.onQueryIdle(idle_event(revenue, 42.5))
    assert published(tmp_path)["caught_up_at"] == at(40).isoformat()

    # A batch of the revenue query (here a no-data batch that moves the watermark) ends its streak too.
    listener.onQueryProgress(progress_event(revenue, "blue__revenue", 4))
    assert published(tmp_path)["caught_up_at"] is None
    listener.onQueryIdle(idle_event(ingest, 50))
    assert published(tmp_path)["caught_up_at"] is None
    listener.onQueryIdle(idle_event(revenue, 52.5))
    assert published(tmp_path)["caught_up_at"] == at(50).isoformat()


def test_a_restarted_app_with_nothing_to_read_publishes_on_its_last_progress(tmp_path: Path) -> None:
    (tmp_path / "blue__revenue.json").write_text(
        json.dumps(
            {
                "query_name": "blue__revenue",
                "batch_id": 41,
                "watermark": "2026-11-22T09:41:00.000Z",
                "max_offsets_behind_latest": 0,
            }
        )
    )
    # What the last run kept: the Kafka end offsets of the ingest batch revenue had read.
    (tmp_path / ProgressPublisher.POSITIONS_FILE).write_text(
        json.dumps({"ingest_end_offsets": {"57": {"orders": {"0": 180}}}, "revenue_ingest_batch_read": 57})
    )
    listener = publisher(tmp_path)
    ingest, revenue = uuid.uuid4(), uuid.uuid4()
    listener.onQueryStarted(SimpleNamespace(id=ingest, runId=uuid.uuid4(), name="blue__ingest"))
    listener.onQueryStarted(SimpleNamespace(id=revenue, runId=uuid.uuid4(), name="blue__revenue"))
    # Revenue is idle while ingest still works on its first batch of this run (a catch-up after
    # downtime): where Kafka ends is not known yet, so the lag is unknown, never a made-up 0.
    listener.onQueryIdle(idle_event(revenue, 9))
    document = published(tmp_path)
    assert (document["batch_id"], document["watermark"]) == (41, "2026-11-22T09:41:00.000Z")
    assert document["max_offsets_behind_latest"] is None
    assert document["caught_up_at"] is None
    # Both idle, revenue after ingest: nothing was left to read, so no lag.
    listener.onQueryIdle(idle_event(ingest, 10))
    listener.onQueryIdle(idle_event(revenue, 11))
    document = published(tmp_path)
    assert document["max_offsets_behind_latest"] == 0
    assert document["end_offsets"] == {"orders": {"0": 180}}
    assert document["caught_up_at"] == at(10).isoformat()
    # Idle events of another query of the session change nothing.
    listener.onQueryIdle(idle_event(uuid.uuid4(), 50))
    assert published(tmp_path)["caught_up_at"] == at(10).isoformat()
