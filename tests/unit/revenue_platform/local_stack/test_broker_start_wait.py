"""Waiting for a broker this process just started: judged by that child, never left behind."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from revenue_platform import processes
from revenue_platform.errors import BrokerUnreachableError, PrerequisiteError
from revenue_platform.local_stack.kafka_broker import KafkaBrokerSettings, LocalKafkaBroker
from tests.port_helpers import free_loopback_port


def _broker(tmp_path: Path) -> LocalKafkaBroker:
    # Nothing listens on these ports: the broker never answers.
    return LocalKafkaBroker(
        KafkaBrokerSettings(
            port=free_loopback_port(), controller_port=free_loopback_port(), data_dir=tmp_path
        )
    )


def _spawn(broker: LocalKafkaBroker, seconds: float) -> int:
    # A stand-in child whose command line is not the broker's: its pid file alone would call it gone.
    return processes.spawn_detached(
        [sys.executable, "-c", f"import time; time.sleep({seconds})"], broker.pid_path, broker.log_path
    )


def test_a_spawned_broker_that_is_still_starting_is_waited_for_not_called_exited(tmp_path: Path) -> None:
    broker = _broker(tmp_path)
    spawned = _spawn(broker, 30)
    try:
        assert broker.pid() is None  # what made a slow start look like an exit
        with pytest.raises(BrokerUnreachableError, match="did not answer within"):
            broker.wait_until_ready(1.0, lambda _: None, spawned)
    finally:
        processes.terminate(spawned, 5.0)


def test_a_spawned_broker_that_exits_is_reported_with_its_log(tmp_path: Path) -> None:
    broker = _broker(tmp_path)
    spawned = _spawn(broker, 0)
    deadline = time.monotonic() + 10
    while processes.is_alive(spawned) and time.monotonic() < deadline:
        time.sleep(0.05)
    with pytest.raises(PrerequisiteError, match="exited during start-up"):
        broker.wait_until_ready(5.0, lambda _: None, spawned)


def test_a_start_that_fails_stops_the_broker_it_spawned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = _broker(tmp_path)
    spawned: list[int] = []
    spawn_detached = processes.spawn_detached

    def spawn_stand_in(command: list[str], pid_path: Path, log_path: Path) -> int:
        sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
        spawned.append(spawn_detached(sleeper, pid_path, log_path))
        return spawned[-1]

    monkeypatch.setattr(processes, "spawn_detached", spawn_stand_in)
    monkeypatch.setattr(LocalKafkaBroker, "_format_storage_once", lambda self: None)
    monkeypatch.setattr(
        "revenue_platform.local_stack.kafka_broker.require_java", lambda *args, **kwargs: None
    )
    with pytest.raises(BrokerUnreachableError):
        broker.start(timeout_s=1.0, progress=lambda _: None)
    assert not processes.is_alive(spawned[0]), "the broker that never answered was left running"
    assert not broker.pid_path.exists()


def test_a_stopped_broker_found_running_is_reported_at_once_with_the_fix_and_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broker paused with SIGSTOP holds its ports and answers nothing: the start used to wait its
    whole timeout for it (90 s by default), then blame the broker's log."""
    broker = _broker(tmp_path)
    stopped = _spawn(broker, 60)
    try:
        os.kill(stopped, signal.SIGSTOP)
        deadline = time.monotonic() + 10
        while not processes.is_stopped(stopped):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        # Found running: its pid file names it (the stand-in's command line is not the broker's).
        monkeypatch.setattr(LocalKafkaBroker, "pid", lambda self: stopped)
        started = time.monotonic()
        with pytest.raises(PrerequisiteError, match=rf"pid {stopped}\) is stopped.*kill -CONT {stopped}"):
            broker.start(timeout_s=60.0, progress=lambda _: None)
        assert time.monotonic() - started < 30  # not the start's 60 s timeout
        assert processes.is_alive(stopped), "a broker the start did not spawn was ended"
        assert broker.pid_path.exists()
    finally:
        os.kill(stopped, signal.SIGCONT)
        processes.terminate(stopped, 5.0)
