"""Jar bookkeeping, the order validator's javac build and local-stack settings (no long-running processes)."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest

from revenue_platform.errors import ConfigError, PrerequisiteError
from revenue_platform.local_stack.airflow_local import (
    AirflowLocalSettings,
    airflow_environment,
    connection_env,
)
from revenue_platform.local_stack.jvm import (
    artifact_name,
    build_order_validator,
    prune_jars_shipped_by_pyspark,
)
from revenue_platform.local_stack.kafka_broker import KafkaBrokerSettings, server_properties
from revenue_platform.paths import ORDER_VALIDATOR_SOURCE_DIR


@pytest.mark.parametrize(
    ("file_name", "artifact"),
    [
        ("jackson-core-2.13.5.jar", "jackson-core"),
        ("spark-sql-kafka-0-10_2.13-4.2.0.jar", "spark-sql-kafka-0-10_2.13"),
        ("delta-spark_4.2_2.13-4.4.0.jar", "delta-spark_4.2_2.13"),
        ("log4j-slf4j2-impl-2.25.3.jar", "log4j-slf4j2-impl"),
        ("zstd-jni-1.5.7-3.jar", "zstd-jni"),
    ],
)
def test_artifact_name_strips_only_the_version(file_name: str, artifact: str) -> None:
    assert artifact_name(file_name) == artifact


def test_prune_keeps_only_jars_pyspark_lacks(tmp_path: Path) -> None:
    fetched, shipped = tmp_path / "fetched", tmp_path / "shipped"
    fetched.mkdir()
    shipped.mkdir()
    for name in (
        "jackson-core-2.13.5.jar",
        "kafka-clients-3.9.2.jar",
        "slf4j-api-1.7.36.jar",
        "delta-spark_4.2_2.13-4.4.0.jar",
    ):
        (fetched / name).touch()
    (shipped / "jackson-core-2.18.2.jar").touch()

    removed = prune_jars_shipped_by_pyspark(fetched, shipped)

    assert sorted(removed) == ["jackson-core-2.13.5.jar", "slf4j-api-1.7.36.jar"]
    assert sorted(p.name for p in fetched.iterdir()) == [
        "delta-spark_4.2_2.13-4.4.0.jar",
        "kafka-clients-3.9.2.jar",
    ]


@pytest.mark.jvm  # javac
def test_the_order_validator_compiles_into_a_jar_and_is_rebuilt_only_when_its_source_changes(
    tmp_path: Path,
) -> None:
    jar = tmp_path / "spark-jars" / "order-validator.jar"
    assert build_order_validator(jar=jar)
    with zipfile.ZipFile(jar) as archive:
        assert "io/github/revenueplatform/validation/OrderFastPath.class" in archive.namelist()
    assert not build_order_validator(jar=jar), "up to date: not rebuilt"
    newest = max(source.stat().st_mtime for source in ORDER_VALIDATOR_SOURCE_DIR.rglob("*.java"))
    os.utime(jar, (newest - 10, newest - 10))
    assert build_order_validator(jar=jar), "a source newer than the jar rebuilds it"


@pytest.mark.jvm  # javac
def test_the_order_validator_build_names_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(PrerequisiteError, match="No Java sources"):
        build_order_validator(source_dir=tmp_path / "nothing", jar=tmp_path / "x.jar")
    broken = tmp_path / "src" / "Broken.java"
    broken.parent.mkdir()
    broken.write_text("public class Broken { int x = ; }\n")
    with pytest.raises(PrerequisiteError, match="javac could not compile"):
        build_order_validator(source_dir=broken.parent, jar=tmp_path / "x.jar")
    assert not (tmp_path / "x.jar").exists()


def test_broker_settings_from_env_reject_a_bad_port_naming_the_variable() -> None:
    with pytest.raises(ConfigError, match="KAFKA_PORT='ninety'"):
        KafkaBrokerSettings.from_env({"KAFKA_PORT": "ninety"})


def test_server_properties_are_single_node_kraft_on_the_configured_ports(tmp_path: Path) -> None:
    settings = KafkaBrokerSettings(port=19999, controller_port=19998, data_dir=tmp_path)
    properties = dict(line.split("=", 1) for line in server_properties(settings).splitlines())
    assert properties["process.roles"] == "broker,controller"
    assert properties["listeners"] == "PLAINTEXT://localhost:19999,CONTROLLER://localhost:19998"
    assert properties["controller.quorum.bootstrap.servers"] == "localhost:19998"
    assert properties["log.dirs"] == str(tmp_path / "data")
    assert properties["auto.create.topics.enable"] == "false"
    # Kafka's own retention (7 days) unless the settings ask for another.
    assert "log.retention.ms" not in properties


def test_a_broker_asked_to_keep_records_forever_sets_no_time_limit(tmp_path: Path) -> None:
    settings = KafkaBrokerSettings(data_dir=tmp_path, retention_ms=-1)
    properties = dict(line.split("=", 1) for line in server_properties(settings).splitlines())
    assert properties["log.retention.ms"] == "-1"


@pytest.mark.parametrize("retention_ms", [0, -2])
def test_a_retention_that_is_neither_forever_nor_positive_is_refused(
    tmp_path: Path, retention_ms: int
) -> None:
    with pytest.raises(ConfigError, match=f"retention_ms={retention_ms} is neither -1"):
        KafkaBrokerSettings(data_dir=tmp_path, retention_ms=retention_ms)


def test_a_sasl_broker_authenticates_its_client_listener_and_enforces_acls(tmp_path: Path) -> None:
    from revenue_platform.local_stack.kafka_broker import BrokerSasl, ScramUser

    sasl = BrokerSasl(admin=ScramUser("admin", "adm1n-pw"), users=(ScramUser("app", "app-pw"),))
    settings = KafkaBrokerSettings(port=19999, controller_port=19998, data_dir=tmp_path, sasl=sasl)
    properties = dict(line.split("=", 1) for line in server_properties(settings).splitlines())
    assert properties["listeners"] == "SASL_PLAINTEXT://localhost:19999,CONTROLLER://localhost:19998"
    assert properties["inter.broker.listener.name"] == "SASL_PLAINTEXT"
    assert properties["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert (
        'username="admin" password="adm1n-pw"'
        in properties["listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config"]
    )
    assert properties["authorizer.class.name"].endswith("StandardAuthorizer")
    assert properties["allow.everyone.if.no.acl.found"] == "false"
    assert properties["super.users"] == "User:admin"  # not ANONYMOUS, not the app
    assert (
        properties["listener.security.protocol.map"]
        == "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT"
    )
    assert "adm1n-pw" not in repr(settings)
    assert settings.admin_client_config()["sasl.username"] == "admin"
    assert KafkaBrokerSettings(data_dir=tmp_path).admin_client_config() == {
        "bootstrap.servers": "localhost:9092"
    }


def test_connections_come_from_env_with_the_configured_broker() -> None:
    env = connection_env("localhost:1234", "local[2]")
    assert '"bootstrap.servers": "localhost:1234"' in env["AIRFLOW_CONN_KAFKA_DEFAULT"]
    assert '"conn_type": "kafka"' in env["AIRFLOW_CONN_KAFKA_DEFAULT"]
    assert '"host": "local[2]"' in env["AIRFLOW_CONN_SPARK_DEFAULT"]


def test_airflow_environment_points_at_the_project(tmp_path: Path) -> None:
    env = airflow_environment(AirflowLocalSettings(home=tmp_path, port=18123))
    assert env["AIRFLOW_HOME"] == str(tmp_path)
    assert env["AIRFLOW__CORE__DAGS_FOLDER"].endswith("/dags")
    assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://localhost:18123/execution/"
    assert env["AIRFLOW__CORE__LOAD_EXAMPLES"] == "False"
