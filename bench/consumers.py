"""Plain confluent-kafka consumers beside the app: the raw read ceiling (how fast the broker hands out a
topic), the work-equivalent ceiling (the app's work done by one Python loop, bench/work_ceiling.py),
and the append time of every record, which live latency is measured from."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from bench.work_ceiling import WindowGeometry, tally_orders
from spark_apps.contract.records import OrderRules

if TYPE_CHECKING:
    from confluent_kafka import Consumer


def ceiling_consumer(bootstrap: str, group_prefix: str) -> Consumer:
    """A plain consumer with large fetches, so neither ceiling waits on small round trips."""
    from confluent_kafka import Consumer

    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{group_prefix}-{time.time_ns()}",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 10_485_760,
            "queued.min.messages": 200_000,
        }
    )


def partitions_of(consumer: Consumer, topic: str) -> list[int]:
    """The partition ids of `topic`, as the broker reports them (the topic spec decides how many)."""
    return sorted(consumer.list_topics(topic, timeout=30).topics[topic].partitions)


def end_offsets(consumer: Consumer, topic: str) -> dict[int, int]:
    """Per partition of `topic`: its high watermark (the offset after its last record)."""
    from confluent_kafka import TopicPartition

    return {
        p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
        for p in partitions_of(consumer, topic)
    }


def assign_from_beginning(consumer: Consumer, topic: str) -> None:
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions_of(consumer, topic)])


def read_ceiling(bootstrap: str, topic: str) -> dict[str, float]:
    """A plain confluent-kafka consumer reading `topic` from the start to its end: the physical ceiling."""
    consumer = ceiling_consumer(bootstrap, "bench-ceiling")
    try:
        ends = end_offsets(consumer, topic)
        remaining = {p for p, end in ends.items() if end > 0}
        started = time.monotonic()
        assign_from_beginning(consumer, topic)
        records = 0
        payload = 0
        # A short wait: consume() blocks until it has a full batch or times out, and that wait on the
        # last partial batch must not count as reading time.
        while remaining:
            for message in consumer.consume(num_messages=10_000, timeout=0.05):
                if message.error():
                    continue
                records += 1
                payload += len(message.value() or b"") + len(message.key() or b"")
                partition, offset = message.partition() or 0, message.offset() or 0
                if offset + 1 >= ends[partition]:
                    remaining.discard(partition)
        seconds = time.monotonic() - started
    finally:
        consumer.close()
    return {
        "records": records,
        "bytes": payload,
        "seconds": seconds,
        "records_per_s": records / seconds,
        "mb_per_s": payload / seconds / 1e6,
    }


def values_to_end(consumer: Consumer, ends: dict[int, int]) -> Iterator[tuple[bytes | None, int]]:
    """(value, Kafka timestamp ms) of every record until each partition reached its end offset."""
    remaining = {p for p, end in ends.items() if end > 0}
    while remaining:
        # Batches as in read_ceiling, with the same short wait on the last partial batch.
        for message in consumer.consume(num_messages=10_000, timeout=0.05):
            if message.error():
                continue
            yield message.value(), message.timestamp()[1]
            if (message.offset() or 0) + 1 >= ends[message.partition() or 0]:
                remaining.discard(message.partition() or 0)


def read_work_ceiling(
    bootstrap: str, topic: str, geometry: WindowGeometry, rules: OrderRules
) -> dict[str, Any]:
    """A plain consumer doing the app's work on `topic`, start to end: the work-equivalent ceiling.

    Parse with exact decimals, validate, keep the first copy of each orderId, sum cents per window
    (bench/work_ceiling.py), in this one Python process, as fast as it goes.
    """
    consumer = ceiling_consumer(bootstrap, "bench-work-ceiling")
    try:
        ends = end_offsets(consumer, topic)
        started = time.monotonic()
        assign_from_beginning(consumer, topic)
        tally = tally_orders(values_to_end(consumer, ends), geometry, rules)
        seconds = time.monotonic() - started
    finally:
        consumer.close()
    return {**tally.summary(), "seconds": seconds, "records_per_s": tally.records / seconds}


def append_times(bootstrap: str, topic: str) -> tuple[dict[int, list[int]], dict[int, int]]:
    """Per partition: the append time (ms) of every record, and the first offset."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-times-{time.time_ns()}",
            "enable.auto.commit": False,
        }
    )
    firsts: dict[int, int] = {}
    try:
        partitions = partitions_of(consumer, topic)
        times: dict[int, list[int]] = {p: [] for p in partitions}
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30) for p in partitions}
        remaining = {p for p, (low, high) in ends.items() if high > low}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        while remaining:
            for message in consumer.consume(num_messages=10_000, timeout=5):
                if message.error():
                    continue
                partition, offset = message.partition() or 0, message.offset() or 0
                firsts.setdefault(partition, offset)
                times[partition].append(message.timestamp()[1])
                if offset + 1 >= ends[partition][1]:
                    remaining.discard(partition)
    finally:
        consumer.close()
    return times, firsts


def committed_record_times(bootstrap: str, topic: str, idle_s: float = 5.0) -> list[int]:
    """The timestamps (ms) of every record of committed transactions in `topic` (read_committed),
    sorted. A transactional topic's high watermark counts the commit markers, which no consumer
    receives, so the read ends once the consumer's position has reached the watermarks taken at the
    start, or after `idle_s` without a record."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-committed-{time.time_ns()}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    times: list[int] = []
    try:
        ends = end_offsets(consumer, topic)
        assign_from_beginning(consumer, topic)
        last_record = time.monotonic()
        while time.monotonic() - last_record < idle_s:
            messages = consumer.consume(num_messages=10_000, timeout=1)
            for message in messages:
                if not message.error():
                    times.append(message.timestamp()[1])
            if messages:
                last_record = time.monotonic()
            positions = consumer.position([TopicPartition(topic, p) for p in ends])
            if all(tp.offset >= ends[tp.partition] for tp in positions):
                break
    finally:
        consumer.close()
    return sorted(times)
