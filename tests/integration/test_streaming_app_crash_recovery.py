"""Crash recovery: SIGKILL the real driver while it processes 48,000 orders.

The app runs as a real spark-submit process group (JVM + Python driver). It is killed
without warning in the middle of a batch after its first committed one, at no point the app
chose, then a bounded run restarts from its checkpoints and drains the rest. Gold must equal the
independent Decimal oracle exactly, and bronze must hold every consumed record exactly
once: nothing lost, nothing counted twice.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from revenue_platform.orders_generator import (
    GeneratorSettings,
    expected_windows,
    generate_orders,
    generate_stores,
    produce,
)
from revenue_platform.spark_submit import spark_submit_command, spark_submit_env
from spark_apps.contract.config import StreamingAppConfig, load_config
from spark_apps.storage.gold import gold_frame
from tests.kafka_helpers import app_topic_overrides, create_app_topics, unique_suffix

pytestmark = pytest.mark.integration

ORDERS = 48_000


def _overrides(bootstrap: str, lake: Path, suffix: str) -> dict[str, object]:
    return {
        "deployment_id": "crash",
        "lake_root": str(lake),
        "kafka.bootstrap_servers": bootstrap,
        **app_topic_overrides(suffix),
        "kafka.max_offsets_per_trigger": 6_000,
        # The test is about crashes, not lateness: a wide watermark keeps every order on time
        # even when partitions drift apart between micro-batches.
        "window.watermark": "30 minutes",
        "trigger.interval": "1 second",
        "shuffle_partitions": 2,
    }


def _launch(overrides: dict[str, object], log: Path, trigger_mode: str) -> subprocess.Popen[bytes]:
    args: list[str] = []
    for key, value in {**overrides, "trigger.mode": trigger_mode}.items():
        args += ["--set", f"{key}={value}"]
    with log.open("ab") as out:
        return subprocess.Popen(
            spark_submit_command("orders_streaming_app.py", args),
            stdout=out,
            stderr=subprocess.STDOUT,
            env=spark_submit_env(),
            start_new_session=True,  # the group holds the JVM and its Python driver: kill both at once
        )


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


def _revenue_batch(config: StreamingAppConfig) -> int:
    progress = Path(config.names.progress_dir) / f"{config.names.query_name('revenue')}.json"
    try:
        return int(json.loads(progress.read_text())["batch_id"])
    except (OSError, ValueError, KeyError, TypeError):
        return -1


def _wait_for(
    condition: Callable[[], bool], process: subprocess.Popen[bytes], log: Path, timeout_s: float
) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert process.poll() is None, f"app exited early ({process.returncode}):\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"timed out; app log tail:\n{log.read_text()[-3000:]}"
        time.sleep(0.2)


def test_a_sigkill_mid_batch_loses_nothing_and_counts_nothing_twice(
    kafka_bootstrap: str, spark: SparkSession, tmp_path: Path
) -> None:
    suffix = unique_suffix()
    overrides = _overrides(kafka_bootstrap, tmp_path / "lake", suffix)
    config = load_config(overrides=overrides)
    create_app_topics(kafka_bootstrap, suffix, orders_partitions=4, other_partitions=2)
    records = list(
        generate_orders(
            GeneratorSettings(
                orders=ORDERS, stores=6, span_seconds=1800, duplicate_every=97, bad_every=1000, seed=3
            )
        )
    )
    produce(kafka_bootstrap, config.kafka.stores_topic, generate_stores(6))
    produce(kafka_bootstrap, config.kafka.orders_topic, records, total=len(records))
    log = tmp_path / "app.log"

    # One SIGKILL at no chosen point: a few seconds into a batch after the first committed one (the
    # named points between a batch's commits are test_one_query_engine_crashes.py's; the soak kills
    # twenty times at random).
    app = _launch(overrides, log, "processing_time")
    _wait_for(lambda: _revenue_batch(config) >= 1, app, log, 300)
    time.sleep(3)
    _kill_group(app)

    # Drain what is left with a bounded run from the same checkpoints.
    app = _launch(overrides, log, "available_now")
    assert app.wait(timeout=900) == 0, log.read_text()[-3000:]

    expected = {
        k: (w.order_count, w.revenue) for k, w in expected_windows(records, window_seconds=15).items()
    }
    gold_rows = gold_frame(spark, config.names.gold_revenue_table).collect()
    gold: dict[tuple[str, str, datetime], tuple[int, Decimal]] = {
        (r.location_id, r.order_type, r.window_start): (r.order_count, r.revenue) for r in gold_rows
    }
    assert len(gold_rows) == len(gold), "a window key appears twice in gold"
    assert gold == expected
    assert sum(c for c, _ in gold.values()) == len({r.order["orderId"] for r in records if r.order})
    assert sum((v for _, v in gold.values()), Decimal("0")) == sum(w[1] for w in expected.values())

    bronze = spark.read.format("delta").load(config.names.bronze_orders_table)
    assert bronze.count() == len(records)
    assert bronze.select("partition", "offset").distinct().count() == len(records)
