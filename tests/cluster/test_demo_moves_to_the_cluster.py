"""The user's move from the one-broker stack to the cluster, as issue 33 reported it: `make demo`,
`make down`, `make cluster-up`, `make demo`.

Before each environment had a lake of its own, the second demo resumed the `demo` deployment's
checkpoint, which held offsets of the single broker's topics, on the cluster's three brokers, and
`deploy_streaming_app` failed ("Some data may have been lost ..."). Here both demos must print their
windowed revenue; the cluster's `demo` records the cluster's Kafka id in the cluster's lake, and the
one-broker stack's lake keeps its own `demo` for the next `make up`.

It runs the stack's commands as a user does (tests/stack_helpers.py), with a state folder and ports
of its own, clear of the fault tests' cluster (TEST_CLUSTER_BASE_PORT, 19100) and of the e2e demo's.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.stack_helpers import DEMO_SUMMARY, run_demo, run_stack, user_environment

pytestmark = pytest.mark.cluster

# Cluster ports from base..base+15 (docs/cluster.md), the one-broker stack's and Airflow's above them.
BASE_PORT = int(os.environ.get("TEST_MOVE_BASE_PORT", "19300"))
PORTS = {
    "CLUSTER_BASE_PORT": BASE_PORT,
    "KAFKA_PORT": BASE_PORT + 20,
    "KAFKA_CONTROLLER_PORT": BASE_PORT + 21,
    "AIRFLOW_PORT": BASE_PORT + 30,
}
DEMO_ORDERS = 3000


def _expect_windowed_revenue(step: str, run: subprocess.CompletedProcess[str]) -> None:
    output = run.stdout + run.stderr
    assert run.returncode == 0, f"{step}:\n{output[-4000:]}"
    summary = DEMO_SUMMARY.search(output)
    assert summary, f"{step}: no windowed revenue printed:\n{output[-4000:]}"
    assert int(summary[1]) > 0, step
    assert int(summary[2]) == DEMO_ORDERS, f"{step}: each of the demo's orders is counted exactly once"


def _expect_ok(step: str, run: subprocess.CompletedProcess[str]) -> None:
    assert run.returncode == 0, f"{step}:\n{(run.stdout + run.stderr)[-4000:]}"


def _demo_kafka_cluster(lake: Path) -> str:
    """The Kafka cluster id the `demo` deployment of `lake` recorded next to its checkpoints."""
    record = lake / "checkpoints" / "demo" / "_kafka_cluster.json"
    return str(json.loads(record.read_text())["kafka_cluster_id"])


def test_the_demo_runs_on_the_cluster_after_it_ran_on_the_one_broker_stack(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    env = user_environment(state_dir, PORTS)
    stack_lake, cluster_lake = state_dir / "lake", state_dir / "cluster" / "lake"
    try:
        _expect_ok("make up", run_stack("up", env))
        _expect_windowed_revenue("make demo on the one-broker stack", run_demo(env))
        broker_cluster = _demo_kafka_cluster(stack_lake)
        _expect_ok("make down", run_stack("down", env))

        _expect_ok("make cluster-up", run_stack("cluster-up", env, timeout_s=900))
        status = run_stack("status", env)
        _expect_ok("make status", status)
        assert f"lake    {cluster_lake}" in status.stdout, status.stdout
        _expect_windowed_revenue("make demo on the cluster", run_demo(env))

        assert _demo_kafka_cluster(cluster_lake) != broker_cluster
        # The one-broker stack's lake is as its demo left it, for the next `make up`.
        assert _demo_kafka_cluster(stack_lake) == broker_cluster
    finally:
        run_stack("down", env)  # the cluster while its marker exists, else the one-broker stack
        run_stack("cluster-down", env)  # whatever of the cluster a failed start left behind
