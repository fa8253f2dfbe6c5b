"""The revenue topic writer's wait for room in a full producer queue is bounded (pure logic: a stub
producer; tests/integration/test_revenue_topic_large_batch.py pauses a real broker)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from spark_apps.contract.records import GOLD_COLUMNS
from spark_apps.storage import revenue_topic
from spark_apps.storage.revenue_topic import RevenueTopicStalledError, RevenueTopicWriter, revenue_record


class _QueueFull:
    """A producer whose local queue has room for `room` records, then none until `freed_after` polls."""

    def __init__(self, room: int, freed_after: int | None) -> None:
        self.room, self.freed_after = room, freed_after
        self.sent: list[bytes] = []
        self.polls = 0
        self.abort_timeout: float | None = None

    def begin_transaction(self) -> None:
        pass

    def produce(self, topic: str, value: bytes, key: bytes, on_delivery: Any = None) -> None:
        if len(self.sent) >= self.room:
            raise BufferError("Local: Queue full")
        self.sent.append(key)

    def poll(self, timeout: float) -> int:
        self.polls += 1
        if timeout > 0 and self.freed_after is not None and self.polls >= self.freed_after:
            self.room += 10  # deliveries acknowledged: room again
        return 0

    def commit_transaction(self, timeout: float) -> None:
        pass

    def abort_transaction(self, timeout: float) -> None:
        self.abort_timeout = timeout


def _writer(producer: Any) -> RevenueTopicWriter:
    writer = RevenueTopicWriter.__new__(RevenueTopicWriter)
    writer.topic, writer.transactional_id, writer._fatal, writer._producer = "revenue", "t", None, producer
    writer._undelivered = None
    return writer


def _rows(count: int) -> list[tuple[Any, ...]]:
    start = datetime(2026, 11, 1, tzinfo=UTC)
    values = {"order_type": "GENERAL", "window_start": start, "window_end": start, "order_count": 1}
    return [
        tuple({**values, "location_id": f"store-{i}"}.get(column) for column in GOLD_COLUMNS)
        for i in range(count)
    ]


def test_a_full_queue_is_waited_out_and_every_record_is_sent_once() -> None:
    producer = _QueueFull(room=5, freed_after=3)
    rows = _rows(30)
    _writer(producer).write(rows)
    assert producer.sent == [revenue_record(row)[0] for row in rows]  # each once, in order
    assert producer.abort_timeout is None


def test_a_queue_that_never_drains_fails_the_batch_within_the_transaction_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(revenue_topic, "QUEUE_WAIT_S", 0.3)
    monkeypatch.setattr(revenue_topic, "_QUEUE_FULL_POLL_S", 0.0)
    producer = _QueueFull(room=5, freed_after=None)
    with pytest.raises(RevenueTopicStalledError, match=r"did not take this batch's records within 0 s"):
        _writer(producer).write(_rows(30))
    assert len(producer.sent) == 5
    # Nothing of the batch is committed; the abort waits briefly on a broker that has stalled.
    assert producer.abort_timeout is not None
    assert producer.abort_timeout < revenue_topic.TRANSACTION_TIMEOUT_S


class _Delivering(_QueueFull):
    """A producer whose every delivery fails with `code`, reported at the commit (librdkafka's way)."""

    def __init__(self, code: int) -> None:
        super().__init__(room=10, freed_after=None)
        self.code = code
        self.callbacks: list[Any] = []

    def produce(self, topic: str, value: bytes, key: bytes, on_delivery: Any = None) -> None:
        super().produce(topic, value, key)
        self.callbacks.append(on_delivery)

    def commit_transaction(self, timeout: float) -> None:
        from confluent_kafka import KafkaError, KafkaException

        for callback in self.callbacks:
            callback(KafkaError(self.code), type("Message", (), {"partition": lambda self: 3})())
        raise KafkaException(KafkaError(KafkaError._INCONSISTENT, "2 message(s) failed delivery"))


def test_a_refused_batch_names_the_topic_and_the_reason_and_a_timeout_is_left_as_it_is() -> None:
    from confluent_kafka import KafkaError, KafkaException

    from spark_apps.storage.revenue_topic import RevenueTopicDeliveryError

    refused = _writer(_Delivering(KafkaError.UNKNOWN_TOPIC_OR_PART))
    with pytest.raises(
        RevenueTopicDeliveryError, match=r"revenue topic revenue: .*partition 3: .*Unknown topic"
    ):
        refused.write(_rows(2))
    # A lost broker's records time out: not a refusal, the client's own error stands.
    timed_out = _writer(_Delivering(KafkaError._MSG_TIMED_OUT))
    with pytest.raises(KafkaException):
        timed_out.write(_rows(2))
