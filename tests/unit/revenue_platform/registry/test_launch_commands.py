"""Deploy request validation and the spark-submit commands built for client and cluster masters."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from revenue_platform.errors import ConfigError
from revenue_platform.local_object_store import ObjectStoreSettings
from revenue_platform.paths import ORDER_VALIDATOR_SOURCE_DIR, SPARK_APPS_DIR
from revenue_platform.streaming.deploy import DeployRequest, config_document, resolve_config
from revenue_platform.streaming.launcher import (
    NO_WAIT_CONF,
    SparkTarget,
    app_arguments,
    cluster_submit_command,
    parse_submission_id,
    py_files_bundle,
)
from revenue_platform.streaming.request import starting_overrides
from revenue_platform.streaming.stop import cluster_kill_command
from spark_apps import orders_streaming_app


def test_resolve_config_applies_overrides_bootstrap_and_registry_root() -> None:
    config = resolve_config(
        DeployRequest("green", app_version="1.2", config_overrides={"window.size": "1 minute"}),
        "/lake",
        "broker:9092",
    )
    assert (config.deployment_id, config.app_version, config.lake_root) == ("green", "1.2", "/lake")
    assert (config.registry_root, config.kafka.bootstrap_servers, config.window.size) == (
        "/lake",
        "broker:9092",
        "1 minute",
    )
    document, digest = config_document(config)
    assert "lease_token" not in json.loads(document)
    assert config_document(config)[1] == digest


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"window.size": "fifteen"}, "window.size"),
        ({"trigger.mode": "sometimes"}, "trigger.mode"),
        ({"kafka.no_such_field": 1}, "kafka.no_such_field"),
        ({"deployment_id": "other"}, "deployment_id"),
        ({"lease_token": "1-x"}, "lease_token"),
    ],
)
def test_a_bad_override_fails_naming_the_field(overrides: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        resolve_config(DeployRequest("blue", config_overrides=overrides), "/lake")


def test_starting_offsets() -> None:
    assert starting_overrides("latest") == {
        "kafka.starting_offsets": "latest",
        "kafka.starting_timestamp_ms": None,
    }
    assert starting_overrides("1767225600000") == {"kafka.starting_timestamp_ms": 1767225600000}
    with pytest.raises(ConfigError, match="starting_offsets"):
        starting_overrides("yesterday")
    config = resolve_config(DeployRequest("blue", starting_offsets="1767225600000"), "/lake")
    assert config.kafka.starting_timestamp_ms == 1767225600000


def test_a_bad_deployment_id_is_refused_before_anything_happens() -> None:
    with pytest.raises(ConfigError, match="deployment_id"):
        resolve_config(DeployRequest("Blue Prod"), "/lake")


def test_cluster_submission_does_not_wait_and_ships_code_and_config(tmp_path: Path) -> None:
    command = cluster_submit_command(
        SparkTarget("spark://master:7077", "cluster"),
        "/runs/config-1-a.json",
        "1-a",
        "s3a://lake",
        "/runs/app.zip",
    )
    assert command[command.index("--master") + 1] == "spark://master:7077"
    assert command[command.index("--deploy-mode") + 1] == "cluster"
    assert command[command.index("--py-files") + 1] == "/runs/app.zip"
    assert command[command.index("--files") + 1] == "/runs/config-1-a.json"
    for key, value in NO_WAIT_CONF.items():
        assert f"{key}={value}" in command
    app = next(i for i, part in enumerate(command) if part.endswith("orders_streaming_app.py"))
    assert command[app + 1 :] == app_arguments("config-1-a.json", "1-a", "s3a://lake")
    assert SparkTarget("local[2]").driver_kind == "local"
    assert SparkTarget("yarn", "client").driver_kind == "local"


def test_the_py_files_bundle_ships_the_python_of_spark_apps_and_not_its_java(tmp_path: Path) -> None:
    # spark_apps/jvm/ holds the Java the apps call inside Spark; it reaches drivers as a jar (--jars).
    assert any(ORDER_VALIDATOR_SOURCE_DIR.rglob("*.java"))
    assert ORDER_VALIDATOR_SOURCE_DIR.is_relative_to(SPARK_APPS_DIR)
    with zipfile.ZipFile(py_files_bundle(tmp_path)) as bundle:
        names = bundle.namelist()
    assert {"spark_apps/orders_streaming_app.py", "spark_apps/engine/micro_batch.py"} <= set(names)
    assert [name for name in names if not name.endswith(".py")] == []


def test_submission_ids_and_kill_command() -> None:
    assert parse_submission_id("... Driver successfully submitted as driver-20260501120000-0003") == (
        "driver-20260501120000-0003"
    )
    assert parse_submission_id("Submitted application application_1714561234567_0042") == (
        "application_1714561234567_0042"
    )
    assert parse_submission_id("nothing") is None
    assert cluster_kill_command("spark://m:7077", "driver-1")[-4:] == [
        "--master",
        "spark://m:7077",
        "--kill",
        "driver-1",
    ]


def test_the_app_refuses_a_lease_the_registry_did_not_issue(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lake = str(tmp_path / "lake")
    status = orders_streaming_app.main(
        ["--set", f"lake_root={lake}", "--set", "deployment_id=blue", "--lease-token", "7-forged"]
    )
    assert status == 3
    assert (
        "lease token '7-forged' of deployment 'blue' is not the registry's current token"
        in capsys.readouterr().err
    )


def test_cluster_deploy_mode_on_a_standalone_master_is_refused_with_the_fix() -> None:
    from revenue_platform.streaming.launcher import LaunchError, require_supported_deploy_mode

    with pytest.raises(LaunchError, match='"deploy-mode": "client"'):
        require_supported_deploy_mode(SparkTarget("spark://127.0.0.1:7077", "cluster"))
    require_supported_deploy_mode(SparkTarget("spark://127.0.0.1:7077", "client"))
    require_supported_deploy_mode(SparkTarget("yarn", "cluster"))
    require_supported_deploy_mode(SparkTarget("k8s://https://api:6443", "cluster"))


def test_the_connection_s_credentials_reach_a_driver_s_environment_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from revenue_platform.kafka_connection import KafkaConnectionConfigError, client_security
    from revenue_platform.spark_submit import spark_submit_command, spark_submit_env
    from revenue_platform.streaming.launcher import LaunchError, launch
    from spark_apps.contract.kafka_security import KAFKA_SECURITY_ENV

    security = client_security(
        {
            "bootstrap.servers": "broker:9093",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "platform",
            "sasl.password": "s3cret-pw",
        }
    )
    env = spark_submit_env(security)
    assert "s3cret-pw" in env[KAFKA_SECURITY_ENV]
    # A variable inherited from the launching process never leaks into a driver without credentials.
    monkeypatch.setenv(KAFKA_SECURITY_ENV, env[KAFKA_SECURITY_ENV])
    assert KAFKA_SECURITY_ENV not in spark_submit_env()
    command = spark_submit_command("orders_streaming_app.py", ["--config", "c.json"])
    assert not any("s3cret-pw" in part or "sasl" in part for part in command)

    # Cluster drivers would get their environment through --conf, i.e. the command line: refused.
    monkeypatch.setenv("PLATFORM_STATE_DIR", str(tmp_path))
    with pytest.raises(LaunchError, match="cluster-mode"):
        launch(SparkTarget("yarn", "cluster"), "blue", {}, "token", "/lake", security)
    assert not list(tmp_path.rglob("config-*")), "refused before the config file was written"

    with pytest.raises(KafkaConnectionConfigError, match=r"'kafka_default'.*sasl\.oauthbearer\.config"):
        client_security({"bootstrap.servers": "b:1", "sasl.oauthbearer.config": "x"})


def test_the_reprocess_job_s_login_is_returned_for_spark_submit_and_not_exported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import os

    from revenue_platform.kafka_connection import client_security_environment
    from spark_apps.contract.kafka_security import KAFKA_SECURITY_ENV, KafkaClientSecurity

    extra = {
        "bootstrap.servers": "broker:9093",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "platform",
        "sasl.password": "s3cret-pw",
    }
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_SECURED", json.dumps({"conn_type": "kafka", "extra": extra}))
    before = dict(os.environ)
    environment = client_security_environment("kafka_secured")
    assert dict(os.environ) == before
    login = KafkaClientSecurity.from_environment(environment)
    assert login is not None
    assert login.librdkafka_config()["sasl.password"] == "s3cret-pw"

    plaintext = {"conn_type": "kafka", "extra": {"bootstrap.servers": "broker:9092"}}
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_SECURED", json.dumps(plaintext))
    assert client_security_environment("kafka_secured") == {}
    assert KAFKA_SECURITY_ENV not in client_security_environment("no_such_connection")


def test_a_driver_of_a_lake_on_the_object_store_gets_s3a_and_its_login_in_its_environment_only(
    local_store: ObjectStoreSettings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from revenue_platform.streaming.launcher import LaunchError, lake_object_store_access, launch

    secret = json.loads(local_store.secrets_path.read_text())["secret_access_key"]

    on_store = lake_object_store_access({"lake_root": "s3a://lake/lake"}, "s3a://lake/lake")
    registry_on_store = lake_object_store_access({"lake_root": str(tmp_path / "lake")}, "s3a://lake/lake")
    local = lake_object_store_access({"lake_root": str(tmp_path / "lake")}, str(tmp_path / "lake"))

    assert on_store == registry_on_store
    assert on_store.conf["spark.hadoop.fs.s3a.endpoint"] == local_store.endpoint_url
    assert on_store.environment["AWS_SECRET_ACCESS_KEY"] == secret
    assert (local.jars, local.conf, local.environment) == ((), {}, {})
    # A cluster driver would get the login through --conf, i.e. the command line: refused.
    monkeypatch.setenv("PLATFORM_STATE_DIR", str(tmp_path))
    with pytest.raises(LaunchError, match=r"object store.*cluster-mode"):
        launch(
            SparkTarget("yarn", "cluster"),
            "blue",
            {"lake_root": "s3a://lake/lake"},
            "token",
            "s3a://lake/lake",
        )
    assert not list(tmp_path.rglob("config-*")), "refused before the config file was written"
