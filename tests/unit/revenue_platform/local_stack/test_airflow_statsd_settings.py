"""The local stack's Airflow sends StatsD metrics to loopback on the configured port, or none when off."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from revenue_platform.errors import ConfigError
from revenue_platform.local_stack.airflow_local import AirflowLocalSettings, airflow_environment

LOOPBACK_CLIENT = "revenue_platform.local_stack.loopback_statsd.LoopbackStatsClient"


def _metrics_settings(env: dict[str, str]) -> dict[str, str]:
    return {name: value for name, value in env.items() if name.startswith("AIRFLOW__METRICS__")}


def test_statsd_is_on_by_default_to_loopback_port_8125_with_the_airflow_prefix(tmp_path: Path) -> None:
    env = airflow_environment(AirflowLocalSettings(home=tmp_path / "airflow"))
    assert _metrics_settings(env) == {
        "AIRFLOW__METRICS__STATSD_ON": "True",
        "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
        "AIRFLOW__METRICS__STATSD_PORT": "8125",
        "AIRFLOW__METRICS__STATSD_PREFIX": "airflow",
        "AIRFLOW__METRICS__STATSD_CUSTOM_CLIENT_PATH": LOOPBACK_CLIENT,
    }


@pytest.fixture
def settings_with_statsd_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Callable[[str], AirflowLocalSettings]:
    """The stack's settings as `make up` reads them, with AIRFLOW_STATSD_PORT set to the given value."""

    def read(raw: str) -> AirflowLocalSettings:
        monkeypatch.setenv("PLATFORM_STATE_DIR", str(tmp_path))
        monkeypatch.setenv("AIRFLOW_STATSD_PORT", raw)
        return AirflowLocalSettings.from_env("localhost:9092")

    return read


def test_the_statsd_port_comes_from_airflow_statsd_port(
    settings_with_statsd_port: Callable[[str], AirflowLocalSettings],
) -> None:
    settings = settings_with_statsd_port("9125")
    assert settings.statsd_port == 9125
    assert _metrics_settings(airflow_environment(settings)) == {
        "AIRFLOW__METRICS__STATSD_ON": "True",
        "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
        "AIRFLOW__METRICS__STATSD_PORT": "9125",
        "AIRFLOW__METRICS__STATSD_PREFIX": "airflow",
        "AIRFLOW__METRICS__STATSD_CUSTOM_CLIENT_PATH": LOOPBACK_CLIENT,
    }


def test_airflow_statsd_port_off_switches_the_metrics_off(
    settings_with_statsd_port: Callable[[str], AirflowLocalSettings],
) -> None:
    settings = settings_with_statsd_port("off")
    assert settings.statsd_port is None
    # Said explicitly, so an airflow.cfg in AIRFLOW_HOME cannot switch them back on.
    assert _metrics_settings(airflow_environment(settings)) == {"AIRFLOW__METRICS__STATSD_ON": "False"}


@pytest.mark.parametrize("raw", ["", "0", "65536", "8125x", "on"])
def test_a_bad_airflow_statsd_port_is_refused_naming_the_variable(
    raw: str, settings_with_statsd_port: Callable[[str], AirflowLocalSettings]
) -> None:
    with pytest.raises(ConfigError, match="AIRFLOW_STATSD_PORT"):
        settings_with_statsd_port(raw)


def test_the_stacks_statsd_client_sends_from_a_loopback_socket() -> None:
    """What Airflow loads (`statsd_custom_client_path`): a StatsClient whose socket is bound to loopback
    before it sends, so it receives on no other interface; a plain client's gets a port on all of them."""
    import importlib
    import os
    import socket

    from statsd import StatsClient

    from revenue_platform.processes import listening_sockets

    module, name = LOOPBACK_CLIENT.rsplit(".", 1)
    client_class = getattr(importlib.import_module(module), name)
    assert issubclass(client_class, StatsClient), "Airflow refuses any other custom client"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as collector:
        collector.bind(("127.0.0.1", 0))
        port = collector.getsockname()[1]
        ours, plain = client_class("127.0.0.1", port, "airflow"), StatsClient("127.0.0.1", port, "airflow")
        try:
            ours.incr("scheduler_heartbeat")
            plain.incr("scheduler_heartbeat")
            collector.settimeout(5)
            assert {collector.recv(512), collector.recv(512)} == {b"airflow.scheduler_heartbeat:1|c"}
            bound = {s.port: s.loopback_only for s in listening_sockets([os.getpid()], "udp")}
            assert bound[ours._sock.getsockname()[1]] is True
            assert bound[plain._sock.getsockname()[1]] is False, "the check can tell them apart"
        finally:
            ours.close()
            plain.close()
