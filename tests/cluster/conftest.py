"""The fault tests' own cluster: a Spark standalone master + 2 workers and 3 KRaft brokers.

Started once per session under the test state dir with ports from TEST_CLUSTER_BASE_PORT
(19100: master, its UI +1, workers +2/+3, their UIs +4/+5, brokers +10..+12, controllers
+13..+15, its object store +20), and stopped at the end, also when tests fail (`make test-cluster`
stops it once more in case pytest itself was killed). Every test starts with the whole cluster up:
what a test killed is started again before the next one.

It is started as `make cluster-up` starts it by default: with its own S3 object store and the workers
holding its credentials (CLUSTER_LAKE=object-store is set here all the same, so a developer's
CLUSTER_LAKE=local does not take the store away). The broker, worker and driver tests keep their lakes
in their own local folders (they name them); the object store test puts its lake in the store.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from revenue_platform.connections import LAKE_OBJECT_STORE_CONN_ID, connection_env_var
from revenue_platform.local_object_store import local_store_connection_json
from revenue_platform.local_stack.cluster import OBJECT_STORE_LAKE, ClusterSettings, LocalCluster

CLUSTER_VARIABLES = {"CLUSTER_BASE_PORT": os.environ.get("TEST_CLUSTER_BASE_PORT", "19100")}
CLUSTER_VARIABLES["CLUSTER_LAKE"] = OBJECT_STORE_LAKE


@pytest.fixture(scope="session")
def cluster_session() -> Iterator[LocalCluster]:
    # Read by ClusterSettings.from_env (tests/conftest.py already set PLATFORM_STATE_DIR to the test
    # state); set only while the cluster tests run, so no other test sees it.
    previous = {name: os.environ.get(name) for name in CLUSTER_VARIABLES}
    os.environ.update(CLUSTER_VARIABLES)
    cluster = LocalCluster(ClusterSettings.from_env())
    # A fresh bucket for the session, as the other test stores are (an earlier run's lake is not read).
    if cluster.object_store is not None and cluster.object_store.pid() is None:
        shutil.rmtree(cluster.settings.object_store.blobs_dir, ignore_errors=True)
    try:
        cluster.start()
        # The drivers the tests launch authenticate with the cluster's secret (its SPARK_CONF_DIR).
        previous.setdefault("SPARK_CONF_DIR", os.environ.get("SPARK_CONF_DIR"))
        os.environ.update(cluster.client_environment())
        yield cluster
    finally:
        cluster.stop()
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture
def cluster(cluster_session: LocalCluster) -> LocalCluster:
    """The session's cluster with every part running (restarts what an earlier test killed)."""
    cluster_session.start()
    return cluster_session


@pytest.fixture
def cluster_lake_connection(cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch) -> str:
    """The Airflow connection to the cluster's object store in this process's environment, as a
    deployment defines it (the tests' Airflow settings make the platform look for the connection
    first); returns the cluster's lake root in its bucket."""
    connection = local_store_connection_json(cluster.settings.object_store)
    monkeypatch.setenv(connection_env_var(LAKE_OBJECT_STORE_CONN_ID), connection)
    return cluster.settings.lake_root
