"""`python -m bench.cluster_scaling`: does a second Spark worker make the replay faster?

On a cluster of its own (`make cluster-up`'s parts: a standalone master, two workers of one core
each and three brokers, with ports from BENCH_CLUSTER_BASE_PORT (23100) and state in
BENCH_CLUSTER_STATE_DIR (.local/bench-cluster); started fresh, and stopped at the end, also on
failure, Ctrl-C or SIGTERM) it produces `--orders` orders with the bench's generator to topics as
the spec's `cluster` environment declares them, then replays them twice with the unchanged
streaming app in available_now mode: with one executor core (`spark.cores.max=1`: one worker) and
with two (both workers), `kafka.min_partitions` set to the cores, each into a deployment of its own
with an empty checkpoint. It reports records/s excluding and including the app's start, the
executors each run really used (from the driver's event log), whether both gold tables are exact
(equal to each other, window by window, and counting every generated order) and the ratio two/one;
it writes bench/results/<stamp>-cluster.json and .md. Not part of `make test` (docs/cluster.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.gold import gold_stats
from bench.outputs import machine, write_documents
from bench.phases.replay import phase_generate
from bench.report import fmt, load_lines, machine_lines
from bench.run import BenchRun, BenchSettings, replay_hour_start, settings_json
from bench.soak import gold
from bench.spark_app import (
    BOUNDED_DRIVER_CONF,
    app_overrides,
    read_events,
    run_to_end,
    stop_every_driver,
    throughput,
)
from bench.spark_profile import event_log_lines, executor_usage
from bench.stats import ratio
from revenue_platform import processes
from revenue_platform.local_stack.cluster import ClusterSettings, LocalCluster, provision_cluster_topics
from revenue_platform.paths import REPO_ROOT
from spark_apps.contract.naming import DeploymentNames

# One worker's core, then both workers' (each worker of the one-machine cluster has one core).
EXECUTOR_CORES = (1, 2)
# Clear of `make cluster-up` (7077.., 9192..), the fault tests' cluster (19100..) and `make bench`
# (23080-23093).
DEFAULT_BASE_PORT = 23100
BASE_PORT_VARIABLE = "BENCH_CLUSTER_BASE_PORT"
DEFAULT_STATE_DIR = REPO_ROOT / ".local" / "bench-cluster"
LABEL = "cluster"


def _say(message: str) -> None:
    print(f"[cluster-bench {datetime.now(UTC):%H:%M:%S}] {message}", flush=True)


def cluster_settings(state_dir: Path, base_port: int) -> ClusterSettings:
    """The bench's own cluster: every port from `base_port`, its state under `state_dir`/cluster."""
    return ClusterSettings.from_base_port(state_dir / "cluster", base_port, BASE_PORT_VARIABLE)


def bench_settings(orders: int, seed: int, state_dir: Path, cluster: ClusterSettings) -> BenchSettings:
    """The run as the bench's phases know it: its orders, its folders, the cluster's brokers and master."""
    return BenchSettings(
        orders=orders,
        seed=seed,
        state_dir=state_dir,
        bootstrap_servers=cluster.bootstrap_servers,
        spark_master=cluster.spark_master_url,
        with_airflow=False,
        live_rates=(),
        label=LABEL,
    )


def deployment_id(cores: int) -> str:
    return f"bench-cluster-{cores}core"


def scaled_replay(run: BenchRun, cores: int) -> tuple[dict[str, str], dict[str, str]]:
    """The app's overrides and Spark conf of the replay on `cores` executor cores: a deployment of its
    own, its Kafka read split into `cores` tasks at least, and the master granting it `cores` cores
    (one worker per core here) before its first task, under the bench's bounded driver result size."""
    overrides = {
        **app_overrides(run, deployment_id(cores), run.orders_topic, "available_now"),
        "kafka.min_partitions": str(cores),
    }
    conf = {
        **BOUNDED_DRIVER_CONF,
        "spark.cores.max": str(cores),
        # Standalone schedules as soon as one executor registered (ratio 0): the first batches of the
        # two-core run would then run on one worker. Wait for all of them (at most Spark's 30 s).
        "spark.scheduler.minRegisteredResourcesRatio": "1.0",
    }
    return overrides, conf


def phase_scaled_replay(run: BenchRun, cores: int, records: int) -> None:
    """Replay the topic from earliest on `cores` executor cores until caught up; record records/s,
    the executors Spark used and the deployment's gold."""
    overrides, conf = scaled_replay(run, cores)
    with run.phase(f"replay_{cores}_core") as record:
        record.update({"cores": cores, "deployment_id": deployment_id(cores), "driver_conf": conf})
        submitted, finished, code, folder = run_to_end(run, f"replay-{cores}core", overrides, conf)
        record["exit_code"] = code
        if code != 0:
            record["error"] = processes.tail(folder / "driver.log", 30)
            return
        events = read_events(folder)
        record.update(
            {
                "records": records,
                "input_rows": sum(int(e["numInputRows"]) for e in events),
                "jvm_and_session_start_s": _session_ready(folder) - submitted,
                **throughput(records, events, submitted, finished),
                "executors": executor_usage(event_log_lines(folder)),
                "gold": gold_stats(run.lake_root, deployment_id(cores)),
            }
        )


def _session_ready(folder: Path) -> float:
    """When the driver's session was ready (epoch s), from the timings bench/spark_driver.py writes."""
    ready: float = json.loads((folder / "timings.json").read_text())["session_ready"]
    return ready


def gold_windows_equal(run: BenchRun, deployments: list[str]) -> bool:
    """Whether every deployment's gold holds the same windows with the same revenue, to the cent."""
    tables = [
        gold(DeploymentNames(run.lake_root, deployment).gold_revenue_table) for deployment in deployments
    ]
    return all(table == tables[0] for table in tables[1:])


def derive(results: dict[str, Any]) -> dict[str, Any]:
    """The ratio two/one of records/s (excluding and including start), the executors each run used,
    and whether gold is exact: both runs finished, their gold tables are equal window by window, and
    each counts every generated order."""
    phases = results.get("phases") or {}
    one = phases.get(f"replay_{EXECUTOR_CORES[0]}_core") or {}
    two = phases.get(f"replay_{EXECUTOR_CORES[-1]}_core") or {}
    expected = results.get("expected_orders_counted")
    counted = [(run.get("gold") or {}).get("orders_counted") for run in (one, two)]
    return {
        "ratio_two_to_one_excl_start": ratio(
            two.get("records_per_s_excl_start"), one.get("records_per_s_excl_start")
        ),
        "ratio_two_to_one_incl_start": ratio(
            two.get("records_per_s_incl_start"), one.get("records_per_s_incl_start")
        ),
        "executors_with_tasks": {
            str(run.get("cores")): (run.get("executors") or {}).get("executors_with_tasks")
            for run in (one, two)
            if run
        },
        "gold_windows_equal": results.get("gold_windows_equal"),
        "gold_orders_counted": counted,
        "gold_exact": results.get("gold_windows_equal") is True
        and expected is not None
        and counted == [expected, expected],
    }


def markdown(results: dict[str, Any], derived: dict[str, Any]) -> str:
    """The run's summary: one row per replay, the ratio two/one and the gold verdict."""
    phases = results.get("phases") or {}
    lines = [f"# Cluster scaling {results.get('stamp')}", ""]
    lines += machine_lines(results.get("machine") or {})
    lines += [
        f"{fmt(results.get('expected_orders_counted'))} orders on a standalone master with two 1-core "
        "workers and three brokers; the unchanged app in available_now mode, `kafka.min_partitions` = cores.",
        "",
        "| executor cores | executors added / with tasks | tasks per executor | records | seconds (excl. "
        "start) | records/s excl. start | seconds (incl. start) | records/s incl. start | gold orders |",
        "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    lines += [_replay_row(cores, phases.get(f"replay_{cores}_core") or {}) for cores in EXECUTOR_CORES]
    exact = "yes" if derived.get("gold_exact") else "**no**"
    equal = {True: "yes", False: "**no**", None: "not compared"}[derived.get("gold_windows_equal")]
    lines += [
        "",
        f"Two cores ÷ one: **{fmt(derived.get('ratio_two_to_one_excl_start'), 2)}x** excluding start, "
        f"{fmt(derived.get('ratio_two_to_one_incl_start'), 2)}x including start.",
        "",
        f"Gold exact: {exact} (both tables equal window by window: {equal}; "
        f"orders counted {derived.get('gold_orders_counted')}, "
        f"expected {fmt(results.get('expected_orders_counted'))} each).",
    ]
    lines += load_lines(phases)
    errors = {name: run["error"] for name, run in phases.items() if run.get("error")}
    if results.get("error"):
        errors["run"] = results["error"]
    if errors:
        lines += ["", "## Errors", ""] + [f"- {name}: {text}" for name, text in errors.items()]
    return "\n".join(lines) + "\n"


def _replay_row(cores: int, run: dict[str, Any]) -> str:
    executors = run.get("executors") or {}
    added, with_tasks = fmt(executors.get("executors_added")), fmt(executors.get("executors_with_tasks"))
    per_executor = executors.get("per_executor") or {}
    tasks = ", ".join(f"{executor}: {fmt(done['tasks'])}" for executor, done in per_executor.items())
    return (
        f"| {cores} | {added} / {with_tasks} | {tasks or '—'} | {fmt(run.get('records'))} | "
        f"{fmt(run.get('processing_s'), 1)} | {fmt(run.get('records_per_s_excl_start'))} | "
        f"{fmt(run.get('wall_incl_start_s'), 1)} | {fmt(run.get('records_per_s_incl_start'))} | "
        f"{fmt((run.get('gold') or {}).get('orders_counted'))} |"
    )


def start_fresh(cluster: LocalCluster) -> None:
    """Stop what an interrupted run left, delete its state (empty topics, empty lake), start the cluster
    and create the app's topics as the spec declares them for the `cluster` environment."""
    cluster.stop(progress=_say)
    shutil.rmtree(cluster.settings.home, ignore_errors=True)
    cluster.start(progress=_say)
    # The drivers this bench launches authenticate with the cluster's secret (its SPARK_CONF_DIR).
    os.environ.update(cluster.client_environment())
    provision_cluster_topics(cluster.settings.bootstrap_servers, progress=_say)


def execute(run: BenchRun, cluster: LocalCluster) -> None:
    """Start the cluster, produce the orders, replay them on each of EXECUTOR_CORES and compare gold;
    the drivers and the cluster are stopped even when a step fails."""
    try:
        with run.phase("cluster_start"):
            shutil.rmtree(run.lake_root, ignore_errors=True)
            start_fresh(cluster)
        generated = phase_generate(run, replay_hour_start(time.time()))
        records = run.results["phases"]["produce"]["produce"]["records"]
        run.results["expected_orders_counted"] = generated.orders
        for cores in EXECUTOR_CORES:
            phase_scaled_replay(run, cores, records)
        replays = [run.results["phases"][f"replay_{cores}_core"] for cores in EXECUTOR_CORES]
        if all(replay.get("exit_code") == 0 for replay in replays):
            run.results["gold_windows_equal"] = gold_windows_equal(
                run, [deployment_id(cores) for cores in EXECUTOR_CORES]
            )
    except Exception as error:
        run.results["error"] = f"{type(error).__name__}: {error}"
        _say(f"FAILED: {run.results['error']}")
    finally:
        stop_every_driver(run)
        cluster.stop(progress=_say)


def argument_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=1_000_000, help="orders to produce and replay")
    parser.add_argument("--seed", type=int, default=BenchSettings.seed)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = argument_parser().parse_args(argv)
    state_dir = Path(os.environ.get("BENCH_CLUSTER_STATE_DIR", DEFAULT_STATE_DIR))
    base_port = int(os.environ.get(BASE_PORT_VARIABLE, DEFAULT_BASE_PORT))
    cluster = LocalCluster(cluster_settings(state_dir, base_port))
    settings = bench_settings(args.orders, args.seed, state_dir, cluster.settings)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    run = BenchRun(settings, stamp, log=_say)
    run.work_dir.mkdir(parents=True, exist_ok=True)
    run.results.update({"stamp": stamp, "label": LABEL, "settings": settings_json(settings)})
    layout = cluster.settings
    run.results["cluster"] = {
        "spark_master": layout.spark_master_url,
        "workers": layout.workers,
        "worker_cores": layout.worker_cores,
        "worker_memory": layout.worker_memory,
        "bootstrap_servers": layout.bootstrap_servers,
    }
    # SIGTERM (e.g. a CI timeout) unwinds like Ctrl-C, so the drivers and the cluster get stopped.
    signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(143))
    execute(run, cluster)
    run.results["machine"] = machine()
    derived = derive(run.results)
    run.results["derived"] = derived
    summary = markdown(run.results, derived)
    path = write_documents(run.results, summary, settings.results_dir, f"{stamp}-{LABEL}")
    print(summary)
    _say(f"wrote {path} and {path.with_suffix('.md')}")
    return 0 if derived["gold_exact"] and not run.results.get("error") else 1


if __name__ == "__main__":
    sys.exit(main())
