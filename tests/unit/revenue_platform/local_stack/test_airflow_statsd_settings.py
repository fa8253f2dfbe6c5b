"""The local stack's Airflow sends StatsD metrics to loopback on the configured port, or none when off."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from revenue_platform.errors import ConfigError
from revenue_platform.local_stack.airflow_local import AirflowLocalSettings, airflow_environment


def _metrics_settings(env: dict[str, str]) -> dict[str, str]:
    return {name: value for name, value in env.items() if name.startswith("AIRFLOW__METRICS__")}


def test_statsd_is_on_by_default_to_loopback_port_8125_with_the_airflow_prefix(tmp_path: Path) -> None:
    env = airflow_environment(AirflowLocalSettings(home=tmp_path / "airflow"))
    assert _metrics_settings(env) == {
        "AIRFLOW__METRICS__STATSD_ON": "True",
        "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
        "AIRFLOW__METRICS__STATSD_PORT": "8125",
        "AIRFLOW__METRICS__STATSD_PREFIX": "airflow",
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
