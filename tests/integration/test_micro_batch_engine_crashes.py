"""The streaming engine killed between the commits of a micro-batch: nothing lost, nothing counted twice.

A real spark-submit driver (JVM + Python) runs `engine: micro_batch` over 24,000 orders with duplicates
and bad records. In the first test three runs are each SIGKILLed at a named point of a later batch
(spark_apps.contract.fault_points):
  * right after the revenue topic's transaction, before the gold MERGE: the topic one batch ahead of
    gold (bronze and the side outputs may still be in flight in their threads);
  * right after the bronze append;
  * after every write of the batch, before Spark commits its offsets;
and a fourth run is SIGKILLed (its whole process group, JVM and Python driver) at no point the app
chose: a few seconds into a batch after one it committed.
Each restart resumes the revenue state from bronze and gold and redoes the killed batch. A bounded run
drains the rest. Gold and the revenue topic must equal the generator's Decimal oracle, and bronze
must hold every record exactly once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from revenue_platform.orders_generator import (
    GeneratedRecord,
    GeneratorSettings,
    expected_windows,
    generate_orders,
    generate_stores,
    produce,
)
from revenue_platform.spark_submit import spark_submit_command, spark_submit_env
from spark_apps.contract.config import StreamingAppConfig, load_config
from spark_apps.contract.fault_points import FAULT_BATCH_ENV, FAULT_POINT_ENV, FAULT_REPORT_ENV
from spark_apps.contract.naming import REVENUE_QUERY_ROLE, local_path
from spark_apps.orders_streaming_app import run
from spark_apps.storage.gold import gold_frame
from tests.kafka_helpers import app_topic_overrides, create_app_topics, read_topic, unique_suffix

pytestmark = pytest.mark.integration

ORDERS = 24_000
KILLS = (
    ("revenue.after_revenue_topic_write", 1),
    ("ingest.after_bronze_commit", 3),
    ("revenue.before_checkpoint_commit", 5),
)


def _launch(
    overrides: dict[str, object], log: Path, mode: str, fault: dict[str, str]
) -> subprocess.Popen[bytes]:
    args: list[str] = []
    for key, value in {**overrides, "trigger.mode": mode}.items():
        args += ["--set", f"{key}={value}"]
    with log.open("ab") as out:
        return subprocess.Popen(
            spark_submit_command("orders_streaming_app.py", args),
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**spark_submit_env(), **fault},
            start_new_session=True,  # the group holds the JVM and its Python driver: kill both at once
        )


def _run_app(overrides: dict[str, object], log: Path, mode: str, fault: dict[str, str]) -> int:
    return _launch(overrides, log, mode, fault).wait(timeout=600)


def _revenue_progress_written(config: StreamingAppConfig) -> int:
    """When the revenue query last wrote its progress file (after each batch it commits), 0 before."""
    progress = local_path(config.names.progress_file(REVENUE_QUERY_ROLE))
    try:
        return progress.stat().st_mtime_ns
    except FileNotFoundError:
        return 0


def _kill_mid_batch_at_no_chosen_point(overrides: dict[str, object], log: Path) -> None:
    """SIGKILL the driver's process group (JVM and Python) a few seconds into the batch after the
    first one this run commits: at no point the app chose."""
    config = load_config(overrides=overrides)
    written_before = _revenue_progress_written(config)
    app = _launch(overrides, log, "processing_time", {})
    deadline = time.monotonic() + 300
    while _revenue_progress_written(config) == written_before:
        assert app.poll() is None, f"app exited early ({app.returncode}):\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"no batch committed; app log tail:\n{log.read_text()[-3000:]}"
        time.sleep(0.2)
    time.sleep(3)
    os.killpg(app.pid, signal.SIGKILL)
    app.wait(timeout=30)


def _kill_at_each_point_then_drain(
    overrides: dict[str, object],
    log: Path,
    kills: tuple[tuple[str, int], ...] = KILLS,
    then_kill_at_no_chosen_point: bool = False,
) -> None:
    for point, batch in kills:
        report = log.parent / f"{point}.json"
        report.unlink(missing_ok=True)
        fault = {FAULT_POINT_ENV: point, FAULT_BATCH_ENV: str(batch), FAULT_REPORT_ENV: str(report)}
        code = _run_app(overrides, log, "processing_time", fault)
        assert report.exists(), f"{point} never fired (exit {code}):\n{log.read_text()[-3000:]}"
        fired = json.loads(report.read_text())
        assert fired["batch_id"] >= batch
        assert code != 0, "a killed driver cannot exit cleanly"
    if then_kill_at_no_chosen_point:
        _kill_mid_batch_at_no_chosen_point(overrides, log)
    killed_runs_end = log.stat().st_size
    assert _run_app(overrides, log, "available_now", {}) == 0, log.read_text()[-3000:]
    # The app stops its own session; leaving it to the JVM's shutdown hooks closed the state stores
    # in no particular order (a 20M-order driver aborted at exit that way).
    assert "Spark session stopped" in log.read_text()[killed_runs_end:]
    assert "resumed revenue state (watermark" in log.read_text()
    assert "from the watermark bronze recorded" in log.read_text()
    if any(point != "ingest.after_bronze_commit" for point, _ in kills):
        assert "gold already holds this batch" in log.read_text()
    # Killed after its bronze append: the redone batch finds it in bronze's commits and skips it.
    if any(point in ("ingest.after_bronze_commit", "revenue.before_checkpoint_commit") for point, _ in kills):
        assert "bronze already holds this batch" in log.read_text()


def _gold(spark: SparkSession, table: str) -> dict[tuple[str, str, datetime], tuple[int, Decimal]]:
    rows = gold_frame(spark, table).collect()
    gold = {(r.location_id, r.order_type, r.window_start): (r.order_count, r.revenue) for r in rows}
    assert len(rows) == len(gold), "a window key appears twice in gold"
    return gold


def _latest_revenue_records(bootstrap: str, topic: str) -> dict[str, tuple[int, Decimal]]:
    latest: dict[str, dict[str, object]] = {}
    for record in read_topic(bootstrap, topic):
        latest[record.key.decode()] = json.loads(record.value)
    return {
        key: (int(str(value["order_count"])), Decimal(str(value["revenue"]))) for key, value in latest.items()
    }


def _orders(bootstrap: str, topics: dict[str, str]) -> list[GeneratedRecord]:
    records = list(
        generate_orders(
            GeneratorSettings(
                orders=ORDERS, stores=5, span_seconds=900, duplicate_every=97, bad_every=500, seed=5
            )
        )
    )
    produce(bootstrap, topics["kafka.stores_topic"], generate_stores(5))
    produce(bootstrap, topics["kafka.orders_topic"], records, total=len(records))
    return records


def _copies(records: list[GeneratedRecord]) -> int:
    """How many records the generator made as later copies of an earlier order."""
    return sum(1 for record in records if record.is_duplicate)


def test_kills_between_the_commits_of_a_batch_lose_nothing_and_count_nothing_twice(
    kafka_bootstrap: str, spark: SparkSession, tmp_path: Path
) -> None:
    suffix = unique_suffix()
    overrides: dict[str, object] = {
        "deployment_id": "microbatch",
        "engine": "micro_batch",
        "lake_root": str(tmp_path / "lake"),
        "kafka.bootstrap_servers": kafka_bootstrap,
        **app_topic_overrides(suffix),
        "kafka.max_offsets_per_trigger": 3_000,
        # About crashes, not lateness: partitions drift apart between batches, a wide watermark keeps
        # every order on time, so the oracle (which has no watermark) is the right answer.
        "window.watermark": "30 minutes",
        "trigger.interval": "1 second",
    }
    config = load_config(overrides=overrides)
    create_app_topics(kafka_bootstrap, suffix, orders_partitions=4, other_partitions=2)
    records = _orders(kafka_bootstrap, app_topic_overrides(suffix))

    _kill_at_each_point_then_drain(overrides, tmp_path / "app.log", then_kill_at_no_chosen_point=True)

    expected = {
        k: (w.order_count, w.revenue) for k, w in expected_windows(records, window_seconds=15).items()
    }
    assert _gold(spark, config.names.gold_revenue_table) == expected
    assert _latest_revenue_records(kafka_bootstrap, config.kafka.revenue_topic) == {
        f"{loc}|{typ}|{start.strftime('%Y-%m-%dT%H:%M:%SZ')}": totals
        for (loc, typ, start), totals in expected.items()
    }

    bronze = spark.read.format("delta").load(config.names.bronze_orders_table)
    assert bronze.count() == len(records)
    assert bronze.select("partition", "offset").distinct().count() == len(records)


def test_with_a_short_watermark_a_killed_run_ends_as_an_uninterrupted_one(
    kafka_bootstrap: str, spark: SparkSession, tmp_path: Path
) -> None:
    """A 5 s watermark on 15 s windows: between batches windows close, ids expire and orders turn
    late, and a restart resumes only what is still open (ids within 5 s of the watermark from bronze,
    open windows from gold). The oracle is the same app run once without a kill: with every record in Kafka
    before either starts, both cut the same batches (3,000 offsets each), so lateness falls alike.
    One kill, after every write of a later batch and before its offsets commit: the point where a
    restart must both resume the open state and recognise the batch gold already holds (the first
    test kills at each point with a wide watermark)."""
    suffix, reference_suffix = unique_suffix(), unique_suffix()
    topics = app_topic_overrides(suffix)
    common: dict[str, object] = {
        "engine": "micro_batch",
        "kafka.bootstrap_servers": kafka_bootstrap,
        "kafka.max_offsets_per_trigger": 3_000,
        "window.watermark": "5 seconds",
        "trigger.interval": "1 second",
    }
    killed = {**common, **topics, "deployment_id": "killed", "lake_root": str(tmp_path / "killed")}
    reference = {
        **common,
        **app_topic_overrides(reference_suffix),
        "kafka.orders_topic": topics["kafka.orders_topic"],
        "kafka.stores_topic": topics["kafka.stores_topic"],
        "deployment_id": "reference",
        "lake_root": str(tmp_path / "reference"),
    }
    create_app_topics(kafka_bootstrap, suffix, orders_partitions=4, other_partitions=2)
    create_app_topics(kafka_bootstrap, reference_suffix, orders_partitions=1, other_partitions=2)
    records = _orders(kafka_bootstrap, topics)

    # The reference needs no driver of its own: the same app, run once in this process's session.
    run(load_config(overrides={**reference, "trigger.mode": "available_now"}), spark)
    _kill_at_each_point_then_drain(killed, tmp_path / "killed.log", kills=(KILLS[-1],))

    killed_config, reference_config = load_config(overrides=killed), load_config(overrides=reference)
    expected = _gold(spark, reference_config.names.gold_revenue_table)
    assert _gold(spark, killed_config.names.gold_revenue_table) == expected
    # Not counted = a later copy or late. More than the copies: some orders were late.
    not_counted = (
        spark.read.format("delta")
        .load(reference_config.names.bronze_orders_table)
        .filter("superseded")
        .count()
    )
    assert not_counted > _copies(records), "no order was late: the watermark never bit"
    assert _latest_revenue_records(kafka_bootstrap, killed_config.kafka.revenue_topic) == (
        _latest_revenue_records(kafka_bootstrap, reference_config.kafka.revenue_topic)
    )
