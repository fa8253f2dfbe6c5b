"""The `reprocess_revenue` DAG through real Airflow (`dag.test()`), spark-submit and Delta.

Three consecutive one-minute intervals are reprocessed as a backfill would: three successful
runs, each with its reconciliation report, after which gold equals the independent oracle
over every order (including the late ones the streaming app dropped). Rerunning the first
interval finds nothing to change.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from revenue_platform.local_stack.airflow_local import AirflowLocalSettings
from revenue_platform.orders_generator import (
    GeneratorSettings,
    expected_windows,
    generate_orders,
    generate_stores,
    produce,
)
from revenue_platform.paths import DAGS_DIR
from revenue_platform.reprocessing import report_path
from spark_apps import io
from spark_apps.config import load_config
from spark_apps.orders_streaming_app import run
from tests.kafka_helpers import app_topic_overrides, create_app_topics, unique_suffix

pytestmark = pytest.mark.integration

START = datetime(2026, 11, 22, 9, 0, 0)


def test_three_intervals_reprocess_to_exact_totals_and_a_rerun_changes_nothing(
    kafka_bootstrap: str,
    airflow_db: AirflowLocalSettings,
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    suffix = unique_suffix()
    lake = str(tmp_path / "lake")
    # The form's lake_root must lie inside the platform's lake.
    monkeypatch.setenv("PLATFORM_LAKE_ROOT", lake)
    overrides = {
        "kafka.max_offsets_per_trigger": 150,
        "window.watermark": "10 seconds",
        "shuffle_partitions": 2,
        **app_topic_overrides(suffix),
    }
    config = load_config(
        overrides={
            "deployment_id": "backfill",
            "lake_root": lake,
            "kafka.bootstrap_servers": kafka_bootstrap,
            "trigger.mode": "available_now",
            **overrides,
        }
    )
    create_app_topics(kafka_bootstrap, suffix)
    on_time = list(
        generate_orders(GeneratorSettings(orders=240, stores=2, start=START, span_seconds=180, seed=21))
    )
    produce(kafka_bootstrap, config.kafka.stores_topic, generate_stores(2))
    produce(kafka_bootstrap, config.kafka.orders_topic, on_time)
    run(config, spark)
    late = list(
        generate_orders(
            GeneratorSettings(
                orders=12, stores=2, start=START, span_seconds=50, seed=22, first_order_id=90_000
            )
        )
    )
    produce(kafka_bootstrap, config.kafka.orders_topic, late)
    run(config, spark)

    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS_DIR / "reprocess_revenue.py"))
    assert bag.import_errors == {}
    reprocess_revenue = bag.dags["reprocess_revenue"]

    def reprocess(minute: int) -> dict:
        start, end = START + timedelta(minutes=minute), START + timedelta(minutes=minute + 1)
        dag_run = reprocess_revenue.test(
            run_conf={
                "range_start": f"{start.isoformat()}Z",
                "range_end": f"{end.isoformat()}Z",
                "deployment_id": "backfill",
                "source": "auto",
                "repair": True,
                "config_overrides": overrides,
                "lake_root": lake,
            }
        )
        assert dag_run.state == "success", f"interval {minute} failed"
        from datetime import UTC

        report = Path(report_path(lake, "backfill", start.replace(tzinfo=UTC), end.replace(tzinfo=UTC)))
        return json.loads(report.read_text())

    reports = [reprocess(minute) for minute in range(3)]
    assert reports[0]["different"] >= 1, "the late orders of minute 0 were missing from gold"
    assert all(r["source"] == "kafka" for r in reports)

    gold = {
        (r.location_id, r.order_type, r.window_start): (r.order_count, r.revenue)
        for r in io.read_gold(spark, config.names.gold_revenue_table).collect()
    }
    expected = {k: (w.order_count, w.revenue) for k, w in expected_windows(on_time + late, 15).items()}
    assert gold == expected

    rerun = reprocess(0)
    assert rerun["missing"] == rerun["extra"] == rerun["different"] == 0
    assert rerun["repaired"] is False
