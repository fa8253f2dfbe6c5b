"""The user's move from the one-broker stack to the cluster, as issue 33 reported it: `make demo`,
`make down`, `make cluster-up`, `make demo`.

Before each environment had a lake of its own, the second demo resumed the `demo` deployment's
checkpoint, which held offsets of the single broker's topics, on the cluster's three brokers, and
`deploy_streaming_app` failed ("Some data may have been lost ..."). Here both demos must print their
windowed revenue; the cluster's `demo` records the cluster's Kafka id in the cluster's lake, and the
one-broker stack's lake keeps its own `demo` for the next `make up`.

`make cluster-up` puts the cluster's lake on its own object store by default, so the cluster's demo
runs through Airflow's DAGs with every table, checkpoint and side file in the store: its Kafka record
and gold are read from the bucket, nothing of that lake may exist on the local disk, and
`make cluster-down` stops the store with the rest of the cluster.

It runs the stack's commands as a user does (tests/stack_helpers.py), with a state folder and ports
of its own, clear of the fault tests' cluster (TEST_CLUSTER_BASE_PORT, 19100) and of the e2e demo's.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from revenue_platform.gold_table import read_gold
from revenue_platform.local_object_store import ObjectStoreSettings, local_lake_object_store
from revenue_platform.local_stack.object_store import LocalObjectStore
from spark_apps.contract.naming import DeploymentNames
from tests.object_store_helpers import in_the_bucket, local_paths_naming
from tests.stack_helpers import DEMO_SUMMARY, left_running, run_demo, run_stack, user_environment

pytestmark = pytest.mark.cluster

# The cluster's ports from base..base+15 and its object store's at base+20 (docs/cluster.md); the
# one-broker stack's and Airflow's above them.
BASE_PORT = int(os.environ.get("TEST_MOVE_BASE_PORT", "19300"))
PORTS = {
    "CLUSTER_BASE_PORT": BASE_PORT,
    "AIRFLOW_PORT": BASE_PORT + 30,
    "KAFKA_PORT": BASE_PORT + 40,
    "KAFKA_CONTROLLER_PORT": BASE_PORT + 41,
}
DEMO_ORDERS = 3000
DEMO_DEPLOYMENT = "demo"


def _expect_windowed_revenue(step: str, run: subprocess.CompletedProcess[str]) -> None:
    output = run.stdout + run.stderr
    assert run.returncode == 0, f"{step}:\n{output[-4000:]}"
    summary = DEMO_SUMMARY.search(output)
    assert summary, f"{step}: no windowed revenue printed:\n{output[-4000:]}"
    assert int(summary[1]) > 0, step
    assert int(summary[2]) == DEMO_ORDERS, f"{step}: each of the demo's orders is counted exactly once"


def _expect_ok(step: str, run: subprocess.CompletedProcess[str]) -> None:
    assert run.returncode == 0, f"{step}:\n{(run.stdout + run.stderr)[-4000:]}"


def _kafka_cluster_in(record: Path) -> str:
    """The Kafka cluster id a `demo` deployment recorded next to its checkpoints."""
    return str(json.loads(record.read_text())["kafka_cluster_id"])


def _cluster_store(state_dir: Path) -> ObjectStoreSettings:
    """The object store the running cluster's marker names for its lake."""
    marker = json.loads((state_dir / "cluster" / "cluster.json").read_text())
    assert marker["lake"] == "object-store", marker
    store = marker["object_store"]
    return ObjectStoreSettings(port=store["port"], data_dir=Path(store["data_dir"]), bucket=store["bucket"])


def _expect_the_cluster_lake_only_in_its_store(state_dir: Path, store: ObjectStoreSettings, lake: str) -> str:
    """The cluster demo's Kafka record and gold read from the bucket, nothing of its lake on the local
    disk outside the store's folder; returns the recorded Kafka cluster id."""
    names = DeploymentNames(lake, DEMO_DEPLOYMENT)
    kafka_record = in_the_bucket(store, names.kafka_cluster_record)
    assert kafka_record.is_file(), f"no {names.kafka_cluster_record} in the bucket"
    assert (in_the_bucket(store, names.gold_revenue_table) / "_delta_log").is_dir()
    # Gold through the store's S3 API (delta-rs), as the demo read it.
    gold = read_gold(
        names.gold_revenue_table,
        columns=["order_count"],
        storage_options=local_lake_object_store(store).delta_rs_storage_options(),
    )
    assert sum(gold.column("order_count").to_pylist()) == DEMO_ORDERS
    assert not (state_dir / "cluster" / "lake").exists()
    # Every folder of the state dir but the one-broker stack's lake: no Delta log, no Kafka record.
    outside_stack_lake = [path for path in state_dir.iterdir() if path.name != "lake"]
    for lake_file in ("_delta_log", "_kafka_cluster.json"):
        assert local_paths_naming(lake_file, outside_stack_lake, store.data_dir) == []
    return _kafka_cluster_in(kafka_record)


def test_the_demo_runs_on_the_cluster_after_it_ran_on_the_one_broker_stack(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    env = user_environment(state_dir, PORTS)
    stack_lake_record = state_dir / "lake" / "checkpoints" / DEMO_DEPLOYMENT / "_kafka_cluster.json"
    try:
        _expect_ok("make up", run_stack("up", env))
        _expect_windowed_revenue("make demo on the one-broker stack", run_demo(env))
        broker_cluster = _kafka_cluster_in(stack_lake_record)
        _expect_ok("make down", run_stack("down", env))

        _expect_ok("make cluster-up", run_stack("cluster-up", env, timeout_s=900))
        store = _cluster_store(state_dir)
        status = run_stack("status", env)
        _expect_ok("make status", status)
        assert f"lake    {store.lake_root}" in status.stdout, status.stdout
        assert f"object-store   up       {store.endpoint_url}" in status.stdout, status.stdout
        _expect_windowed_revenue("make demo on the cluster", run_demo(env))

        cluster_kafka = _expect_the_cluster_lake_only_in_its_store(state_dir, store, store.lake_root)
        assert cluster_kafka != broker_cluster
        # The one-broker stack's lake is as its demo left it, for the next `make up`.
        assert _kafka_cluster_in(stack_lake_record) == broker_cluster

        _expect_ok("make cluster-down", run_stack("cluster-down", env))
        assert LocalObjectStore(store).pid() is None, "make cluster-down left the cluster's store running"
        assert not LocalObjectStore(store).answers_http()
        # Nothing started for this stack outlives it: services, Airflow's task processes and what
        # they started (a scheduled reprocess job's spark-submit once did).
        assert left_running(state_dir) == []
    finally:
        run_stack("down", env)  # the cluster while its marker exists, else the one-broker stack
        run_stack("cluster-down", env)  # whatever of the cluster a failed start left behind
