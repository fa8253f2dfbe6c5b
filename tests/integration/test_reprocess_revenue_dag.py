"""The `reprocess_revenue` DAG through real Airflow (`dag.test()`), spark-submit and Delta.

Two consecutive one-minute intervals are reprocessed as a backfill would: two successful
runs, each with its reconciliation report, after which gold equals the independent oracle
over every order (including the late ones the streaming app dropped), and the app's later
batches leave the repaired minutes alone. (That a rerun finds nothing to change is the job's
claim, proved without a third spark-submit in test_reprocess_revenue.py.)
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from decimal import Decimal
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
from revenue_platform.reprocessing import plan_reprocessing, report_path, windows_closed
from spark_apps.contract.config import load_config
from spark_apps.orders_streaming_app import run
from spark_apps.revenue.windows import to_revenue_kafka_records
from spark_apps.storage.gold import gold_frame, with_window_hour
from spark_apps.storage.kafka import write_to_kafka
from spark_apps.validation.schemas import GOLD_SCHEMA
from tests.kafka_helpers import app_topic_overrides, create_app_topics, read_topic, unique_suffix
from tests.registry_helpers import register_deployment

pytestmark = pytest.mark.integration

START = datetime(2026, 11, 22, 9, 0, 0)


def orders_at(offset: timedelta, count: int, seed: int, first_order_id: int) -> list:
    """`count` orders of two stores from START + offset on, within 30 seconds."""
    settings = GeneratorSettings(
        orders=count,
        stores=2,
        start=START + offset,
        span_seconds=30,
        seed=seed,
        first_order_id=first_order_id,
    )
    return list(generate_orders(settings))


def test_two_intervals_reprocess_to_exact_totals_that_later_batches_keep(
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
    # The DAG repairs a registered deployment with its registered config (window, topics, rules).
    register_deployment(lake, config)
    create_app_topics(kafka_bootstrap, suffix)
    on_time = list(
        generate_orders(GeneratorSettings(orders=160, stores=2, start=START, span_seconds=120, seed=21))
    )
    produce(kafka_bootstrap, config.kafka.stores_topic, generate_stores(2))
    produce(kafka_bootstrap, config.kafka.orders_topic, on_time)
    run(config, spark)

    # The app is behind: its event-time watermark (newest order - 10 s) has not passed the end of
    # minute 1, so it may still write those windows; a repair now could be overwritten. Wait.
    last_minute = {
        "range_start": f"{START + timedelta(minutes=1):%Y-%m-%dT%H:%M:%S}Z",
        "range_end": f"{START + timedelta(minutes=2):%Y-%m-%dT%H:%M:%S}Z",
        "deployment_id": "backfill",
        "lake_root": lake,
    }
    assert not windows_closed(plan_reprocessing(last_minute, None, None, None))

    late = list(
        generate_orders(
            GeneratorSettings(
                orders=12, stores=2, start=START, span_seconds=50, seed=22, first_order_id=90_000
            )
        )
    )
    # A later order moves the watermark past the two minutes: from now on the app never writes
    # their windows again, and a repair sticks.
    later = orders_at(timedelta(minutes=5), count=1, seed=23, first_order_id=80_000)
    produce(kafka_bootstrap, config.kafka.orders_topic, late + later)
    run(config, spark)
    assert windows_closed(plan_reprocessing(last_minute, None, None, None))

    # A window no order belongs to, in gold and on the revenue topic (as a faulty writer would leave
    # it): the repair must delete it from gold and tombstone it on the topic.
    gold_path = config.names.gold_revenue_table
    minute_one = [
        r
        for r in gold_frame(spark, gold_path).collect()
        if START + timedelta(minutes=1) <= r.window_start < START + timedelta(minutes=2)
    ]
    phantom = spark.createDataFrame([{**minute_one[0].asDict(), "location_id": "store_9"}], GOLD_SCHEMA)
    with_window_hour(phantom).write.format("delta").mode("append").save(gold_path)
    write_to_kafka(to_revenue_kafka_records(phantom), config, config.kafka.revenue_topic)

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
                "lake_root": lake,
            }
        )
        assert dag_run.state == "success", f"interval {minute} failed"
        from datetime import UTC

        report = Path(report_path(lake, "backfill", start.replace(tzinfo=UTC), end.replace(tzinfo=UTC)))
        return json.loads(report.read_text())

    reports = [reprocess(minute) for minute in range(2)]
    assert reports[0]["different"] >= 1, "the late orders of minute 0 were missing from gold"
    assert reports[1]["extra"] == 1, "the phantom window of minute 1"
    assert all(r["source"] == "kafka" for r in reports)

    gold = {
        (r.location_id, r.order_type, r.window_start): (r.order_count, r.revenue)
        for r in gold_frame(spark, config.names.gold_revenue_table).collect()
    }
    expected = {
        k: (w.order_count, w.revenue) for k, w in expected_windows(on_time + late + later, 15).items()
    }
    assert gold == expected

    # The compacted revenue topic's latest value per key (tombstones delete) is gold, to the cent.
    latest_per_key: dict[str, tuple[int, Decimal]] = {}
    for record in read_topic(kafka_bootstrap, config.kafka.revenue_topic):
        key = record.key.decode() if record.key else ""
        if record.value is None:
            latest_per_key.pop(key, None)
        else:
            value = json.loads(record.value)
            latest_per_key[key] = (value["order_count"], Decimal(str(value["revenue"])))
    assert latest_per_key == {
        f"{loc}|{typ}|{start.strftime('%Y-%m-%dT%H:%M:%SZ')}": totals
        for (loc, typ, start), totals in gold.items()
    }

    # The app goes on streaming newer orders: the repaired minutes stay repaired.
    newer = orders_at(timedelta(minutes=6), count=20, seed=24, first_order_id=70_000)
    produce(kafka_bootstrap, config.kafka.orders_topic, newer)
    run(config, spark)
    repaired = {key: totals for key, totals in expected.items() if key[2] < START + timedelta(minutes=2)}
    after = {
        (r.location_id, r.order_type, r.window_start): (r.order_count, r.revenue)
        for r in gold_frame(spark, config.names.gold_revenue_table).collect()
        if r.window_start < START + timedelta(minutes=2)
    }
    assert after == repaired
