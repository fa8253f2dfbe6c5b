"""The one-machine cluster's layout: ports, quorum, connections (no process is started)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from revenue_platform.errors import PrerequisiteError
from revenue_platform.local_stack.cluster import ClusterSettings, LocalCluster
from revenue_platform.local_stack.kafka_broker import server_properties


def _properties(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line)


def test_one_base_port_lays_out_every_port_and_single_variables_win(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SPARK_MASTER_PORT", "SPARK_MASTER_WEBUI_PORT", "SPARK_WORKER_BASE_PORT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("CLUSTER_KAFKA_BASE_PORT", raising=False)
    monkeypatch.setenv("CLUSTER_BASE_PORT", "19100")
    monkeypatch.setenv("SPARK_WORKER_WEBUI_BASE_PORT", "19150")
    settings = ClusterSettings.from_env()
    assert settings.spark_master_url == "spark://127.0.0.1:19100"
    assert settings.master_status_url == "http://127.0.0.1:19101/json/"
    assert (settings.spark_worker_base_port, settings.spark_worker_webui_base_port) == (19102, 19150)
    assert settings.bootstrap_servers == "localhost:19110,localhost:19111,localhost:19112"
    assert [settings.controller_port(i) for i in range(3)] == [19113, 19114, 19115]
    ports = [
        settings.spark_master_port,
        settings.spark_master_webui_port,
        *(settings.spark_worker_base_port + i for i in range(2)),
        *(settings.spark_worker_webui_base_port + i for i in range(2)),
        *(settings.broker_port(i) for i in range(3)),
        *(settings.controller_port(i) for i in range(3)),
    ]
    assert len(set(ports)) == len(ports)


def test_a_base_port_alone_lays_out_a_cluster_of_its_own_whatever_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A developer's `make cluster-up` ports in the environment must not move a cluster laid out by number.
    monkeypatch.setenv("SPARK_MASTER_PORT", "7077")
    monkeypatch.setenv("CLUSTER_KAFKA_BASE_PORT", "9192")
    settings = ClusterSettings.from_base_port(tmp_path / "cluster", 23100, "BENCH_CLUSTER_BASE_PORT")
    assert settings.home == tmp_path / "cluster"
    assert settings.spark_master_url == "spark://127.0.0.1:23100"
    assert settings.master_status_url == "http://127.0.0.1:23101/json/"
    assert (settings.spark_worker_base_port, settings.spark_worker_webui_base_port) == (23102, 23104)
    assert settings.bootstrap_servers == "localhost:23110,localhost:23111,localhost:23112"
    assert [settings.controller_port(i) for i in range(3)] == [23113, 23114, 23115]


def test_the_defaults_stay_clear_of_the_one_broker_stack_and_airflow(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "CLUSTER_BASE_PORT",
        "SPARK_MASTER_PORT",
        "SPARK_MASTER_WEBUI_PORT",
        "SPARK_WORKER_BASE_PORT",
        "SPARK_WORKER_WEBUI_BASE_PORT",
        "CLUSTER_KAFKA_BASE_PORT",
    ):
        monkeypatch.delenv(name, raising=False)
    settings = ClusterSettings.from_env()
    assert settings.spark_master_url == "spark://127.0.0.1:7077"
    used = {settings.spark_master_webui_port, *(settings.broker_port(i) for i in range(3))}
    assert not used & {8080, 9092, 9093}


def test_three_brokers_form_one_quorum_and_replicate_internal_topics_three_times(tmp_path: Path) -> None:
    settings = ClusterSettings(home=tmp_path, kafka_base_port=19110)
    nodes = [_properties(server_properties(settings.broker_settings(i, "cid"))) for i in range(3)]
    assert [node["node.id"] for node in nodes] == ["1", "2", "3"]
    voters = "1@localhost:19113,2@localhost:19114,3@localhost:19115"
    assert all(node["controller.quorum.voters"] == voters for node in nodes)
    assert all("controller.quorum.bootstrap.servers" not in node for node in nodes)
    assert nodes[1]["listeners"] == "PLAINTEXT://localhost:19111,CONTROLLER://localhost:19114"
    assert nodes[0]["offsets.topic.replication.factor"] == "3"
    assert nodes[0]["transaction.state.log.min.isr"] == "2"
    assert len({node["log.dirs"] for node in nodes}) == 3


def test_a_single_broker_keeps_its_standalone_quorum(tmp_path: Path) -> None:
    from revenue_platform.local_stack.kafka_broker import KafkaBrokerSettings

    single = _properties(server_properties(KafkaBrokerSettings(data_dir=tmp_path)))
    assert single["controller.quorum.bootstrap.servers"] == "localhost:9093"
    assert single["offsets.topic.replication.factor"] == "1"


def test_while_the_cluster_runs_its_lake_is_its_own_unless_the_user_named_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The lake holds checkpoints with the offsets of the brokers that wrote them: a deployment of
    # `make up` must not resume on the cluster's brokers (issue 33).
    from revenue_platform.paths import lake_root
    from revenue_platform.quality.config import default_lake_root
    from revenue_platform.registry import registry_lake_root

    monkeypatch.delenv("PLATFORM_LAKE_ROOT", raising=False)
    monkeypatch.setenv("PLATFORM_STATE_DIR", str(tmp_path))
    marker = ClusterSettings.from_env().marker_path
    assert lake_root() == str(tmp_path / "lake")

    marker.parent.mkdir(parents=True)
    marker.write_text("{}")  # what `make cluster-up` leaves while the cluster runs
    assert {lake_root(), registry_lake_root(), default_lake_root()} == {str(tmp_path / "cluster" / "lake")}

    monkeypatch.setenv("PLATFORM_LAKE_ROOT", str(tmp_path / "chosen"))
    assert lake_root() == str(tmp_path / "chosen")

    monkeypatch.delenv("PLATFORM_LAKE_ROOT")
    marker.unlink()  # `make cluster-down`
    assert lake_root() == str(tmp_path / "lake")


def test_a_taken_port_of_the_environments_cluster_names_its_own_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # From the environment each port's own variable wins over CLUSTER_BASE_PORT: it is the one to name.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        monkeypatch.setenv("PLATFORM_STATE_DIR", str(tmp_path))
        monkeypatch.setenv("CLUSTER_BASE_PORT", "23300")
        monkeypatch.setenv("SPARK_MASTER_PORT", str(port))
        with pytest.raises(PrerequisiteError, match=f"Port {port} .* with SPARK_MASTER_PORT=<port>"):
            LocalCluster(ClusterSettings.from_env()).require_free_ports()
