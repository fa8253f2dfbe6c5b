"""Small Kafka helpers for tests: create topics, read a whole topic back, collect a client's log."""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass
from decimal import Decimal

from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


class ClientLog(logging.Handler):
    """What a librdkafka client logs (its `logger` setting), line by line; served on the client's poll."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []
        self.logger = logging.getLogger(f"test.librdkafka.{uuid.uuid4().hex[:8]}")
        self.logger.addHandler(self)
        self.logger.propagate = False

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@dataclass(frozen=True)
class ConsumedRecord:
    key: bytes | None
    value: bytes | None
    headers: dict[str, bytes]
    partition: int
    offset: int


def create_topics(
    bootstrap: str,
    topics: dict[str, int],
    configs: dict[str, dict[str, str]] | None = None,
    client_config: dict[str, str] | None = None,
) -> None:
    """Create `topics` (name -> partitions) and wait for it; existing topics are an error.

    `client_config`: extra librdkafka settings, e.g. the SASL login of a secured test broker.
    """
    admin = AdminClient({**(client_config or {}), "bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [
            NewTopic(name, partitions, 1, config=(configs or {}).get(name, {}))
            for name, partitions in topics.items()
        ]
    )
    for future in futures.values():
        future.result(timeout=30)


def unique_suffix() -> str:
    return uuid.uuid4().hex[:8]


def read_topic(bootstrap: str, topic: str, timeout_s: float = 30.0) -> list[ConsumedRecord]:
    """Every record currently in `topic`, read from the beginning up to the high watermarks."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-reader-{unique_suffix()}",
            "enable.auto.commit": False,
            # A transactional topic (the revenue topic) ends in commit markers no poll returns:
            # the end of a partition is librdkafka's end-of-partition event, not its last record.
            "enable.partition.eof": True,
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=timeout_s)
        partitions = list(metadata.topics[topic].partitions)
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)[1]
            for p in partitions
        }
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        records: list[ConsumedRecord] = []
        remaining = {p for p, end in ends.items() if end > 0}
        while remaining:
            message = consumer.poll(timeout_s)
            assert message is not None, f"timed out reading {topic}; still waiting on partitions {remaining}"
            error = message.error()
            if error is not None and error.code() == KafkaError._PARTITION_EOF:
                if message.offset() >= ends[message.partition()]:
                    remaining.discard(message.partition())
                continue
            assert error is None, error
            records.append(
                ConsumedRecord(
                    message.key(),
                    message.value(),
                    dict(message.headers() or []),
                    message.partition(),
                    message.offset(),
                )
            )
            if message.offset() + 1 >= ends[message.partition()]:
                remaining.discard(message.partition())
        return records
    finally:
        consumer.close()


APP_TOPIC_FIELDS = {
    "orders_topic": "orders",
    "stores_topic": "stores",
    "dlq_topic": "orders_dlq",
    "general_orders_topic": "general_orders",
    "restaurant_orders_topic": "restaurant_orders",
    "revenue_topic": "revenue_windows",
}
COMPACTED_APP_TOPICS = ("stores", "revenue_windows")


def app_topic_overrides(suffix: str) -> dict[str, str]:
    """Streaming-app config overrides that point every topic at a test-private `<name>_<suffix>`."""
    return {f"kafka.{field}": f"{base}_{suffix}" for field, base in APP_TOPIC_FIELDS.items()}


def create_app_topics(
    bootstrap: str,
    suffix: str,
    orders_partitions: int = 2,
    other_partitions: int = 1,
    client_config: dict[str, str] | None = None,
    broker_stamped: bool = False,
) -> None:
    """Create the app topics for `suffix` (stores and revenue compacted like include/topics/).
    `broker_stamped`: orders and stores are LogAppendTime, as include/topics/ declares them (a live
    test's event times then follow the broker's clock); otherwise Kafka's default, CreateTime, so a
    test may stamp records with the dates of its fixtures."""
    configs: dict[str, dict[str, str]] = {}
    for base in APP_TOPIC_FIELDS.values():
        config = {"cleanup.policy": "compact"} if base in COMPACTED_APP_TOPICS else {}
        if broker_stamped and base in ("orders", "stores"):
            config["message.timestamp.type"] = "LogAppendTime"
        configs[f"{base}_{suffix}"] = config
    create_topics(
        bootstrap,
        {
            f"{base}_{suffix}": orders_partitions if base == "orders" else other_partitions
            for base in APP_TOPIC_FIELDS.values()
        },
        configs=configs,
        client_config=client_config,
    )


def latest_revenue(bootstrap: str, topic: str) -> dict[str, tuple[int, Decimal]]:
    """The revenue topic as a compacted reader sees it: the latest (order count, revenue) per window
    key (`location|type|start`); a key whose latest record is a tombstone is absent."""
    latest: dict[str, bytes | None] = {}
    for record in read_topic(bootstrap, topic):
        latest[(record.key or b"").decode()] = record.value
    return {
        key: (value["order_count"], Decimal(str(value["revenue"])))
        for key, raw in latest.items()
        if raw is not None
        for value in [json.loads(raw, parse_float=Decimal)]
    }
