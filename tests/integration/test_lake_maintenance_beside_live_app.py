"""Lake maintenance beside a running app (issue 57): compaction, VACUUM and log checkpoints run on gold
and bronze while live batches MERGE into gold and append to bronze, and no batch fails, no number moves.

The shipped schedule compacts only partitions no live batch writes (gold hours ended two hours ago,
bronze days before today), so in production the two never touch the same files. Here maintenance is
told it is two days later: it compacts *every* partition, the open gold hour and today's bronze
included, again and again while the app writes them. Spark's bronze appends and delta-rs's compaction
commits interleave in bronze's log, and no batch fails; gold's open hour is one file (each MERGE
rewrites it), which compaction leaves alone. Real Kafka, the app in process (one streaming query,
one-second trigger), Delta written by Spark and delta-rs as in production. (VACUUM at the forms'
shortest retention, 1 hour, deletes nothing a running batch may still commit.)
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from revenue_platform.lake_maintenance import MaintenancePolicy, TableMaintenance, maintain_lake
from revenue_platform.orders_generator import (
    expected_windows,
    generate_stores,
    produce,
)
from spark_apps.contract.config import load_config
from spark_apps.contract.gold_layout import GOLD_HOUR_COLUMN
from spark_apps.storage.gold import gold_frame
from tests.kafka_helpers import app_topic_overrides, create_app_topics, unique_suffix
from tests.paced_orders import LiveApp, PacedOrders
from tests.registry_helpers import register_deployment

pytestmark = pytest.mark.integration

RATE_PER_S = 100
SECONDS = 30
GOLD_WAIT_S = 120
# The shortest retention a form allows: VACUUM runs, and keeps what a reader may still hold.
POLICY = MaintenancePolicy(
    gold_retention=timedelta(hours=1),
    bronze_retention=timedelta(hours=1),
    control_retention=timedelta(hours=1),
)


def test_maintenance_compacting_the_partitions_live_batches_write_fails_no_batch_and_moves_no_number(
    kafka_bootstrap: str, spark: SparkSession, tmp_path: Path
) -> None:
    suffix = unique_suffix()
    lake = tmp_path / "lake"
    create_app_topics(kafka_bootstrap, suffix, broker_stamped=True)
    config = load_config(
        overrides={
            "deployment_id": "maintained",
            "lake_root": str(lake),
            "kafka.bootstrap_servers": kafka_bootstrap,
            **app_topic_overrides(suffix),
            "trigger.mode": "processing_time",
            "trigger.interval": "1 second",
            "shuffle_partitions": 2,
        }
    )
    register_deployment(lake, config)
    produce(kafka_bootstrap, config.kafka.stores_topic, generate_stores(3))
    app = LiveApp(config, spark)
    app.start()
    orders = PacedOrders(
        kafka_bootstrap, config.kafka.orders_topic, RATE_PER_S, SECONDS, first_order_id=2_000_000
    )
    runs: list[list[TableMaintenance]] = []
    maintenance_errors: list[BaseException] = []
    maintenance_done = threading.Event()

    def maintain_again_and_again() -> None:
        # As if two days had passed: every partition is closed to maintenance, the ones the live
        # batches are writing included.
        while not maintenance_done.is_set():
            try:
                runs.append(
                    maintain_lake(
                        str(lake),
                        [config.deployment_id],
                        POLICY,
                        now=datetime.now(UTC) + timedelta(days=2),
                        say=lambda line: None,
                    )
                )
            except Exception as error:  # asserted below, beside the app's own outcome
                maintenance_errors.append(error)
            time.sleep(0.5)

    maintenance = threading.Thread(target=maintain_again_and_again, daemon=True)
    try:
        deadline = time.monotonic() + 120
        while not any(q.isActive for q in spark.streams.active) and time.monotonic() < deadline:
            assert app.error is None, f"the app did not start: {app.error!r}"
            time.sleep(0.5)
        orders.start()
        maintenance.start()
        orders.join(timeout=SECONDS + 60)
        assert orders.error is None
        assert not orders.is_alive()
        expected = {
            k: (w.order_count, w.revenue)
            for k, w in expected_windows(orders.honest, window_seconds=15).items()
        }
        gold: dict[tuple[str, str, datetime], tuple[int, Decimal]] = {}
        deadline = time.monotonic() + GOLD_WAIT_S
        while time.monotonic() < deadline and gold != expected:
            assert app.error is None, f"a batch failed beside maintenance: {app.error!r}"
            time.sleep(2)
            rows = gold_frame(spark, config.names.gold_revenue_table).collect()
            gold = {(r.location_id, r.order_type, r.window_start): (r.order_count, r.revenue) for r in rows}
        maintenance_done.set()
        maintenance.join(timeout=120)
        assert app.error is None, f"a batch failed beside maintenance: {app.error!r}"
        assert app.is_alive(), "the app keeps running beside maintenance"
        assert gold == expected, f"{len(expected)} windows expected, gold has {len(gold)}"
    finally:
        maintenance_done.set()
        app.stop()
    assert app.error is None, f"the app failed: {app.error!r}"
    assert not maintenance_errors, (
        f"{len(maintenance_errors)} of {len(runs) + len(maintenance_errors)} runs failed: "
        f"{maintenance_errors[0]!r}"
    )

    # The forced conflicts happened in bronze: maintenance compacted today's files, which the live
    # batches append to, more than once while the app ran (Spark's appends and delta-rs's compaction
    # commits interleaved in bronze's log).
    bronze_compactions = sum(
        1 for reports in runs for r in reports if r.kind == "bronze" and r.files_compacted
    )
    assert bronze_compactions >= 2, _summaries(runs)
    # Gold gives compaction nothing to take from a live batch: each MERGE rewrites the one file of
    # each hour it changes, so an hour holds one file, and compacting it is a no-op with no commit.
    gold_files = pa.table(DeltaTable(config.names.gold_revenue_table).get_add_actions(flatten=True))
    hours = gold_files.column(f"partition.{GOLD_HOUR_COLUMN}").to_pylist()
    assert len(hours) == len(set(hours)), f"an hour of gold in more than one file: {sorted(hours)}"


def _summaries(runs: list[list[TableMaintenance]]) -> str:
    """The last runs' gold and bronze lines, without the table paths."""
    return "\n".join(
        f"{r.role}: {r.summary().split(': ', 1)[1]}"
        for reports in runs[-4:]
        for r in reports
        if r.kind in ("gold", "bronze")
    )
