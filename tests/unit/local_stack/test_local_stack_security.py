"""The local stack is closed by default: loopback binds, a generated login, full-strength secrets."""

from __future__ import annotations

import base64
import json
import stat
from pathlib import Path

import pytest

from revenue_platform.local_stack.airflow_local import (
    LOCAL_ADMIN_USER,
    AirflowLocalSettings,
    airflow_environment,
    local_admin_password,
    signing_secrets,
)
from revenue_platform.spark_submit import spark_submit_command
from spark_apps.session import loopback_driver_conf


def _settings(tmp_path: Path) -> AirflowLocalSettings:
    return AirflowLocalSettings(home=tmp_path / "airflow", port=18999, kafka_bootstrap_servers="localhost:1")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_api_server_listens_on_loopback_unless_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = airflow_environment(_settings(tmp_path))
    assert env["AIRFLOW__API__HOST"] == "127.0.0.1"

    monkeypatch.setenv("PLATFORM_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("AIRFLOW_HOST", raising=False)
    assert AirflowLocalSettings.from_env("localhost:1").host == "127.0.0.1"
    monkeypatch.setenv("AIRFLOW_HOST", "0.0.0.0")
    opened = AirflowLocalSettings.from_env("localhost:1")
    assert airflow_environment(opened)["AIRFLOW__API__HOST"] == "0.0.0.0"


def test_the_admin_password_is_generated_once_into_a_0600_file(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    env = airflow_environment(settings)

    passwords = Path(env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"])
    assert passwords == tmp_path / "secrets" / "airflow_passwords.json"
    assert _mode(passwords) == 0o600
    stored = json.loads(passwords.read_text())
    password = stored[LOCAL_ADMIN_USER]
    assert password != "admin"
    assert len(password) >= 32
    assert local_admin_password(settings) == password, "generated once, then reused"
    airflow_environment(settings)
    assert json.loads(passwords.read_text()) == stored
    # Another stack (another state dir) gets its own password.
    assert local_admin_password(_settings(tmp_path / "other")) != password


def test_signing_secrets_are_at_least_64_bytes_shared_by_every_component_and_0600(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    env = airflow_environment(settings)

    secrets_file = tmp_path / "secrets" / "airflow_signing_secrets.json"
    assert _mode(secrets_file) == 0o600
    for variable, name in (
        ("AIRFLOW__API_AUTH__JWT_SECRET", "jwt_secret"),
        ("AIRFLOW__API__SECRET_KEY", "secret_key"),
    ):
        value = env[variable]
        assert value == signing_secrets(settings)[name]
        assert len(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))) >= 64
    assert env["AIRFLOW__API_AUTH__JWT_SECRET"] != env["AIRFLOW__API__SECRET_KEY"]
    assert (
        airflow_environment(settings)["AIRFLOW__API_AUTH__JWT_SECRET"] == env["AIRFLOW__API_AUTH__JWT_SECRET"]
    )


def test_a_world_readable_passwords_file_from_an_older_version_is_tightened(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    settings.passwords_file.parent.mkdir(parents=True)
    settings.passwords_file.write_text(json.dumps({LOCAL_ADMIN_USER: "kept-as-it-was"}))
    settings.passwords_file.chmod(0o644)

    assert local_admin_password(settings) == "kept-as-it-was"
    assert _mode(settings.passwords_file) == 0o600


def test_local_spark_drivers_bind_loopback_and_cluster_masters_are_left_alone() -> None:
    assert loopback_driver_conf("local[2]") == {
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
    }
    assert loopback_driver_conf("spark://cluster:7077") == {}
    # `make cluster-up`'s master is on this machine's loopback: so are its executors and the driver.
    assert loopback_driver_conf("spark://127.0.0.1:7077") == {
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
    }
    local = spark_submit_command("orders_streaming_app.py", [], master="local[*]")
    assert "spark.driver.bindAddress=127.0.0.1" in local
    assert "spark.driver.host=127.0.0.1" in local
    cluster = spark_submit_command("orders_streaming_app.py", [], master="yarn")
    assert not any(part.startswith("spark.driver.bindAddress") for part in cluster)
