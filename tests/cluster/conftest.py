"""The fault tests' own cluster: a Spark standalone master + 2 workers and 3 KRaft brokers.

Started once per session under the test state dir with ports from TEST_CLUSTER_BASE_PORT
(19100: master, its UI +1, workers +2/+3, their UIs +4/+5, brokers +10..+12, controllers
+13..+15), and stopped at the end, also when tests fail (`make test-cluster` stops it once
more in case pytest itself was killed). Every test starts with the whole cluster up: what a
test killed is started again before the next one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from revenue_platform.local_stack.cluster import ClusterSettings, LocalCluster


@pytest.fixture(scope="session")
def cluster_session() -> Iterator[LocalCluster]:
    # Read by ClusterSettings.from_env (tests/conftest.py already set PLATFORM_STATE_DIR to the test
    # state); set only while the cluster tests run, so no other test sees it.
    previous = os.environ.get("CLUSTER_BASE_PORT")
    os.environ["CLUSTER_BASE_PORT"] = os.environ.get("TEST_CLUSTER_BASE_PORT", "19100")
    cluster = LocalCluster(ClusterSettings.from_env())
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        if previous is None:
            os.environ.pop("CLUSTER_BASE_PORT", None)
        else:
            os.environ["CLUSTER_BASE_PORT"] = previous


@pytest.fixture
def cluster(cluster_session: LocalCluster) -> LocalCluster:
    """The session's cluster with every part running (restarts what an earlier test killed)."""
    cluster_session.start()
    return cluster_session
