"""The one-machine cluster authenticates its members: one secret, generated once into a 0600
spark-defaults.conf that the daemons and Airflow's drivers find through SPARK_CONF_DIR, never on a
command line (no process is started here; tests/cluster/test_cluster_access.py runs the cluster)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from revenue_platform.local_stack.airflow_local import AirflowLocalSettings, airflow_environment
from revenue_platform.local_stack.cluster import (
    SPARK_DEFAULTS_FILE,
    ClusterSettings,
    LocalCluster,
    ensure_spark_auth_conf,
)


def _properties(path: Path) -> dict[str, str]:
    pairs = (
        line.split(" ", 1) for line in path.read_text().splitlines() if line and not line.startswith("#")
    )
    return {key: value.strip() for key, value in pairs}


def test_the_secret_is_generated_once_into_a_file_only_its_owner_reads(tmp_path: Path) -> None:
    conf_dir = tmp_path / "cluster" / "spark-conf"
    path = ensure_spark_auth_conf(conf_dir)
    assert path == conf_dir / SPARK_DEFAULTS_FILE
    properties = _properties(path)
    assert properties["spark.authenticate"] == "true"
    assert len(properties["spark.authenticate.secret"]) == 64
    assert properties["spark.ui.killEnabled"] == "false"
    assert path.stat().st_mode & 0o777 == 0o600
    assert conf_dir.stat().st_mode & 0o777 == 0o700
    # Kept on the next start (running drivers and daemons hold it), a loosened mode tightened again.
    os.chmod(path, 0o644)
    os.chmod(conf_dir, 0o755)
    assert _properties(ensure_spark_auth_conf(conf_dir)) == properties
    assert path.stat().st_mode & 0o777 == 0o600
    assert conf_dir.stat().st_mode & 0o777 == 0o700
    # Each cluster has its own.
    other = _properties(ensure_spark_auth_conf(tmp_path / "other"))
    assert other["spark.authenticate.secret"] != properties["spark.authenticate.secret"]


def test_daemons_and_airflow_find_the_secret_through_spark_conf_dir_not_their_arguments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLATFORM_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("CLUSTER_BASE_PORT", "23600")
    monkeypatch.setenv("CLUSTER_LAKE", "local")
    cluster = LocalCluster(ClusterSettings.from_env())
    conf_dir = str(tmp_path / "cluster" / "spark-conf")
    assert cluster.client_environment() == {"SPARK_CONF_DIR": conf_dir}
    daemon_env = cluster._daemon_env()
    assert daemon_env["SPARK_CONF_DIR"] == conf_dir
    assert cluster.worker_env(0, daemon_env)["SPARK_CONF_DIR"] == conf_dir, "executors inherit it"
    secret = _properties(Path(conf_dir) / SPARK_DEFAULTS_FILE)["spark.authenticate.secret"]
    arguments = [argument for daemon in (cluster.master, *cluster.workers) for argument in daemon.arguments]
    assert not any(secret in argument for argument in arguments)
    assert not any(secret in value for value in daemon_env.values())

    airflow = AirflowLocalSettings(
        home=tmp_path / "airflow", secrets_dir=tmp_path / "secrets", spark_conf_dir=Path(conf_dir)
    )
    env = airflow_environment(airflow)
    assert env["SPARK_CONF_DIR"] == conf_dir
    assert not any(secret in value for value in env.values())
    # The one-broker stack leaves Spark's own conf dir alone.
    assert "SPARK_CONF_DIR" not in airflow_environment(
        AirflowLocalSettings(home=tmp_path / "airflow", secrets_dir=tmp_path / "secrets")
    )
