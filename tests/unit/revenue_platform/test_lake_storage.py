"""The one place that turns "the lake is on an object store" into Spark's and delta-rs's settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from revenue_platform.errors import ConfigError
from revenue_platform.lake_storage import (
    delta_storage_options,
    lake_object_store,
    object_store_from_connection_fields,
    spark_object_store_access,
)
from revenue_platform.local_object_store import ObjectStoreSettings
from revenue_platform.spark_submit import spark_submit_command, spark_submit_env

SECRET = "connection-secret-value"


def test_a_local_lake_needs_nothing_added(local_store: ObjectStoreSettings, tmp_path: Path) -> None:
    root = str(tmp_path / "lake")

    assert lake_object_store(root) is None
    assert delta_storage_options(root) == {}
    access = spark_object_store_access(root)
    assert (access.jars, access.conf, access.environment) == ((), {}, {})


def test_a_lake_on_the_local_store_uses_its_generated_credentials(local_store: ObjectStoreSettings) -> None:
    credentials = json.loads(local_store.secrets_path.read_text())

    options = delta_storage_options("s3a://lake/lake")

    assert options["AWS_ENDPOINT_URL"] == "http://127.0.0.1:19499"
    assert options["AWS_SECRET_ACCESS_KEY"] == credentials["secret_access_key"]
    assert local_store.secrets_path.stat().st_mode & 0o777 == 0o600


def test_spark_submit_gets_s3a_jars_and_settings_and_credentials_only_in_its_environment(
    local_store: ObjectStoreSettings,
) -> None:
    secret = json.loads(local_store.secrets_path.read_text())["secret_access_key"]
    access = spark_object_store_access("s3a://lake/lake")

    command = spark_submit_command("orders_streaming_app.py", ["--config", "c.json"], object_store=access)
    environment = spark_submit_env(object_store=access)

    jars = command[command.index("--jars") + 1]
    assert "hadoop-aws-" in jars
    assert "spark.hadoop.fs.s3a.endpoint=http://127.0.0.1:19499" in command
    assert not [part for part in command if secret in part]
    assert secret not in repr(access)
    assert environment["AWS_SECRET_ACCESS_KEY"] == secret


def test_spark_submit_of_a_local_lake_is_unchanged(local_store: ObjectStoreSettings, tmp_path: Path) -> None:
    access = spark_object_store_access(str(tmp_path / "lake"))

    command = spark_submit_command("orders_streaming_app.py", [], object_store=access)

    assert command == spark_submit_command("orders_streaming_app.py", [])
    assert "hadoop-aws-" not in command[command.index("--jars") + 1]


def test_an_object_store_lake_without_a_store_says_how_to_get_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AIRFLOW_CONN_LAKE_OBJECT_STORE", raising=False)
    monkeypatch.delenv("AIRFLOW_HOME", raising=False)
    monkeypatch.setenv("OBJECT_STORE_DATA_DIR", str(tmp_path / "never-started"))

    with pytest.raises(ConfigError, match=r"lake_object_store.*make objectstore-up"):
        lake_object_store("s3a://lake/lake")


def test_a_connection_describes_a_teams_store() -> None:
    store = object_store_from_connection_fields(
        "AKIDEXAMPLE",
        SECRET,
        {"endpoint_url": "https://s3.eu-west-1.amazonaws.com", "region_name": "eu-west-1"},
    )

    assert store.region == "eu-west-1"
    assert store.delta_rs_storage_options()["AWS_SECRET_ACCESS_KEY"] == SECRET


def test_an_incomplete_connection_names_what_is_missing_without_the_secret() -> None:
    with pytest.raises(ConfigError, match=r"'lake_object_store'.*endpoint_url") as raised:
        object_store_from_connection_fields("AKIDEXAMPLE", SECRET, {})

    assert SECRET not in str(raised.value)
