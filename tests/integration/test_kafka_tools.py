"""`make kafka CMD=...`: Kafka's own CLI tools (from Maven Central) against the test broker.

The lag a user reads with `kafka-consumer-groups --describe` is what the group committed: here a
real consumer commits 3 of 5 records, and the tool must report LAG 2 for that partition.
"""

from __future__ import annotations

import subprocess

import pytest
from confluent_kafka import Consumer, Producer

from revenue_platform.errors import ConfigError
from revenue_platform.local_stack.kafka_tools import TOOLS, kafka_tool_command
from tests.kafka_helpers import create_topics, unique_suffix

pytestmark = pytest.mark.integration


def _run(arguments: list[str], bootstrap: str) -> str:
    done = subprocess.run(
        kafka_tool_command(arguments, bootstrap), capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_topics_and_consumer_lag_in_kafkas_own_tools(kafka_bootstrap: str) -> None:
    topic, group = f"tools_{unique_suffix()}", f"tools_group_{unique_suffix()}"
    create_topics(kafka_bootstrap, {topic: 1})
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for index in range(5):
        producer.produce(topic, value=str(index).encode())
    producer.flush(30)
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        read = []
        while len(read) < 3:
            message = consumer.poll(10)
            assert message is not None, "no record within 10 s"
            read.append(message)
        consumer.commit(message=read[-1], asynchronous=False)
    finally:
        consumer.close()

    assert topic in _run(["kafka-topics", "--list"], kafka_bootstrap).split()
    described = _run(["kafka-consumer-groups", "--describe", "--group", group], kafka_bootstrap)
    row = next(line.split() for line in described.splitlines() if topic in line.split())
    header = next(line.split() for line in described.splitlines() if "LAG" in line.split())
    values = dict(zip(header, row, strict=False))
    assert (values["CURRENT-OFFSET"], values["LOG-END-OFFSET"], values["LAG"]) == ("3", "5", "2")
    # The console consumer reads what was produced (bounded by --max-messages).
    consumed = _run(
        [
            "kafka-console-consumer",
            "--topic",
            topic,
            "--from-beginning",
            "--max-messages",
            "5",
            "--timeout-ms",
            "30000",
        ],
        kafka_bootstrap,
    )
    assert consumed.split() == ["0", "1", "2", "3", "4"]


def test_an_unknown_tool_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="kafka-topics, kafka-consumer-groups"):
        kafka_tool_command(["kafka-server-start"], "localhost:1")
    assert set(TOOLS) >= {"kafka-topics", "kafka-consumer-groups", "kafka-console-consumer"}
