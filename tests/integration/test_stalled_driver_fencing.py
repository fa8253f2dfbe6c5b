"""A stalled old driver cannot roll gold or the revenue topic back: the fence is in the commit.

Two real spark-submit drivers of one deployment (the micro-batch engine, the gold MERGE by delta-rs):
  1. driver 1 (lease epoch 1) reads the first orders, writes them to the revenue topic, passes
     its lease check before the gold MERGE (or, in the second case, its check before the revenue
     topic, which comes first), and stalls there (SIGSTOP of its Python process, as a GC pause or a
     frozen VM would);
  2. more orders for the same windows arrive; the registry hands the lease to driver 2 (epoch 2),
     which redoes the stalled batch from the checkpoint, reads the new orders too, and ends (a bounded
     run): gold and the revenue topic hold every order;
  3. driver 1 is resumed (SIGCONT) and carries on into its MERGE with the totals of the first orders
     only. Before the commit stamp and the transactional producer, those stale totals landed after
     the successor's and stayed. Now gold refuses the commit (it records epoch 2), or Kafka the
     topic write (the successor's producer fenced driver 1's), driver 1 exits as superseded
     (status 3), and gold and the revenue topic keep the successor's totals, to the cent.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from decimal import Decimal
from pathlib import Path

import pytest

from revenue_platform.orders_generator import (
    GeneratedRecord,
    GeneratorSettings,
    expected_windows,
    generate_orders,
    generate_stores,
    produce,
)
from revenue_platform.registry import DeploymentRecord, DeploymentRegistry
from revenue_platform.spark_submit import spark_submit_command, spark_submit_env
from spark_apps.contract.fault_points import FAULT_BATCH_ENV, FAULT_POINT_ENV, FAULT_REPORT_ENV
from tests.kafka_helpers import app_topic_overrides, create_app_topics, read_topic, unique_suffix

pytestmark = pytest.mark.integration

DEPLOYMENT = "stalled"


def _launch(
    overrides: dict[str, object], token: str, lake: Path, log: Path, env: dict[str, str]
) -> subprocess.Popen[bytes]:
    args = ["--lease-token", token, "--registry-root", str(lake)]
    for key, value in overrides.items():
        args += ["--set", f"{key}={value}"]
    with log.open("ab") as out:
        return subprocess.Popen(
            spark_submit_command("orders_streaming_app.py", args),
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**spark_submit_env(), **env},
            start_new_session=True,
        )


def _state(pid: int) -> str:
    """The kernel's run state of `pid` (R, S, T = stopped, ...)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _orders(first_order_id: int, seed: int) -> list[GeneratedRecord]:
    # The same 5 minutes of event time both times: the second orders land in the first ones' windows.
    return list(
        generate_orders(
            GeneratorSettings(
                orders=1_500, stores=3, span_seconds=300, seed=seed, first_order_id=first_order_id
            )
        )
    )


def _latest_revenue(bootstrap: str, topic: str) -> dict[str, tuple[int, Decimal]]:
    latest: dict[str, tuple[int, Decimal]] = {}
    for record in read_topic(bootstrap, topic):
        value = json.loads(record.value or b"{}")
        latest[(record.key or b"").decode()] = (int(value["order_count"]), Decimal(str(value["revenue"])))
    return latest


@pytest.mark.parametrize(
    ("stall", "refusal"),
    [
        # Gold records epoch 2 when it wakes: its MERGE is refused.
        ("revenue.before_gold_commit", "newer than this driver's 1"),
        # It stalled before the topic (and so before gold): its producer was fenced by the successor's.
        ("revenue.before_revenue_topic_write", "was fenced by a newer driver"),
    ],
)
def test_a_stalled_old_driver_cannot_roll_gold_or_the_revenue_topic_back(
    kafka_bootstrap: str, tmp_path: Path, stall: str, refusal: str
) -> None:
    from revenue_platform.gold_table import read_gold
    from spark_apps.contract.naming import DeploymentNames

    suffix = unique_suffix()
    lake = tmp_path / "lake"
    registry = DeploymentRegistry(str(lake))
    registry.register(DeploymentRecord(DEPLOYMENT, lake_root=str(lake)), "test")
    first = registry.acquire_lease(DEPLOYMENT, registry.get(DEPLOYMENT).row_version, "test", {}, "deploy")
    assert first.lease_token is not None
    topics = app_topic_overrides(suffix)
    overrides: dict[str, object] = {
        "deployment_id": DEPLOYMENT,
        "engine": "micro_batch",
        "lake_root": str(lake),
        "kafka.bootstrap_servers": kafka_bootstrap,
        **topics,
        "window.watermark": "30 minutes",  # about fencing, not lateness: every order counts
        "trigger.interval": "1 second",
    }
    create_app_topics(kafka_bootstrap, suffix)
    produce(kafka_bootstrap, topics["kafka.stores_topic"], generate_stores(3))
    before = _orders(1, seed=21)
    produce(kafka_bootstrap, topics["kafka.orders_topic"], before, total=len(before))

    report = tmp_path / "stalled.json"
    log = tmp_path / "driver-1.log"
    stalled = _launch(
        {**overrides, "trigger.mode": "processing_time"},
        first.lease_token,
        lake,
        log,
        {FAULT_POINT_ENV: stall, FAULT_BATCH_ENV: "0", FAULT_REPORT_ENV: str(report)},
    )
    try:
        deadline = time.monotonic() + 240
        while not report.exists() and time.monotonic() < deadline:
            assert stalled.poll() is None, (
                f"driver 1 exited ({stalled.returncode}):\n{log.read_text()[-3000:]}"
            )
            time.sleep(0.5)
        fired = json.loads(report.read_text())
        python_driver = int(fired["python_pid"])
        while _state(python_driver) != "T" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _state(python_driver) == "T", f"driver 1 is stalled at {stall}"

        after = _orders(100_000, seed=22)
        produce(kafka_bootstrap, topics["kafka.orders_topic"], after, total=len(after))
        second = registry.acquire_lease(
            DEPLOYMENT, registry.get(DEPLOYMENT).row_version, "test", {}, "takeover"
        )
        assert second.lease_token is not None
        successor_log = tmp_path / "driver-2.log"
        successor = _launch(
            {**overrides, "trigger.mode": "available_now"}, second.lease_token, lake, successor_log, {}
        )
        assert successor.wait(timeout=300) == 0, successor_log.read_text()[-3000:]

        expected = {k: (w.order_count, w.revenue) for k, w in expected_windows(before + after, 15).items()}
        gold_table = DeploymentNames(str(lake), DEPLOYMENT).gold_revenue_table

        def gold() -> dict[tuple[str, str, object], tuple[int, Decimal]]:
            return {
                (r["location_id"], r["order_type"], r["window_start"].replace(tzinfo=None)): (
                    r["order_count"],
                    r["revenue"],
                )
                for r in read_gold(gold_table).to_pylist()
            }

        assert gold() == expected, "the successor counted every order"
        topic_expected = {
            f"{loc}|{kind}|{start:%Y-%m-%dT%H:%M:%SZ}": totals
            for (loc, kind, start), totals in expected.items()
        }
        assert _latest_revenue(kafka_bootstrap, topics["kafka.revenue_topic"]) == topic_expected

        os.kill(python_driver, signal.SIGCONT)
        code = stalled.wait(timeout=180)
        output = log.read_text()
        assert code == 3, f"driver 1 must exit as superseded, got {code}:\n{output[-3000:]}"
        assert refusal in output
        assert gold() == expected, "the stalled driver's totals of the first orders only landed in gold"
        assert _latest_revenue(kafka_bootstrap, topics["kafka.revenue_topic"]) == topic_expected
    finally:
        for process in (stalled,):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=30)
