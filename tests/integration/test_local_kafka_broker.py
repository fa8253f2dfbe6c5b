"""The local broker's lifecycle, on its own ports beside the session broker."""

from __future__ import annotations

import time
from pathlib import Path

import psutil
import pytest
from confluent_kafka import Consumer, TopicPartition

from revenue_platform import processes
from revenue_platform.errors import PrerequisiteError
from revenue_platform.local_stack.kafka_broker import (
    FIRST_RETENTION_CHECK_MS,
    RETENTION_CHECK_INTERVAL_MS,
    KafkaBrokerSettings,
    LocalKafkaBroker,
    broker_answers_metadata,
)
from revenue_platform.local_stack.service_jit import SERVICES_JIT_ENV, service_jit_options
from revenue_platform.orders_generator import GeneratedRecord, produce
from tests.kafka_helpers import create_topics, read_topic, unique_suffix

pytestmark = pytest.mark.integration


def test_start_and_stop_are_idempotent_and_leave_nothing_running(tmp_path: Path) -> None:
    broker = LocalKafkaBroker(
        KafkaBrokerSettings(port=19192, controller_port=19193, data_dir=tmp_path / "kafka")
    )
    messages: list[str] = []
    try:
        broker.start(progress=messages.append)
        first_pid = broker.pid()
        assert first_pid is not None
        assert broker_answers_metadata("localhost:19192")
        assert (tmp_path / "kafka" / "data" / "meta.properties").exists()

        broker.start(progress=messages.append)
        assert broker.pid() == first_pid
        assert any("already running" in message for message in messages)
    finally:
        broker.stop(progress=messages.append)

    assert broker.pid() is None
    assert not processes.is_alive(first_pid)
    assert not broker_answers_metadata("localhost:19192", timeout_s=1)
    broker.stop(progress=messages.append)
    assert messages[-1] == "[kafka] not running"


def test_a_port_in_use_is_reported_before_starting(kafka_bootstrap: str, tmp_path: Path) -> None:
    taken_port = int(kafka_bootstrap.rsplit(":", 1)[1])
    broker = LocalKafkaBroker(KafkaBrokerSettings(port=taken_port, controller_port=19195, data_dir=tmp_path))
    with pytest.raises(PrerequisiteError, match=f"Port {taken_port} is already in use"):
        broker.start()
    assert broker.pid() is None


def test_the_test_broker_keeps_records_dated_a_year_before_the_run(
    kafka_bootstrap: str, kafka_broker_pid: int
) -> None:
    """Fixtures carry fixed event times as Kafka timestamps (CreateTime). On a broker with Kafka's
    default 7-day retention, a week after those dates every retention check deletes them within
    seconds of the produce (CI went red that way on 2026-11-29). The test broker keeps them."""
    topic = f"retention_guard_{unique_suffix()}"
    create_topics(kafka_bootstrap, {topic: 1})  # the broker's default topic settings
    a_year_ago_ms = int((time.time() - 365 * 86400) * 1000)
    records = [
        GeneratedRecord(key=f"k{i}".encode(), value=f"v{i}".encode(), timestamp_ms=a_year_ago_ms + i)
        for i in range(20)
    ]
    assert produce(kafka_bootstrap, topic, records) == len(records)
    # Past two retention checks after the produce (the first comes FIRST_RETENTION_CHECK_MS after the
    # broker's start): on a broker with a time limit the segment is gone by then.
    first_check = psutil.Process(kafka_broker_pid).create_time() + FIRST_RETENTION_CHECK_MS / 1000
    checked_twice = max(time.time(), first_check) + 2 * RETENTION_CHECK_INTERVAL_MS / 1000 + 1
    time.sleep(max(0.0, checked_twice - time.time()))
    low, high = _watermarks(kafka_bootstrap, topic)
    assert (low, high) == (0, len(records)), f"the broker deleted the records before offset {low}"
    assert [r.value for r in read_topic(kafka_bootstrap, topic)] == [r.value for r in records]


def _watermarks(bootstrap: str, topic: str) -> tuple[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"guard-{unique_suffix()}"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        return int(low), int(high)
    finally:
        consumer.close()


def test_the_session_s_broker_runs_on_the_jit_the_session_gives_its_services(kafka_broker_pid: int) -> None:
    """tests/conftest.py keeps the services a test session starts on the JIT's first tier
    (STACK_SERVICES_JIT=c1): the running broker's JVM has the option."""
    options = service_jit_options()
    assert options == ["-XX:TieredStopAtLevel=1"], f"{SERVICES_JIT_ENV} of this session: {options}"
    assert set(options) <= set(processes.cmdline(kafka_broker_pid).split())
