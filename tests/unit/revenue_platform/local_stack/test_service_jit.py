"""STACK_SERVICES_JIT reaches every JVM the stack starts (broker, Kafka tools, object store, the cluster's
daemons and the executors its workers start) and nothing else; a bad value is refused naming the variable,
before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from revenue_platform.errors import ConfigError
from revenue_platform.local_object_store import ObjectStoreSettings
from revenue_platform.local_stack.cluster import ClusterSettings, LocalCluster
from revenue_platform.local_stack.kafka_broker import KafkaBrokerSettings, LocalKafkaBroker
from revenue_platform.local_stack.kafka_tools import kafka_tool_command
from revenue_platform.local_stack.object_store import LocalObjectStore
from revenue_platform.local_stack.service_jit import SERVICES_JIT_ENV, service_jit_options

C1_ONLY = "-XX:TieredStopAtLevel=1"


def _service_commands(tmp_path: Path) -> dict[str, list[str]]:
    """The java command line of each kind of service JVM, built from jar folders that name the jars."""
    broker_jars, tools_jars, store_jars = (tmp_path / name for name in ("broker", "tools", "store"))
    for folder, jar in ((broker_jars, "kafka_2.13-4.3.0.jar"), (tools_jars, "kafka-tools-4.3.0.jar")):
        folder.mkdir()
        (folder / jar).touch()
    store_jars.mkdir()
    (store_jars / "s3proxy-3.0.0.jar").touch()
    broker = LocalKafkaBroker(KafkaBrokerSettings(data_dir=tmp_path / "kafka", jars_dir=broker_jars))
    store = LocalObjectStore(ObjectStoreSettings(data_dir=tmp_path / "store", jars_dir=store_jars))
    return {
        "broker": broker._java("kafka.Kafka", "server.properties"),
        "kafka tool": kafka_tool_command(["kafka-topics", "--list"], "127.0.0.1:9092", jars_dir=tools_jars),
        "object store": store._command(),
    }


def _daemon_java_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[str]]:
    """The cluster daemons' JVM options, and the options every JVM a worker starts (its executors)
    reads from the worker's environment."""
    monkeypatch.setenv("PLATFORM_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("CLUSTER_BASE_PORT", "23600")
    monkeypatch.setenv("CLUSTER_LAKE", "local")
    cluster = LocalCluster(ClusterSettings.from_env())
    daemon_env = cluster._daemon_env()
    worker_env = cluster.worker_env(0, daemon_env)
    return daemon_env["SPARK_DAEMON_JAVA_OPTS"].split(), worker_env.get("JAVA_TOOL_OPTIONS", "").split()


def test_unset_or_tiered_keeps_the_jdk_default_for_every_service(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SPARK_DAEMON_JAVA_OPTS", raising=False)
    for unset_or_default in ("", "tiered", " tiered "):
        monkeypatch.setenv(SERVICES_JIT_ENV, unset_or_default)
        assert service_jit_options() == []
    monkeypatch.delenv(SERVICES_JIT_ENV)
    assert service_jit_options() == []
    for service, command in _service_commands(tmp_path).items():
        assert command[0] == "java"
        assert C1_ONLY not in command, service
    monkeypatch.delenv("JAVA_TOOL_OPTIONS", raising=False)
    assert _daemon_java_options(tmp_path, monkeypatch) == ([], [])


def test_c1_reaches_the_broker_the_tools_the_store_and_the_cluster_daemons(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SERVICES_JIT_ENV, "c1")
    for service, command in _service_commands(tmp_path).items():
        # A JVM option: before the main class, so the JVM takes it and the program never sees it.
        assert C1_ONLY in command, service
        assert command.index(C1_ONLY) < command.index("-cp"), service
    # The daemons' and the executors' own options stay; the JIT option is added to them.
    monkeypatch.setenv("SPARK_DAEMON_JAVA_OPTS", "-Dsite.option=1")
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Dtool.option=1")
    daemons, executors = _daemon_java_options(tmp_path, monkeypatch)
    assert daemons == ["-Dsite.option=1", C1_ONLY]
    assert executors == ["-Dtool.option=1", C1_ONLY]


def test_an_unknown_value_is_refused_naming_the_variable_before_a_service_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SERVICES_JIT_ENV, "c2-only")
    with pytest.raises(ConfigError, match="STACK_SERVICES_JIT='c2-only': expected one of"):
        service_jit_options()
    store_data, store_jars = tmp_path / "store", tmp_path / "store-jars"
    store_jars.mkdir()
    (store_jars / "s3proxy-3.0.0.jar").touch()
    store = LocalObjectStore(ObjectStoreSettings(port=1, data_dir=store_data, jars_dir=store_jars))
    with pytest.raises(ConfigError, match=SERVICES_JIT_ENV):
        store.start()
    assert not store_data.exists(), "nothing of the store was written"
    broker_data = tmp_path / "kafka"
    broker = LocalKafkaBroker(KafkaBrokerSettings(port=1, controller_port=2, data_dir=broker_data))
    monkeypatch.setattr("revenue_platform.local_stack.kafka_broker.require_java", lambda: None)
    with pytest.raises(ConfigError, match=SERVICES_JIT_ENV):
        broker.start()
    assert not broker_data.exists(), "nothing of the broker was written"
