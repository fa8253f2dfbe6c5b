"""The cluster scaling benchmark's pure parts: where its cluster and runs live, what each replay is
asked for, and how the two replays become a ratio, a gold verdict and a summary (no cluster starts)."""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bench import cluster_scaling
from bench.outputs import write_documents
from bench.run import BenchRun, replay_hour_start
from revenue_platform.errors import PrerequisiteError
from revenue_platform.local_stack.cluster import LocalCluster

EXPECTED_ORDERS = 100_000


def _bench_run(tmp_path: Path) -> BenchRun:
    cluster = cluster_scaling.cluster_settings(tmp_path, 23100)
    return BenchRun(cluster_scaling.bench_settings(EXPECTED_ORDERS, 7, tmp_path, cluster), "stamp")


def test_the_bench_runs_on_a_cluster_of_its_own_and_the_app_on_its_master_and_brokers(tmp_path: Path) -> None:
    run = _bench_run(tmp_path)
    assert run.settings.spark_master == "spark://127.0.0.1:23100"
    assert run.bootstrap == "localhost:23110,localhost:23111,localhost:23112"
    assert run.lake_root == str(tmp_path / "lake")
    assert (run.settings.orders, run.settings.seed, run.settings.live_rates) == (EXPECTED_ORDERS, 7, ())
    assert cluster_scaling.cluster_settings(tmp_path, 23100).home == tmp_path / "cluster"


def test_a_taken_port_names_the_variable_that_moves_the_bench_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `make cluster-up`'s variables in the environment move `make cluster-up`'s cluster, not this one.
    monkeypatch.setenv("SPARK_MASTER_PORT", "7077")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cluster = LocalCluster(cluster_scaling.cluster_settings(tmp_path, port))
        with pytest.raises(PrerequisiteError) as refused:
            cluster.require_free_ports()
    message = str(refused.value)
    assert f"Port {port} is already in use" in message
    assert "BENCH_CLUSTER_BASE_PORT=<port>" in message
    assert "SPARK_MASTER_PORT" not in message


@pytest.mark.parametrize("cores", [1, 2])
def test_each_replay_gets_its_own_deployment_its_cores_and_as_many_kafka_tasks(
    tmp_path: Path, cores: int
) -> None:
    overrides, conf = cluster_scaling.scaled_replay(_bench_run(tmp_path), cores)
    assert overrides["deployment_id"] == f"bench-cluster-{cores}core"
    assert overrides["kafka.min_partitions"] == str(cores)
    assert overrides["trigger.mode"] == "available_now"
    assert overrides["kafka.bootstrap_servers"] == "localhost:23110,localhost:23111,localhost:23112"
    assert conf["spark.cores.max"] == str(cores)
    assert conf["spark.scheduler.minRegisteredResourcesRatio"] == "1.0"
    assert conf["spark.driver.maxResultSize"] == "256m"


def test_the_replays_differ_only_in_deployment_cores_and_kafka_tasks(tmp_path: Path) -> None:
    run = _bench_run(tmp_path)
    one, one_conf = cluster_scaling.scaled_replay(run, 1)
    two, two_conf = cluster_scaling.scaled_replay(run, 2)
    differing = {key for key in one.keys() | two.keys() if one.get(key) != two.get(key)}
    assert differing == {"deployment_id", "kafka.min_partitions"}
    assert {key for key in one_conf if one_conf[key] != two_conf[key]} == {"spark.cores.max"}


def _replay(cores: int, records_per_s: float, orders_counted: int, executors: int) -> dict[str, Any]:
    per_executor = {str(i): {"tasks": 10, "task_run_s": 1.0} for i in range(executors)}
    return {
        "cores": cores,
        "exit_code": 0,
        "records": 101_500,
        "processing_s": 101_500 / records_per_s,
        "records_per_s_excl_start": records_per_s,
        "wall_incl_start_s": 101_500 / (records_per_s / 2),
        "records_per_s_incl_start": records_per_s / 2,
        "executors": {
            "executors_added": executors,
            "executor_cores": executors,
            "executors_with_tasks": executors,
            "per_executor": per_executor,
        },
        "gold": {"rows": 6000, "orders_counted": orders_counted, "revenue_cents": 123},
    }


def _results(**overrides: Any) -> dict[str, Any]:
    results: dict[str, Any] = {
        "stamp": "20261126T174500Z",
        "expected_orders_counted": EXPECTED_ORDERS,
        "gold_windows_equal": True,
        "phases": {
            "replay_1_core": _replay(1, 10_000.0, EXPECTED_ORDERS, 1),
            "replay_2_core": _replay(2, 17_500.0, EXPECTED_ORDERS, 2),
        },
    }
    results.update(overrides)
    return results


def test_the_ratio_is_two_cores_over_one_and_gold_is_exact_when_equal_and_complete() -> None:
    derived = cluster_scaling.derive(_results())
    assert derived["ratio_two_to_one_excl_start"] == pytest.approx(1.75)
    assert derived["ratio_two_to_one_incl_start"] == pytest.approx(1.75)
    assert derived["executors_with_tasks"] == {"1": 1, "2": 2}
    assert derived["gold_exact"] is True


def test_gold_is_not_exact_when_the_tables_differ_or_one_misses_an_order() -> None:
    assert cluster_scaling.derive(_results(gold_windows_equal=False))["gold_exact"] is False
    # Equal to each other yet both short of the generated orders: still not exact.
    short = _replay(2, 17_500.0, EXPECTED_ORDERS - 1, 2)
    both_short = _results(phases={"replay_1_core": short | {"cores": 1}, "replay_2_core": short})
    derived = cluster_scaling.derive(both_short)
    assert derived["gold_exact"] is False
    assert derived["gold_orders_counted"] == [EXPECTED_ORDERS - 1, EXPECTED_ORDERS - 1]


def test_a_failed_replay_leaves_no_ratio_and_no_verdict_of_exactness() -> None:
    failed = {"cores": 2, "exit_code": 1, "error": "driver exited"}
    results = _results(
        phases={"replay_1_core": _replay(1, 10_000.0, EXPECTED_ORDERS, 1), "replay_2_core": failed}
    )
    del results["gold_windows_equal"]
    derived = cluster_scaling.derive(results)
    assert derived["ratio_two_to_one_excl_start"] is None
    assert derived["gold_exact"] is False
    text = cluster_scaling.markdown(results, derived)
    assert "not compared" in text
    assert "- replay_2_core: driver exited" in text


def test_the_summary_shows_both_replays_the_executors_they_used_and_the_ratio() -> None:
    results = _results(machine={"cpus": 2, "memory_gib": 23.0, "platform": "Linux", "python": "3.11"})
    text = cluster_scaling.markdown(results, cluster_scaling.derive(results))
    assert "Machine: 2 CPUs" in text
    assert "| 1 | 1 / 1 | 0: 10 | 101,500 | 10.2 | 10,000 | 20.3 | 5,000 | 100,000 |" in text
    assert "| 2 | 2 / 2 | 0: 10, 1: 10 | 101,500 | 5.8 | 17,500 | 11.6 | 8,750 | 100,000 |" in text
    assert "**1.75x** excluding start, 1.75x including start" in text
    assert "Gold exact: yes (both tables equal window by window: yes;" in text
    assert "## Errors" not in text


def test_results_are_written_as_json_with_the_summary_beside_it(tmp_path: Path) -> None:
    path = write_documents(
        {"stamp": "s", "at": datetime(2026, 11, 26, tzinfo=UTC)}, "# s\n", tmp_path, "s-cluster"
    )
    assert path == tmp_path / "s-cluster.json"
    assert json.loads(path.read_text()) == {"stamp": "s", "at": "2026-11-26 00:00:00+00:00"}
    assert (tmp_path / "s-cluster.md").read_text() == "# s\n"


def test_the_generated_hour_ends_at_the_last_whole_window_before_now() -> None:
    now = datetime(2026, 11, 26, 17, 45, 37, tzinfo=UTC).timestamp()
    assert replay_hour_start(now) == datetime(2026, 11, 26, 16, 45, 30)
