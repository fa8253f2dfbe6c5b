"""`make soak`: SIGKILL the driver again and again over a long run, restart a broker, count the cents.

Runs on the one-machine cluster (`make cluster-up`'s parts; started here if they are not
running, and then stopped again): topics with 3 replicas and min ISR 2, `--orders` orders
(1,000,000 by default; with duplicates and bad records) produced up front, and the streaming app
in client mode against the cluster's master. A seeded random schedule SIGKILLs the driver's whole
process group `--kills` times (20), each at a random moment 5-60 s after the restarted driver
reported ready, and restarts the driver from its checkpoint each time; halfway through, one
broker is SIGKILLed and started again. Then the app drains what is left, and gold is compared
with the generator's Decimal oracle per window. It prints lost cents (windows whose revenue is
below the oracle) and doubled cents (above it); both must be 0, and the exit status says so.

Not part of CI: 1,000,000 orders take a long time on a small machine (docs/cluster.md).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from bench import datagen
from bench.topics import app_topics, create_topics, declared, like, spec_topics
from revenue_platform import processes
from revenue_platform.gold_table import read_gold
from revenue_platform.local_stack.cluster import ClusterSettings, LocalCluster
from revenue_platform.orders_generator import (
    GeneratorSettings,
    expected_windows,
    generate_orders,
    generate_stores,
)
from revenue_platform.orders_generator import produce as produce_records
from revenue_platform.paths import state_dir
from revenue_platform.spark_submit import spark_submit_command, spark_submit_env
from spark_apps.contract.config import load_config
from spark_apps.contract.naming import REVENUE_QUERY_ROLE, DeploymentNames, local_path

WINDOW_SECONDS = 15
# The one-machine cluster has three brokers: the spec's environment for a cluster.
CLUSTER_SPEC_ENVIRONMENT = "cluster"


def _say(message: str) -> None:
    print(f"[soak {datetime.now(UTC):%H:%M:%S}] {message}", flush=True)


def create_soak_topics(bootstrap: str, suffix: str) -> dict[str, str]:
    """A copy of each of the app's topics for this soak, `<topic>_<suffix>`, as the spec's cluster
    environment declares the topic (3 replicas, min ISR 2); returns the app's overrides naming them."""
    specs = spec_topics(CLUSTER_SPEC_ENVIRONMENT)
    copies = {
        field: like(declared(specs, topic), f"{topic}_{suffix}")
        for field, topic in app_topics(load_config()).items()
    }
    create_topics(bootstrap, copies.values())
    return {f"kafka.{field}": copy.name for field, copy in copies.items()}


def launch(master: str, overrides: dict[str, Any], log: Path) -> subprocess.Popen[bytes]:
    args = [part for key, value in overrides.items() for part in ("--set", f"{key}={value}")]
    with log.open("ab") as out:
        return subprocess.Popen(
            spark_submit_command("orders_streaming_app.py", args, master=master),
            stdout=out,
            stderr=subprocess.STDOUT,
            env=spark_submit_env(),
            start_new_session=True,
        )


def _json(path: Path) -> dict[str, Any]:
    with suppress(OSError, ValueError):
        loaded: dict[str, Any] = json.loads(path.read_text())
        return loaded
    return {}


def wait_ready(status_file: Path, started: float, app: subprocess.Popen[bytes], log: Path) -> None:
    """Until the driver started after `started` reports every query ready."""
    while True:
        status = _json(status_file)
        fresh = (
            status.get("started_at") and datetime.fromisoformat(status["started_at"]).timestamp() >= started
        )
        if fresh and status.get("ready"):
            return
        if app.poll() is not None:
            raise RuntimeError(
                f"driver exited ({app.returncode}) before it was ready:\n{processes.tail(log, 30)}"
            )
        time.sleep(1)


def progress(names: DeploymentNames) -> str:
    """Where the app was: its query's last committed batch (from the progress file the app writes)."""
    batch = _json(local_path(names.progress_file(REVENUE_QUERY_ROLE))).get("batch_id")
    return f"batch {batch if batch is not None else '-'}"


def gold(table: str) -> dict[tuple[str, str, datetime], Decimal]:
    """Gold's revenue per (store, order type, window start); empty before the app wrote gold."""
    rows = read_gold(table, columns=["location_id", "order_type", "window_start", "revenue"])
    return {
        (r["location_id"], r["order_type"], r["window_start"].replace(tzinfo=None)): r["revenue"]
        for r in rows.to_pylist()
    }


def cents_off(expected: dict[Any, Decimal], actual: dict[Any, Decimal]) -> tuple[int, int]:
    """(lost, doubled) cents: revenue missing from gold, and revenue gold has beyond the oracle."""
    lost = doubled = Decimal("0")
    for key in expected.keys() | actual.keys():
        difference = actual.get(key, Decimal("0")) - expected.get(key, Decimal("0"))
        if difference < 0:
            lost -= difference
        else:
            doubled += difference
    return int(lost * 100), int(doubled * 100)


def stop_gracefully(app: subprocess.Popen[bytes], status_file: Path) -> None:
    if app.poll() is None:
        python_pid = _json(status_file).get("pid")
        processes.terminate(app.pid, 120.0, signal.SIGTERM, signal_pid=python_pid)
    with suppress(subprocess.TimeoutExpired):
        app.wait(30)


@dataclass
class Driver:
    """The soak's streaming app: started again and again with the same overrides in client mode."""

    master: str
    overrides: dict[str, Any]
    status_file: Path
    log: Path
    app: subprocess.Popen[bytes] | None = None
    """The latest driver process (None before the first start)."""

    def start(self) -> subprocess.Popen[bytes]:
        """Launch the app (resuming from its checkpoint) and wait until it reports every query ready."""
        launched = time.time()
        self.app = launch(self.master, self.overrides, self.log)
        wait_ready(self.status_file, launched, self.app, self.log)
        return self.app

    def kill(self) -> None:
        """SIGKILL the driver's whole process group, if it still runs."""
        if self.app is not None and self.app.poll() is None:
            with suppress(ProcessLookupError):
                os.killpg(self.app.pid, signal.SIGKILL)


def argument_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=1_000_000)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=20261123)
    # Small batches keep the driver working through all 20 kills: with 20,000 it had caught up by kill 8.
    parser.add_argument("--max-offsets-per-trigger", type=int, default=3_000)
    parser.add_argument("--drain-timeout-s", type=float, default=7200.0)
    return parser


def produce_orders(
    bootstrap: str, topics: dict[str, str], args: argparse.Namespace, folder: Path
) -> dict[Any, Decimal]:
    """Generate `--orders` orders (with duplicates and bad records) into files under `folder`, produce
    the stores and the orders, and return the generator's Decimal oracle: revenue per window."""
    settings = GeneratorSettings(
        orders=args.orders,
        stores=8,
        span_seconds=3600,
        seed=args.seed,
        duplicate_every=97,
        bad_every=1000,
    )
    chunks = datagen.plan_chunks(settings, 50_000, folder)
    total = datagen.generate_files(chunks, max(1, (os.cpu_count() or 2) - 1))
    produce_records(bootstrap, topics["kafka.stores_topic"], generate_stores(settings.stores))
    datagen.produce_files(bootstrap, topics["kafka.orders_topic"], [c.path for c in chunks], total)
    _say(
        f"{total} records ({args.orders} orders) in {topics['kafka.orders_topic']}; computing the oracle ..."
    )
    return {
        key: window.revenue
        for key, window in expected_windows(
            itertools.chain.from_iterable(generate_orders(c.settings) for c in chunks), WINDOW_SECONDS
        ).items()
    }


def kill_repeatedly(
    driver: Driver, cluster: LocalCluster, kills: int, rng: random.Random, names: DeploymentNames
) -> None:
    """`kills` times: start the driver, SIGKILL it at a random moment 5-60 s after it was ready; after
    half of them, SIGKILL one broker and start it again."""
    broker_restart_after = kills // 2
    for kill in range(1, kills + 1):
        app = driver.start()
        delay = rng.uniform(5, 60)
        time.sleep(delay)
        if app.poll() is not None:
            raise RuntimeError(
                f"driver exited ({app.returncode}) on its own:\n{processes.tail(driver.log, 30)}"
            )
        os.killpg(app.pid, signal.SIGKILL)
        app.wait(30)
        where = progress(names)
        _say(f"kill {kill}/{kills}: SIGKILLed the driver {delay:.0f}s after it was ready, after {where}")
        if kill == broker_restart_after:
            restart_last_broker(cluster)


def restart_last_broker(cluster: LocalCluster) -> None:
    broker = cluster.broker(cluster.settings.brokers - 1)
    pid = broker.pid()
    if pid is not None:
        os.kill(pid, signal.SIGKILL)
    _say(f"SIGKILLed broker {cluster.settings.brokers} (pid {pid}); restarting it")
    cluster.restart_broker(cluster.settings.brokers - 1, progress=_say)


def drain(driver: Driver, oracle: dict[Any, Decimal], gold_table: str, timeout_s: float) -> tuple[int, int]:
    """Run the driver until gold matches the oracle or stops running or `timeout_s` passed; stop it
    gracefully, and return the (lost, doubled) cents of gold against the oracle."""
    app = driver.start()
    _say("drain: the last driver runs until gold stops changing and matches the oracle, or times out")
    deadline = time.monotonic() + timeout_s
    actual = gold(gold_table)
    while actual != oracle and time.monotonic() < deadline and app.poll() is None:
        time.sleep(10)
        actual = gold(gold_table)
    stop_gracefully(app, driver.status_file)
    return cents_off(oracle, gold(gold_table))


def main(argv: list[str] | None = None) -> int:
    args = argument_parser().parse_args(argv)
    rng = random.Random(args.seed)
    cluster = LocalCluster(ClusterSettings.from_env())
    started_cluster = not cluster.is_running()
    cluster.start(progress=_say)
    # The driver authenticates with the cluster's secret (its SPARK_CONF_DIR).
    os.environ.update(cluster.client_environment())
    bootstrap = cluster.settings.bootstrap_servers
    work = state_dir() / "soak" / datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    work.mkdir(parents=True)
    driver: Driver | None = None
    try:
        suffix = uuid.uuid4().hex[:8]
        topics = create_soak_topics(bootstrap, suffix)
        oracle = produce_orders(bootstrap, topics, args, work / "orders")
        overrides: dict[str, Any] = {
            "deployment_id": f"soak{suffix}",
            "lake_root": str(work / "lake"),
            "kafka.bootstrap_servers": bootstrap,
            **topics,
            "kafka.max_offsets_per_trigger": args.max_offsets_per_trigger,
            "window.watermark": "30 minutes",
            "trigger.mode": "processing_time",
            "trigger.interval": "1 second",
        }
        names = load_config(overrides=overrides).names
        status_file = local_path(names.driver_status_file)
        driver = Driver(cluster.settings.spark_master_url, overrides, status_file, work / "driver.log")
        kill_repeatedly(driver, cluster, args.kills, rng, names)
        lost, doubled = drain(driver, oracle, names.gold_revenue_table, args.drain_timeout_s)
        expected_cents = int(sum(oracle.values(), Decimal("0")) * 100)
        print(
            f"soak: {args.orders} orders, {args.kills} driver SIGKILLs, 1 broker restart; "
            f"oracle {expected_cents} cents in {len(oracle)} windows; "
            f"lost {lost} cents, doubled {doubled} cents",
            flush=True,
        )
        return 0 if lost == 0 and doubled == 0 else 1
    finally:
        if driver is not None:
            driver.kill()
        for chunk_file in (work / "orders").glob("*.bin"):
            chunk_file.unlink()
        if started_cluster:
            cluster.stop(progress=_say)


if __name__ == "__main__":
    sys.exit(main())
