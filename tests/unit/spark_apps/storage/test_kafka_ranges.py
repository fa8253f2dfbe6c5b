"""Finding a reprocess range's offsets: what retention left decides Kafka or bronze, without waiting."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import TopicPartition

from spark_apps.storage import kafka_ranges

TOPIC = "orders"
RANGE_START_MS = 1_000


class _Message:
    def __init__(self, timestamp_ms: int) -> None:
        self._timestamp_ms = timestamp_ms

    def error(self) -> None:
        return None

    def timestamp(self) -> tuple[int, int]:
        return (1, self._timestamp_ms)


class _Partition:
    def __init__(self) -> None:
        self.error = None


class _Topic:
    def __init__(self, partitions: int) -> None:
        self.error = None
        self.partitions = {p: _Partition() for p in range(partitions)}


class _Metadata:
    def __init__(self, partitions: int) -> None:
        self.topics = {TOPIC: _Topic(partitions)}


class _FakeConsumer:
    """A broker's answers for a topic of three partitions, as retention left them:
    0 untouched, 1 cut into (its oldest kept record newer than the range), 2 emptied."""

    watermarks = {0: (0, 10), 1: (4, 10), 2: (10, 10)}
    first_kept_ms = {1: 5_000}
    polled: list[int] = []

    def __init__(self, config: dict[str, Any]) -> None:
        self.assigned: list[int] = []

    def list_topics(self, topic: str, timeout: float) -> _Metadata:
        return _Metadata(len(self.watermarks))

    def offsets_for_times(self, wanted: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        # Every partition's first record at or after the start is its oldest kept one (or none).
        return [
            TopicPartition(TOPIC, tp.partition, self.watermarks[tp.partition][0] if tp.partition != 2 else -1)
            for tp in wanted
        ]

    def get_watermark_offsets(self, tp: TopicPartition, timeout: float) -> tuple[int, int]:
        return self.watermarks[tp.partition]

    def assign(self, partitions: list[TopicPartition]) -> None:
        self.assigned = [tp.partition for tp in partitions]

    def poll(self, timeout: float) -> _Message | None:
        (partition,) = self.assigned
        type(self).polled.append(partition)
        if partition == 2:
            raise AssertionError("an emptied partition was polled: a real broker keeps that poll waiting")
        return _Message(self.first_kept_ms[partition])

    def unassign(self) -> None:
        self.assigned = []

    def close(self) -> None:
        pass


def test_an_emptied_partition_is_a_gap_found_without_polling_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("confluent_kafka.Consumer", _FakeConsumer)
    _FakeConsumer.polled = []

    found = kafka_ranges.find_topic_range({"bootstrap.servers": "broker:9092"}, TOPIC, RANGE_START_MS)

    assert not found.covered
    assert [gap.split(":")[0] for gap in found.gaps] == [f"{TOPIC}[1]", f"{TOPIC}[2]"]
    assert "appended at 5000 ms" in found.gaps[0]
    assert "none is kept" in found.gaps[1]
    assert _FakeConsumer.polled == [1], "only the partition with a kept record is asked for its time"
    assert found.start_offsets == {0: 0, 1: 4, 2: 10}
    assert found.end_offsets == {0: 10, 1: 10, 2: 10}
