"""The local broker's lifecycle, on its own ports beside the session broker."""

from __future__ import annotations

from pathlib import Path

import pytest

from revenue_platform import processes
from revenue_platform.errors import PrerequisiteError
from revenue_platform.local_stack.kafka_broker import (
    KafkaBrokerSettings,
    LocalKafkaBroker,
    broker_answers_metadata,
)

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
