"""Fault tests on a real cluster: the driver, a broker, a worker and the object store are killed in
turn under one running deployment.

The streaming app is deployed through the `deploy_streaming_app` DAG with `spark_default` pointed at
the session's Spark standalone cluster (client deploy mode: the driver here, executors on the workers)
and `kafka_default` at its three KRaft brokers, with topics as the spec's `cluster` environment makes
them (3 replicas, min ISR 2) and its lake on the cluster's own object store, as `make cluster-up`
starts it. Orders arrive in four waves; each wave meets one fault, placed at a defined point of the
app's progress (the app's fault hook between the gold commit and the checkpoint commit, or once gold
shows the wave's first half being read, with its second half produced after the fault), and the test
prints where it landed. After each wave gold must
equal the independent Decimal oracle of every order so far (nothing lost, nothing counted twice); at
the end bronze must hold every record exactly once and nothing of the lake may be on the local disk.

One deployment takes every fault (it used to be four tests, each with its own launch and orders): a
fault's recovery must also leave the app ready for the next one, which four fresh starts never showed.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from revenue_platform import processes
from revenue_platform.local_stack.cluster import LocalCluster
from revenue_platform.orders_generator import (
    GeneratedRecord,
    GeneratorSettings,
    generate_orders,
    generate_stores,
    produce,
)
from revenue_platform.paths import REPO_ROOT, state_dir
from revenue_platform.registry import DeploymentRegistry
from spark_apps.contract.config import StreamingAppConfig, load_config
from spark_apps.contract.fault_points import FAULT_BATCH_ENV, FAULT_POINT_ENV, FAULT_REPORT_ENV
from tests.cluster.cluster_helpers import (
    bronze_offsets,
    cents,
    create_replicated_app_topics,
    gold,
    oracle,
    partition_leaders,
    revenue_batch,
    wait_for,
)
from tests.kafka_helpers import unique_suffix
from tests.object_store_helpers import local_paths_naming
from tests.streaming_helpers import DEPLOY_DEFAULTS, load_dags, spark_drivers, supervise, task_states, xcom

pytestmark = pytest.mark.cluster

WAVE_ORDERS = 1_500
# About five ingest batches per wave: a fault that strikes while the wave's first half is read leaves
# batches to read through it.
MAX_OFFSETS_PER_TRIGGER = 300
GOLD_TIMEOUT_S = 600
FIRST_EVENT_TIME = datetime(2026, 11, 22, 9, 0, 0)


def _wave(index: int) -> list[GeneratedRecord]:
    """Wave `index`'s records: its own order ids and ten minutes of event time after the previous
    wave's (the 30-minute watermark keeps every wave on time)."""
    settings = GeneratorSettings(
        orders=WAVE_ORDERS,
        stores=5,
        start=FIRST_EVENT_TIME + timedelta(minutes=10 * index),
        span_seconds=600,
        duplicate_every=97,
        bad_every=500,
        seed=21 + index,
        first_order_id=1 + index * WAVE_ORDERS,
    )
    return list(generate_orders(settings))


def _report(message: str) -> None:
    # Shown with -s and in the captured output of a failure: where the fault landed.
    print(f"[fault] {message}", flush=True)


@dataclass
class _Deployment:
    """The deployment under test, the records produced to it so far and its DAGs."""

    deployment_id: str
    config: StreamingAppConfig
    registry: DeploymentRegistry
    dags: dict[str, Any]
    bootstrap: str
    overrides: dict[str, Any]
    records: list[GeneratedRecord] = field(default_factory=list)

    def send(self, records: list[GeneratedRecord]) -> None:
        produce(self.bootstrap, self.config.kafka.orders_topic, records, total=len(records))
        self.records += records

    def driver_pid(self) -> int | None:
        pid = self.registry.get(self.deployment_id).driver_pid
        return pid if pid is not None and processes.is_alive(pid) else None

    def drivers(self) -> list[int]:
        """Live spark-submit JVMs of this deployment's lake, found in /proc (not in the registry)."""
        return spark_drivers(self.config.lake_root)

    def driver_log(self) -> Path | None:
        """The newest driver log the launcher wrote for the deployment (local: the driver runs here)."""
        logs = sorted((state_dir() / "streaming_apps" / self.deployment_id).glob("driver-*.log"))
        return logs[-1] if logs else None

    def log_tail(self) -> str:
        log = self.driver_log()
        return log.read_text(errors="replace")[-3000:] if log else "(no driver log)"

    def positions(self) -> tuple[int, int]:
        """(ingest batch, revenue batch) committed so far; the engine's query is both."""
        revenue = revenue_batch(self.config)
        ingest = revenue_batch(self.config, "ingest")
        return (ingest if ingest >= 0 else revenue), revenue

    def gold_is_exact(self) -> bool:
        return gold(self.config.names.gold_revenue_table) == oracle(self.records)

    def fault_mid_wave(self, index: int, fault: Callable[[], str]) -> tuple[int, int]:
        """Wave `index` meets `fault` (which strikes and says what it did) while it is being read:
        its first half is produced, the fault strikes once gold shows the app reading it, and its
        second half is produced after the fault, so the app must read on through it. Returns the
        (ingest, revenue) batches committed just before the fault struck."""
        wave = _wave(index)
        first_half, second_half = wave[: len(wave) // 2], wave[len(wave) // 2 :]
        before = oracle(self.records)
        self.send(first_half)
        wait_for(
            lambda: gold(self.config.names.gold_revenue_table) != before,
            f"gold to show wave {index} being read",
            300,
            log=self.driver_log(),
        )
        # Read before the fault: with the lake's store killed, the progress file cannot be read after it.
        landed = self.positions()
        what = fault()
        self.send(second_half)
        _report(
            f"{what}, with wave {index} half read (ingest batch {landed[0]}, revenue batch {landed[1]} "
            f"committed before it); its other {len(second_half)} records produced after the fault"
        )
        return landed

    def recovers(self, after: str, landed: tuple[int, int], restart_allowed: bool = False) -> None:
        """Gold reaches the oracle of every record so far, and the app reads on past `landed`. With
        `restart_allowed` a driver that exits is restarted by the supervisor once (as its schedule
        would); otherwise the driver that ran before must still be the one running."""
        running_before = self.driver_pid()
        restarts = 0
        deadline = time.monotonic() + GOLD_TIMEOUT_S
        while not self.gold_is_exact():
            if self.driver_pid() is None:
                assert restart_allowed, f"the driver exited {after}; its log tail:\n{self.log_tail()}"
                assert restarts == 0, f"the driver exited again {after}; its log tail:\n{self.log_tail()}"
                _report(f"the driver exited {after}; the supervisor restarts it from its checkpoint")
                self.supervise_restart()
                restarts += 1
            assert time.monotonic() < deadline, f"gold never matched the oracle {after}:\n{self.log_tail()}"
            time.sleep(2)
        ingest, revenue = self.positions()
        assert ingest > landed[0], f"the app read nothing {after}"
        assert revenue > landed[1]
        if not restarts:
            assert self.driver_pid() == running_before, f"the driver changed {after} without a restart"
        assert self.drivers() == [self.driver_pid()], "exactly one driver runs"
        _report(
            f"recovered {after}: ingest batch {ingest}, revenue batch {revenue}, driver {self.driver_pid()}"
        )

    def supervise_restart(self) -> None:
        before = self.registry.get(self.deployment_id)
        assert self.drivers() == [], "a driver of the deployment still runs before its restart"
        run = supervise(self.dags, self.deployment_id, start_timeout_s=240)
        assert run.state == "success", task_states(run)
        [entry] = xcom(run, "supervise")["deployments"]
        assert entry["action"] == "restart", entry
        after = self.registry.get(self.deployment_id)
        assert after.lease_epoch == before.lease_epoch + 1
        assert after.lease_token != before.lease_token
        # Never two writers: the old driver is gone, exactly one driver holds the only valid lease.
        assert after.driver_pid is not None
        assert self.drivers() == [after.driver_pid]
        _report(f"supervisor restarted it from its checkpoint: pid {after.driver_pid}, {after.lease_token}")

    def assert_exactly_once(self) -> None:
        expected = oracle(self.records)
        actual = gold(self.config.names.gold_revenue_table)
        lost = cents({k: v for k, v in expected.items() if k not in actual}) + sum(
            max(0, int((expected[k][1] - actual[k][1]) * 100)) for k in expected.keys() & actual.keys()
        )
        doubled = sum(max(0, int((actual[k][1] - expected.get(k, (0, 0))[1]) * 100)) for k in actual)
        _report(f"gold: {cents(actual)} cents in {len(actual)} windows; lost {lost}, doubled {doubled} cents")
        assert actual == expected
        offsets = bronze_offsets(self.config.names.bronze_orders_table)
        assert len(offsets) == len(self.records), "bronze lost or repeated records"
        assert len(set(offsets)) == len(self.records)


@pytest.fixture
def deployment(
    cluster: LocalCluster,
    cluster_lake_connection: str,
    airflow_db: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[_Deployment]:
    """The DAGs pointed at the cluster by their two connections and the lake root, over fresh topics;
    whatever driver is left at the end is stopped."""
    bootstrap = cluster.settings.bootstrap_servers
    deployment_id = "faults"
    # The lake's folder in the bucket: unique, so finding its name in a local path means the lake
    # touched the local disk (the driver's log and config files are the launcher's, under the
    # deployment's id).
    lake = f"{cluster_lake_connection}/faults-lake-{unique_suffix()}"
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
            {"conn_type": "kafka", "extra": {"bootstrap.servers": bootstrap, "group.id": "airflow-test"}}
        ),
    )
    overrides = {
        **create_replicated_app_topics(bootstrap, unique_suffix()),
        "kafka.max_offsets_per_trigger": MAX_OFFSETS_PER_TRIGGER,
        # The test is about faults, not lateness: every order stays on time across batches and waves.
        "window.watermark": "30 minutes",
        "trigger.interval": "1 second",
        "shuffle_partitions": 2,
    }
    config = load_config(overrides={**overrides, "deployment_id": deployment_id, "lake_root": lake})
    dags = load_dags("deploy_streaming_app", "supervise_streaming_apps", "stop_streaming_app")
    under_test = _Deployment(deployment_id, config, DeploymentRegistry(lake), dags, bootstrap, overrides)
    produce(bootstrap, config.kafka.stores_topic, generate_stores(5))
    try:
        yield under_test
    finally:
        # From /proc, not the registry: the store the registry is on may be what the test killed.
        for pid in under_test.drivers():
            processes.terminate(pid, 5.0)


def test_one_deployment_keeps_gold_exact_through_driver_broker_worker_and_object_store_kills(
    cluster: LocalCluster, deployment: _Deployment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 1. The driver: it kills itself (JVM and Python) between the gold commit and the checkpoint commit
    #    of revenue batch >= 1 (the deploy DAG's spark-submit inherits the armed fault point); the
    #    supervisor restarts it from its checkpoint with a new lease, exactly one driver alive.
    report = tmp_path / "fault.json"
    monkeypatch.setenv(FAULT_POINT_ENV, "revenue.before_checkpoint_commit")
    monkeypatch.setenv(FAULT_BATCH_ENV, "1")
    monkeypatch.setenv(FAULT_REPORT_ENV, str(report))
    deployment.send(_wave(0))
    run = deployment.dags["deploy_streaming_app"].test(
        run_conf={
            **DEPLOY_DEFAULTS,
            "deployment_id": deployment.deployment_id,
            "config_overrides": deployment.overrides,
            "start_timeout_s": 240,
        }
    )
    assert run.state == "success", task_states(run)
    first = deployment.registry.get(deployment.deployment_id)
    assert first.spark_master == cluster.settings.spark_master_url
    wait_for(report.exists, "the fault point to fire", 300, log=deployment.driver_log())
    landed = json.loads(report.read_text())
    wait_for(lambda: deployment.drivers() == [], "the killed driver's JVM to be gone", 30)
    committed = revenue_batch(deployment.config)
    _report(
        f"driver (JVM {landed['jvm_pid']}, lease {first.lease_token}) SIGKILLed at {landed['point']} of "
        f"revenue batch {landed['batch_id']} ({landed['windows']} windows MERGEd into gold, checkpoint not "
        f"committed; last committed revenue batch {committed})"
    )
    assert landed["point"] == "revenue.before_checkpoint_commit"
    assert landed["batch_id"] > committed, "the kill must land before the batch's checkpoint commit"
    deployment.supervise_restart()
    deployment.recovers("after the driver's kill", (committed, committed))
    assert revenue_batch(deployment.config) >= landed["batch_id"], "the redone batch was not committed"

    # 2. The broker that leads orders partition 0: the app's consumer and producers must fail over to
    #    the other two while the same driver keeps running; the broker is restarted afterwards.
    leaders = partition_leaders(deployment.bootstrap, deployment.config.kafka.orders_topic)
    victim = leaders[0]

    def kill_the_leader() -> str:
        pid = cluster.broker(victim - 1).pid()
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        led = sorted(p for p, leader in leaders.items() if leader == victim)
        return f"SIGKILLed broker {victim} (pid {pid}), leader of orders partitions {led}"

    landed_at = deployment.fault_mid_wave(1, kill_the_leader)
    wait_for(lambda: victim not in cluster.live_broker_ids(), f"broker {victim} to leave", 60)
    deployment.recovers("with one broker down", landed_at)
    cluster.restart_broker(victim - 1)
    _report(f"broker {victim} restarted")

    # 3. The worker that runs the app's executor, with the executor (its process group: a lost
    #    machine); the master must give the app an executor on the other worker.
    def kill_the_busy_worker() -> str:
        status = cluster.master_status() or {}
        busy = [w for w in status.get("workers", []) if w.get("coresused", 0) > 0]
        assert len(busy) == 1, f"expected the app's executor on one worker: {status.get('workers')}"
        worker = next(
            worker
            for index, worker in enumerate(cluster.workers)
            if busy[0]["port"] == cluster.settings.spark_worker_base_port + index
        )
        pid = worker.kill_with_children()
        return f"SIGKILLed {worker.name} (pid {pid}) with its executor"

    landed_at = deployment.fault_mid_wave(2, kill_the_busy_worker)
    deployment.recovers("after the worker died", landed_at)
    cluster.start()  # the lost worker back, for the next fault

    # 4. The object store the lake is on (tables, checkpoints, registry, the driver's side files):
    #    SIGKILLed and started again 5 s later. A driver that exits during the outage is restarted by
    #    the supervisor once.
    store = cluster.object_store
    assert store is not None, "the session's cluster runs with its lake on its own store"

    def kill_the_store() -> str:
        assert store is not None
        pid = store.pid()
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        return f"SIGKILLed the object store (pid {pid}) the lake is on"

    landed_at = deployment.fault_mid_wave(3, kill_the_store)
    wait_for(lambda: not store.answers_http(), "the object store to stop answering", 30)
    time.sleep(5)
    store.start()
    _report(f"object store restarted after 5 s (pid {store.pid()}); driver alive: {deployment.drivers()}")
    deployment.recovers("after the object store's outage", landed_at, restart_allowed=True)

    run = deployment.dags["stop_streaming_app"].test(
        run_conf={"deployment_id": deployment.deployment_id, "timeout_s": 90}
    )
    assert run.state == "success", task_states(run)
    assert deployment.drivers() == []
    deployment.assert_exactly_once()
    # The lake is in the bucket and nowhere on the local disk.
    store_data = store.settings.data_dir
    lake_folder = deployment.config.lake_root.rsplit("/", 1)[-1]
    assert any(
        (store.settings.blobs_dir / store.settings.bucket).rglob(f"{lake_folder}/**/_delta_log/*.json")
    )
    assert not (cluster.settings.home / "lake").exists()
    assert local_paths_naming(lake_folder, [state_dir(), tmp_path, REPO_ROOT], store_data) == []
