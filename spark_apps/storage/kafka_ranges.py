"""Which Kafka offsets hold a time range, and whether Kafka still holds all of it.

Batch reprocessing reads the orders topic from the first offset whose append time is at
or after the range start (minus a clock-skew allowance) up to the high watermarks at job
start: late events of the range, appended after it ended, are included; nothing newer
than the job is. When retention has already deleted records the range needs, Kafka no
longer covers it and the caller must read the bronze archive instead.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TopicRange:
    """Per-partition [start, end) offsets of one topic, and whether retention cut into them."""

    topic: str
    start_offsets: dict[int, int]
    end_offsets: dict[int, int]
    gaps: list[str]

    @property
    def covered(self) -> bool:
        return not self.gaps

    def spark_offsets(self) -> tuple[str, str]:
        """(startingOffsets, endingOffsets) JSON for Spark's Kafka batch source."""

        def as_json(offsets: dict[int, int]) -> str:
            return json.dumps({self.topic: {str(p): o for p, o in sorted(offsets.items())}})

        return as_json(self.start_offsets), as_json(self.end_offsets)

    @property
    def record_count(self) -> int:
        return sum(self.end_offsets[p] - self.start_offsets[p] for p in self.end_offsets)


def find_topic_range(
    kafka_config: dict[str, Any], topic: str, start_ms: int, timeout_s: float = 30.0
) -> TopicRange:
    """Offsets of `topic` from append time `start_ms` up to now, and the gaps retention left."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**kafka_config, "group.id": "reprocess-range-finder", "enable.auto.commit": False})
    try:
        partitions = _partitions(consumer, kafka_config, topic, timeout_s)
        found = consumer.offsets_for_times(
            [TopicPartition(topic, p, start_ms) for p in partitions], timeout=timeout_s
        )
        start_offsets: dict[int, int] = {}
        end_offsets: dict[int, int] = {}
        gaps: list[str] = []
        for tp in found:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, tp.partition), timeout=timeout_s)
            # -1: no record at or after start_ms, so nothing of the range is in this partition.
            start = high if tp.offset < 0 else tp.offset
            start_offsets[tp.partition] = start
            end_offsets[tp.partition] = high
            if low > 0 and start <= low:
                # An emptied partition (low == high) has no record to ask for its time: a poll
                # there would only wait out its timeout (30 s a partition) before saying so.
                first_kept_ms = None
                if low < high:
                    first_kept_ms = _timestamp_at(consumer, topic, tp.partition, low, timeout_s)
                # No kept record at all, or the oldest kept one is newer than the range start:
                # retention may have removed records of the range, so Kafka cannot prove coverage.
                if first_kept_ms is None or first_kept_ms > start_ms:
                    kept = (
                        "none is kept"
                        if first_kept_ms is None
                        else f"the oldest kept record was appended at {first_kept_ms} ms, "
                        f"after the range start {start_ms} ms"
                    )
                    gaps.append(
                        f"{topic}[{tp.partition}]: records before offset {low} were deleted by "
                        f"retention; {kept}"
                    )
        return TopicRange(topic, start_offsets, end_offsets, gaps)
    finally:
        consumer.close()


def _partitions(consumer: Any, kafka_config: dict[str, Any], topic: str, timeout_s: float) -> list[int]:
    """The partition numbers of `topic`; ValueError naming the broker when the topic does not exist."""
    metadata = consumer.list_topics(topic, timeout=timeout_s)
    if topic not in metadata.topics or metadata.topics[topic].error is not None:
        raise ValueError(f"topic {topic!r} does not exist on {kafka_config.get('bootstrap.servers')}")
    return sorted(metadata.topics[topic].partitions)


def _timestamp_at(consumer: Any, topic: str, partition: int, offset: int, timeout_s: float) -> int | None:
    from confluent_kafka import TopicPartition

    consumer.assign([TopicPartition(topic, partition, offset)])
    message = consumer.poll(timeout_s)
    consumer.unassign()
    if message is None or message.error() is not None:
        return None
    return int(message.timestamp()[1])


def partition_watermarks(
    kafka_config: dict[str, Any], topic: str, timeout_s: float = 30.0
) -> dict[int, tuple[int, int]]:
    """(low, high) watermark offsets of every partition of `topic`: what Kafka still holds."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**kafka_config, "group.id": "watermark-reader", "enable.auto.commit": False})
    try:
        return {
            partition: consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout_s)
            for partition in _partitions(consumer, kafka_config, topic, timeout_s)
        }
    finally:
        consumer.close()
