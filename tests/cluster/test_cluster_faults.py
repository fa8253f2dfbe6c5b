"""Fault tests on a real cluster: a broker, a worker and the driver are killed mid-run.

The streaming app runs against the session's Spark standalone cluster (client deploy mode:
the driver here, executors on the workers) and its three KRaft brokers, with topics as the
spec's `cluster` environment makes them (3 replicas, min ISR 2); one test keeps the lake on the
cluster's own object store and kills that. Every kill is placed at a
defined point of the app's progress — after a given revenue batch committed, or exactly
between the gold commit and the checkpoint commit through the app's fault hook — and the test
prints where it landed. After each fault, gold must equal the independent Decimal oracle
(nothing lost, nothing counted twice) and bronze must hold every record exactly once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from revenue_platform import processes
from revenue_platform.lake_storage import spark_object_store_access
from revenue_platform.local_stack.cluster import LocalCluster
from revenue_platform.orders_generator import GeneratorSettings, generate_orders, generate_stores, produce
from revenue_platform.paths import REPO_ROOT, state_dir
from revenue_platform.registry import DeploymentRegistry
from spark_apps.contract.config import load_config
from spark_apps.contract.fault_points import FAULT_BATCH_ENV, FAULT_POINT_ENV, FAULT_REPORT_ENV
from tests.cluster.cluster_helpers import (
    bronze_offsets,
    cents,
    create_replicated_app_topics,
    gold,
    launch_app,
    oracle,
    partition_leaders,
    revenue_batch,
    stop_app,
    wait_for,
)
from tests.kafka_helpers import unique_suffix
from tests.object_store_helpers import local_paths_naming
from tests.streaming_helpers import DEPLOY_DEFAULTS, load_dags, spark_drivers, supervise, task_states, xcom

pytestmark = pytest.mark.cluster

ORDERS = 6_000
# About ten ingest batches per run, so a kill after batch 1 lands in the middle of the reading.
MAX_OFFSETS_PER_TRIGGER = 600
GOLD_TIMEOUT_S = 600


def _orders(seed: int) -> list[Any]:
    settings = GeneratorSettings(
        orders=ORDERS, stores=5, span_seconds=600, duplicate_every=97, bad_every=500, seed=seed
    )
    return list(generate_orders(settings))


def _app_overrides(bootstrap: str, lake: str, deployment_id: str, topics: dict[str, str]) -> dict[str, Any]:
    return {
        "deployment_id": deployment_id,
        "lake_root": str(lake),
        "kafka.bootstrap_servers": bootstrap,
        **topics,
        "kafka.max_offsets_per_trigger": MAX_OFFSETS_PER_TRIGGER,
        # The tests are about faults, not lateness: every order stays on time across batches.
        "window.watermark": "30 minutes",
        "trigger.mode": "processing_time",
        "trigger.interval": "1 second",
        "shuffle_partitions": 2,
    }


def _report(message: str) -> None:
    # Shown with -s and in the captured output of a failure: where the fault landed.
    print(f"[fault] {message}", flush=True)


def _assert_exactly_once(config: Any, records: list[Any]) -> None:
    expected = oracle(records)
    actual = gold(config.names.gold_revenue_table)
    lost = cents({k: v for k, v in expected.items() if k not in actual}) + sum(
        max(0, int((expected[k][1] - actual[k][1]) * 100)) for k in expected.keys() & actual.keys()
    )
    doubled = sum(max(0, int((actual[k][1] - expected.get(k, (0, 0))[1]) * 100)) for k in actual)
    _report(
        f"gold: {cents(actual)} cents in {len(actual)} windows; lost {lost} cents, doubled {doubled} cents"
    )
    assert actual == expected
    offsets = bronze_offsets(config.names.bronze_orders_table)
    assert len(offsets) == len(records), "bronze lost or repeated records"
    assert len(set(offsets)) == len(records)


@dataclass(frozen=True)
class _RunningApp:
    """An app launched on the cluster over its own topics, past its first ingest batch."""

    config: Any
    records: list[Any]
    app: subprocess.Popen[bytes]
    log: Path
    overrides: dict[str, Any]

    def positions(self) -> tuple[int, int]:
        """(ingest batch, revenue batch) committed so far; the one-query engine's query is both."""
        revenue = revenue_batch(self.config)
        ingest = revenue_batch(self.config, "ingest")
        return (ingest if ingest >= 0 else revenue), revenue

    def recovers(self, after: str, landed: tuple[int, int]) -> None:
        """Gold reaches the oracle while the app keeps running and reads on past `landed`."""
        wait_for(
            lambda: gold(self.config.names.gold_revenue_table) == oracle(self.records),
            f"gold to match the oracle {after}",
            GOLD_TIMEOUT_S,
            self.app,
            self.log,
        )
        ingest, revenue = self.positions()
        assert ingest > landed[0], f"the app read nothing {after}"
        assert revenue > landed[1]
        assert self.app.poll() is None


def _launch_past_first_batch(
    cluster: LocalCluster, tmp_path: Path, deployment_id: str, seed: int, lake: str | None = None
) -> _RunningApp:
    """The app over fresh topics with its lake in `tmp_path` (or at `lake`, e.g. on the object store)."""
    bootstrap = cluster.settings.bootstrap_servers
    topics = create_replicated_app_topics(bootstrap, unique_suffix())
    lake = lake or str(tmp_path / "lake")
    overrides = _app_overrides(bootstrap, lake, deployment_id, topics)
    config = load_config(overrides=overrides)
    records = _orders(seed=seed)
    produce(bootstrap, config.kafka.stores_topic, generate_stores(5))
    produce(bootstrap, config.kafka.orders_topic, records, total=len(records))
    log = tmp_path / "app.log"
    app = launch_app(
        cluster.settings.spark_master_url, overrides, log, object_store=spark_object_store_access(lake)
    )
    running = _RunningApp(config, records, app, log, overrides)
    try:
        # After ingest batch 1: most orders are still to be read when the fault strikes.
        wait_for(lambda: running.positions()[0] >= 1, "ingest batch 1", 300, app, log)
    except BaseException:
        stop_app(app, config)
        raise
    return running


def test_killing_a_partition_leader_broker_mid_run_keeps_gold_exact(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    running = _launch_past_first_batch(cluster, tmp_path, "brokerkill", seed=21)
    try:
        # The broker that leads orders partition 0: the app's consumer and producers must fail over.
        leaders = partition_leaders(cluster.settings.bootstrap_servers, running.config.kafka.orders_topic)
        victim = leaders[0]
        broker = cluster.broker(victim - 1)
        pid = broker.pid()
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        landed = running.positions()
        _report(
            f"SIGKILLed broker {victim} (pid {pid}) after ingest batch {landed[0]} "
            f"(of ~{ORDERS // MAX_OFFSETS_PER_TRIGGER}), revenue batch {landed[1]}; it led orders "
            f"partitions {sorted(p for p, leader in leaders.items() if leader == victim)}"
        )
        wait_for(lambda: victim not in cluster.live_broker_ids(), f"broker {victim} to leave", 60)
        running.recovers("with one broker down", landed)
        cluster.restart_broker(victim - 1)
        _report(f"broker {victim} restarted; the app kept running throughout (pid {running.app.pid})")
        assert running.app.poll() is None
    finally:
        stop_app(running.app, running.config)
    _assert_exactly_once(running.config, running.records)


def test_killing_the_worker_that_runs_the_executor_keeps_gold_exact(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    running = _launch_past_first_batch(cluster, tmp_path, "workerkill", seed=22)
    try:
        status = cluster.master_status() or {}
        busy = [w for w in status.get("workers", []) if w.get("coresused", 0) > 0]
        assert len(busy) == 1, f"expected the app's executor on one worker: {status.get('workers')}"
        victim = next(
            worker
            for index, worker in enumerate(cluster.workers)
            if busy[0]["port"] == cluster.settings.spark_worker_base_port + index
        )
        pid = victim.kill_with_children()
        landed = running.positions()
        _report(
            f"SIGKILLed {victim.name} (pid {pid}) with its executor after ingest batch {landed[0]} "
            f"(of ~{ORDERS // MAX_OFFSETS_PER_TRIGGER}), revenue batch {landed[1]}; "
            "the master must give the app an executor on the other worker"
        )
        running.recovers("after the worker died", landed)
    finally:
        stop_app(running.app, running.config)
    _assert_exactly_once(running.config, running.records)


@pytest.fixture
def deploy_env(
    cluster: LocalCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: Any
) -> Iterator[dict[str, Any]]:
    """The deploy/supervise/stop DAGs pointed at the cluster by their two connections only."""
    lake = str(tmp_path / "lake")
    monkeypatch.setenv("PLATFORM_LAKE_ROOT", lake)
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_DEFAULT",
        json.dumps(
            {
                "conn_type": "spark",
                "host": cluster.settings.spark_master_url,
                "extra": {"deploy-mode": "client"},
            }
        ),
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_DEFAULT",
        json.dumps(
            {
                "conn_type": "kafka",
                "extra": {
                    "bootstrap.servers": cluster.settings.bootstrap_servers,
                    "group.id": "airflow-test",
                },
            }
        ),
    )
    yield {
        "lake": lake,
        "dags": load_dags("deploy_streaming_app", "supervise_streaming_apps", "stop_streaming_app"),
    }
    for pid in spark_drivers(lake):
        processes.terminate(pid, 5.0)


def test_a_driver_killed_between_gold_and_checkpoint_commit_is_restarted_by_the_supervisor(
    cluster: LocalCluster, deploy_env: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bootstrap = cluster.settings.bootstrap_servers
    dags, lake = deploy_env["dags"], deploy_env["lake"]
    deployment_id = "driverkill"
    topics = create_replicated_app_topics(bootstrap, unique_suffix())
    overrides = {
        **topics,
        "kafka.max_offsets_per_trigger": MAX_OFFSETS_PER_TRIGGER,
        "window.watermark": "30 minutes",
        "trigger.interval": "1 second",
        "shuffle_partitions": 2,
    }
    records = _orders(seed=23)
    produce(bootstrap, overrides["kafka.stores_topic"], generate_stores(5))
    produce(bootstrap, overrides["kafka.orders_topic"], records, total=len(records))
    # The deploy DAG's spark-submit inherits this environment: the driver arms its fault point.
    report = tmp_path / "fault.json"
    monkeypatch.setenv(FAULT_POINT_ENV, "revenue.before_checkpoint_commit")
    monkeypatch.setenv(FAULT_BATCH_ENV, "1")
    monkeypatch.setenv(FAULT_REPORT_ENV, str(report))

    run = dags["deploy_streaming_app"].test(
        run_conf={**DEPLOY_DEFAULTS, "deployment_id": deployment_id, "config_overrides": overrides}
    )
    assert run.state == "success", task_states(run)
    registry = DeploymentRegistry(lake)
    first = registry.get(deployment_id)
    assert first.spark_master == cluster.settings.spark_master_url
    wait_for(report.exists, "the fault point to fire", 300)
    landed = json.loads(report.read_text())
    deadline = time.monotonic() + 30
    while spark_drivers(lake) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert spark_drivers(lake) == [], "the killed driver's JVM is still running"
    config = load_config(overrides={**overrides, "deployment_id": deployment_id, "lake_root": lake})
    committed = revenue_batch(config)
    _report(
        f"driver (JVM {landed['jvm_pid']}, lease {first.lease_token}) SIGKILLed at {landed['point']} of "
        f"revenue batch {landed['batch_id']} ({landed['windows']} windows MERGEd into gold, checkpoint not "
        f"committed; last committed revenue batch {committed})"
    )
    assert landed["point"] == "revenue.before_checkpoint_commit"
    assert landed["batch_id"] > committed, "the kill must land before the batch's checkpoint commit"

    run = supervise(dags, deployment_id, start_timeout_s=240)
    assert run.state == "success", task_states(run)
    [entry] = xcom(run, "supervise")["deployments"]
    assert entry["action"] == "restart", entry
    restarted = registry.get(deployment_id)
    assert restarted.lease_epoch == first.lease_epoch + 1
    assert restarted.lease_token != first.lease_token
    # Never two writers: the old driver is gone, exactly one driver holds the only valid lease.
    assert spark_drivers(lake) == [restarted.driver_pid]
    _report(
        f"supervisor restarted it from its checkpoint: pid {restarted.driver_pid}, "
        f"lease {restarted.lease_token}"
    )
    wait_for(
        lambda: gold(config.names.gold_revenue_table) == oracle(records),
        "gold after the restart",
        GOLD_TIMEOUT_S,
    )
    assert revenue_batch(config) >= landed["batch_id"], "the redone batch was not committed"

    run = dags["stop_streaming_app"].test(run_conf={"deployment_id": deployment_id, "timeout_s": 90})
    assert run.state == "success", task_states(run)
    _assert_exactly_once(config, records)


def test_killing_the_object_store_the_lake_is_on_keeps_gold_exact(
    cluster: LocalCluster, cluster_lake_connection: str, tmp_path: Path
) -> None:
    """The lake (tables, checkpoints, registry, the driver's side files) in the cluster's object store;
    the store is SIGKILLed after ingest batch 1 and started again 5 s later. Executors reach it with
    the credentials their workers started with. A driver that exits during the outage is restarted
    from its checkpoint once, as the supervisor would; either way gold must equal the oracle to the
    cent, bronze hold every record once, and nothing of the lake exist on the local disk."""
    store = cluster.object_store
    assert store is not None, "the session's cluster runs with its lake on its own store"
    # Unique, so finding it in a local path means the lake touched the local disk.
    deployment_id = f"storekill-{unique_suffix()}"
    lake = f"{cluster_lake_connection}/{deployment_id}"
    running = _launch_past_first_batch(cluster, tmp_path, deployment_id, seed=24, lake=lake)
    restarts = 0
    try:
        landed = running.positions()
        pid = store.pid()
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        _report(
            f"SIGKILLed the object store (pid {pid}) the lake {lake} is on, after ingest batch {landed[0]} "
            f"(of ~{ORDERS // MAX_OFFSETS_PER_TRIGGER}), revenue batch {landed[1]}"
        )
        wait_for(lambda: not store.answers_http(), "the object store to stop answering", 30)
        time.sleep(5)
        store.start()
        _report(
            f"object store restarted after 5 s (pid {store.pid()}); app alive: {running.app.poll() is None}"
        )
        deadline = time.monotonic() + GOLD_TIMEOUT_S
        while gold(running.config.names.gold_revenue_table) != oracle(running.records):
            if running.app.poll() is not None:
                # The outage failed a batch and the driver exited: restart it from its checkpoint, as the
                # supervisor does with a driver that died.
                restarts += 1
                assert restarts <= 1, (
                    "the app exited again after its restart:\n" + running.log.read_text()[-3000:]
                )
                _report(
                    f"the app exited ({running.app.returncode}) during the outage; restarting it from its "
                    "checkpoint"
                )
                running = replace(
                    running,
                    app=launch_app(
                        cluster.settings.spark_master_url,
                        running.overrides,
                        running.log,
                        object_store=spark_object_store_access(lake),
                    ),
                )
            assert time.monotonic() < deadline, (
                "gold never matched the oracle:\n" + running.log.read_text()[-3000:]
            )
            time.sleep(2)
        ingest, revenue = running.positions()
        assert ingest > landed[0], "the app read nothing after the outage"
        assert revenue > landed[1]
        _report(f"recovered: ingest batch {ingest}, revenue batch {revenue}; driver restarts: {restarts}")
    finally:
        stop_app(running.app, running.config)
    _assert_exactly_once(running.config, running.records)
    # The lake is in the bucket and nowhere on the local disk.
    store_data = store.settings.data_dir
    assert any(
        (store.settings.blobs_dir / store.settings.bucket).rglob(f"{deployment_id}/**/_delta_log/*.json")
    )
    assert not (cluster.settings.home / "lake").exists()
    assert local_paths_naming(deployment_id, [state_dir(), tmp_path, REPO_ROOT], store_data) == []
