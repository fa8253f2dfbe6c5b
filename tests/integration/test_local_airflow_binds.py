"""Local Airflow as `make up` starts it listens on loopback only: API server yes, log servers not at all;
and it sends its own StatsD metrics to the configured loopback port.

A real `airflow standalone` (through `LocalAirflow`, the same code `make up` runs) with its own home
and port; every TCP socket its process group listens on is read from /proc. The log-server ports
are moved to free ports of their own, so a log server that did start (an Airflow upgrade that
ignores `--skip-serve-logs`) would show up here instead of colliding with another stack's. A UDP
socket of the test's own, on a free loopback port given as the StatsD port, receives the metrics.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator

import pytest

from revenue_platform import processes
from revenue_platform.local_stack.airflow_local import AirflowLocalSettings, LocalAirflow


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def statsd_listener() -> Iterator[socket.socket]:
    """A UDP socket on a free 127.0.0.1 port, standing in for statsd_exporter."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as listener:
        listener.bind(("127.0.0.1", 0))
        yield listener


@pytest.fixture(scope="module")
def running_airflow(
    tmp_path_factory: pytest.TempPathFactory, statsd_listener: socket.socket
) -> Iterator[tuple[LocalAirflow, set[int]]]:
    state = tmp_path_factory.mktemp("airflow-binds")
    settings = AirflowLocalSettings(
        home=state / "airflow",
        port=int(os.environ.get("TEST_AIRFLOW_PORT", "18080")),
        kafka_bootstrap_servers="localhost:1",
        secrets_dir=state / "secrets",
        statsd_port=statsd_listener.getsockname()[1],
    )
    worker_port, trigger_port = _free_port(), _free_port()
    airflow = LocalAirflow(settings)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT", str(worker_port))
        patch.setenv("AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT", str(trigger_port))
        try:
            airflow.start(timeout_s=420)
            yield airflow, {worker_port, trigger_port}
        finally:
            airflow.stop()


def _group_of(airflow: LocalAirflow) -> list[int]:
    pid = airflow.pid()
    assert pid is not None, "local Airflow is not running"
    return processes.group_members(os.getpgid(pid))


def test_every_socket_of_the_local_airflow_listens_on_loopback(
    running_airflow: tuple[LocalAirflow, set[int]],
) -> None:
    airflow, log_server_ports = running_airflow
    listening = processes.listening_sockets(_group_of(airflow))
    # The check has something to look at: the API server is in the group and its socket is found.
    assert any(s.port == airflow.settings.port for s in listening), listening
    assert [s for s in listening if not s.loopback_only] == []
    assert {s.port for s in listening} & log_server_ports == set(), "a log server was started"


def test_the_scheduler_and_triggerer_run_without_log_servers(
    running_airflow: tuple[LocalAirflow, set[int]],
) -> None:
    airflow, _ = running_airflow
    commands = [processes.cmdline(member) for member in _group_of(airflow)]
    for component in ("scheduler", "triggerer"):
        assert any(f"airflow {component} --skip-serve-logs" in c for c in commands), commands
    # The log server renames its process "airflow serve-logs".
    assert not any(c.strip() == "airflow serve-logs" for c in commands), commands


def test_the_scheduler_sends_its_heartbeat_to_the_statsd_port(
    running_airflow: tuple[LocalAirflow, set[int]], statsd_listener: socket.socket
) -> None:
    # The scheduler counts a heartbeat every few seconds ([scheduler] scheduler_heartbeat_sec, 5).
    heartbeat = "airflow.scheduler_heartbeat:1|c"
    deadline = time.monotonic() + 60
    received: list[str] = []
    while heartbeat not in received and time.monotonic() < deadline:
        statsd_listener.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            received.append(statsd_listener.recv(65535).decode())
        except TimeoutError:
            break
    assert heartbeat in received, f"no {heartbeat} in 60 s; received {sorted(set(received))[:40]}"
    # The senders' own sockets are bound to loopback too (a plain StatsD client's receive everywhere).
    airflow, _ = running_airflow
    senders = processes.listening_sockets(_group_of(airflow), "udp")
    assert senders, "the scheduler sent from a socket of the group"
    assert [s for s in senders if not s.loopback_only] == []
