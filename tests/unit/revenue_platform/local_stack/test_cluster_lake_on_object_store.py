"""The cluster's lake (CLUSTER_LAKE): on the cluster's own object store by default, its lake in the
store for every command and Airflow, and the store's credentials only where executors need them;
CLUSTER_LAKE=local the way back to a folder in the state dir (no process is started)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from revenue_platform.errors import ConfigError, PrerequisiteError
from revenue_platform.local_object_store import (
    ObjectStoreSettings,
    local_credentials,
    stack_object_store_settings,
)
from revenue_platform.local_stack.airflow_local import AirflowLocalSettings, airflow_environment
from revenue_platform.local_stack.cluster import ClusterSettings, LocalCluster
from revenue_platform.local_stack.kafka_broker import LocalKafkaBroker
from revenue_platform.paths import lake_root

VARIABLES = (
    "CLUSTER_LAKE",
    "CLUSTER_BASE_PORT",
    "CLUSTER_OBJECT_STORE_PORT",
    "PLATFORM_LAKE_ROOT",
    "OBJECT_STORE_PORT",
    "OBJECT_STORE_DATA_DIR",
    "OBJECT_STORE_BUCKET",
)


@pytest.fixture
def state(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PLATFORM_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("CLUSTER_BASE_PORT", "23500")
    return tmp_path


def test_by_default_the_lake_is_on_the_clusters_own_store(state: Path) -> None:
    cluster = LocalCluster(ClusterSettings.from_env())
    assert cluster.settings.lake == "object-store"
    assert cluster.object_store is not None
    assert cluster.object_store.settings.port == 23520
    assert cluster.settings.lake_root == "s3a://lake/lake"
    marker = cluster.marker()
    assert marker["lake"] == "object-store"
    assert marker["lake_root"] == "s3a://lake/lake"
    assert marker["object_store"]["data_dir"] == str(state / "cluster" / "object-store")


def test_cluster_lake_local_is_the_way_back_to_a_lake_in_the_state_dir(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLUSTER_LAKE", "local")
    cluster = LocalCluster(ClusterSettings.from_env())
    assert cluster.settings.lake == "local"
    assert cluster.object_store is None
    assert cluster.settings.lake_root == str(state / "cluster" / "lake")
    marker = cluster.marker()
    assert "object_store" not in marker
    assert marker["lake_root"] == str(state / "cluster" / "lake")
    assert not any(name.startswith("AWS_") for name in cluster.worker_env(0, {}))
    # Remembered while that cluster runs: `make demo` and `make status` need not repeat it.
    cluster.settings.marker_path.parent.mkdir(parents=True)
    cluster.settings.marker_path.write_text(json.dumps(marker))
    monkeypatch.delenv("CLUSTER_LAKE")
    assert ClusterSettings.from_env().lake == "local"
    assert lake_root() == str(state / "cluster" / "lake")


def test_a_running_cluster_whose_marker_records_no_lake_keeps_its_local_lake(state: Path) -> None:
    # A marker written before the lake could be chosen (or one being written): that cluster's lake is local.
    marker_path = ClusterSettings.from_env().marker_path
    marker_path.parent.mkdir(parents=True)
    marker_path.write_text("{}")
    assert ClusterSettings.from_env().lake == "local"
    assert lake_root() == str(state / "cluster" / "lake")


def test_without_the_stores_jars_the_cluster_refuses_before_starting_anything(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    no_jars = state / "no-jars"
    store_settings: Callable[[ClusterSettings], ObjectStoreSettings] = vars(ClusterSettings)[
        "object_store"
    ].fget

    def store_without_jars(settings: ClusterSettings) -> ObjectStoreSettings:
        return replace(store_settings(settings), jars_dir=no_jars)

    def no_broker_may_start(*_: object, **__: object) -> None:
        raise AssertionError("a broker was started before the cluster checked the store's jars")

    monkeypatch.setattr(ClusterSettings, "object_store", property(store_without_jars))
    monkeypatch.setattr(LocalKafkaBroker, "start", no_broker_may_start)
    cluster = LocalCluster(ClusterSettings.from_env())
    with pytest.raises(PrerequisiteError, match=r"make object-store-jars.*CLUSTER_LAKE=local"):
        cluster.start()
    assert not (state / "cluster" / "kafka-cluster-id").exists()
    assert all(broker.pid() is None for broker in cluster.brokers)
    assert cluster.master.pid() is None


def test_a_lake_switch_that_is_not_a_choice_names_its_variable(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLUSTER_LAKE", "s3")
    with pytest.raises(ConfigError, match="CLUSTER_LAKE='s3' is not one of local, object-store"):
        ClusterSettings.from_env()


def test_on_the_store_the_port_follows_the_base_and_the_store_lives_in_the_cluster_state(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLUSTER_LAKE", "object-store")  # as the default, named
    settings = ClusterSettings.from_env()
    store = settings.object_store
    assert store.endpoint_url == "http://127.0.0.1:23520"
    assert store.data_dir == state / "cluster" / "object-store"
    assert settings.lake_root == "s3a://lake/lake"
    monkeypatch.setenv("CLUSTER_OBJECT_STORE_PORT", "23999")
    assert ClusterSettings.from_env().object_store.port == 23999


def test_workers_get_their_own_scratch_dirs_and_the_stores_credentials_in_their_environment_only(
    state: Path,
) -> None:
    cluster = LocalCluster(ClusterSettings.from_env())
    credentials = local_credentials(cluster.settings.object_store)
    assert (cluster.settings.object_store.secrets_path.stat().st_mode & 0o777) == 0o600
    environments = [cluster.worker_env(i, {"SPARK_HOME": "x"}) for i in range(2)]
    assert environments[0]["SPARK_LOCAL_DIRS"] != environments[1]["SPARK_LOCAL_DIRS"]
    assert environments[1]["SPARK_LOCAL_DIRS"] == str(state / "cluster" / "spark-worker-2" / "local")
    for env in environments:
        assert env["AWS_ACCESS_KEY_ID"] == credentials["access_key_id"]
        assert env["AWS_SECRET_ACCESS_KEY"] == credentials["secret_access_key"]
    secret = credentials["secret_access_key"]
    assert all(secret not in argument for worker in cluster.workers for argument in worker.arguments)
    assert secret not in json.dumps(cluster.marker())


def test_while_a_cluster_on_the_store_runs_every_command_finds_its_lake_and_store(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLUSTER_LAKE", "object-store")
    cluster = LocalCluster(ClusterSettings.from_env())
    cluster.settings.marker_path.parent.mkdir(parents=True)
    cluster.settings.marker_path.write_text(json.dumps(cluster.marker()))
    monkeypatch.delenv("CLUSTER_LAKE")  # `make demo`, `make status`: the switch is not repeated
    assert ClusterSettings.from_env().lake == "object-store"
    assert lake_root() == "s3a://lake/lake"
    assert stack_object_store_settings() == cluster.settings.object_store
    # A store named in the environment wins (as `make objectstore-up`'s variables do).
    monkeypatch.setenv("OBJECT_STORE_PORT", "23401")
    assert stack_object_store_settings().port == 23401
    monkeypatch.setenv("PLATFORM_LAKE_ROOT", str(state / "chosen"))
    assert lake_root() == str(state / "chosen")


def test_airflow_on_the_clusters_store_gets_the_lake_and_where_the_store_is_but_no_secret(
    state: Path,
) -> None:
    settings = ClusterSettings.from_env()
    secret = local_credentials(settings.object_store)["secret_access_key"]
    airflow = AirflowLocalSettings(
        home=state / "airflow",
        secrets_dir=state / "secrets",
        lake_root=settings.lake_root,
        object_store=settings.object_store,
    )
    env = airflow_environment(airflow)
    assert env["PLATFORM_LAKE_ROOT"] == "s3a://lake/lake"
    assert env["OBJECT_STORE_PORT"] == "23520"
    assert env["OBJECT_STORE_DATA_DIR"] == str(state / "cluster" / "object-store")
    assert not any(secret in value for value in env.values())
    default = airflow_environment(AirflowLocalSettings(home=state / "airflow", secrets_dir=state / "secrets"))
    assert "PLATFORM_LAKE_ROOT" not in default
    assert "OBJECT_STORE_PORT" not in default
