"""A restart of a deployment whose bronze was written before its commits recorded the watermark (no
batch id in any of its latest commits): the resume scans bronze once for it, with the live rule
(`revenue.counting.watermark_event_us`: an order's event time, never past its Kafka timestamp), over
the valid orders of the batches before the one it resumes for."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from spark_apps.contract.naming import DeploymentNames
from spark_apps.engine.resume import resume_revenue_state
from spark_apps.revenue.state import WindowSpec
from spark_apps.storage.bronze import BronzeAppender, ensure_bronze_table
from spark_apps.storage.gold import ensure_gold_table
from spark_apps.validation.schemas import BRONZE_SCHEMA

S = 1_000_000
DELAY_US = 30 * S


def _append_as_an_old_version_did(
    spark: SparkSession, table: str, rows: list[tuple[int, int, int, str | None]]
) -> None:
    """Plain appends without userMetadata; rows are (ingest batch, event s, Kafka s, dlq_reason)."""
    frame = spark.createDataFrame(rows, "batch long, event_s long, kafka_s long, reason string")
    columns = {field.name: F.lit(None).cast(field.dataType) for field in BRONZE_SCHEMA.fields}
    columns |= {
        "topic": F.lit("orders"),
        "partition": F.lit(0),
        "offset": F.monotonically_increasing_id(),
        "timestamp": F.timestamp_micros(F.col("kafka_s") * S),
        "dlq_reason": F.col("reason"),
        "order_id": F.monotonically_increasing_id(),
        "location_id": F.lit("L"),
        "order_type": F.lit("GENERAL"),
        "final_amount": F.lit(1).cast("decimal(18,2)"),
        "ordered_at": F.timestamp_micros(F.col("event_s") * S),
        "superseded": F.lit(False),
        "ingest_batch_id": F.col("batch"),
        "ingest_date": F.to_date(F.timestamp_micros(F.col("kafka_s") * S)),
    }
    frame.select(*[columns[f.name].alias(f.name) for f in BRONZE_SCHEMA.fields]).write.format("delta").mode(
        "append"
    ).partitionBy("ingest_date").save(table)


def test_a_restart_scans_bronze_for_the_watermark_when_no_commit_recorded_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    names = DeploymentNames(str(tmp_path / "lake"), "old-bronze")
    ensure_bronze_table(spark, names.bronze_orders_table)
    ensure_gold_table(spark, names.gold_revenue_table)
    _append_as_an_old_version_did(
        spark,
        names.bronze_orders_table,
        [
            (0, 100, 101, None),
            (0, 900, 901, None),
            (0, 5_000, 950, None),  # dated ahead of its Kafka time: counts as 950 s, the newest
            (1, 800, 960, None),  # appended last, but its event time is older
            (1, 9_000, 9_001, "negative_amount"),  # a dead letter never moves it
        ],
    )
    _append_as_an_old_version_did(
        spark, names.bronze_orders_table, [(2, 20_000, 20_001, None)]
    )  # not before 2

    state, redo = resume_revenue_state(
        spark,
        names,
        WindowSpec(size_us=15 * S, slide_us=15 * S),
        DELAY_US,
        2,
        BronzeAppender(names.bronze_orders_table),
    )

    assert state.watermark_us == 950 * S - DELAY_US
    assert redo is None
    assert state.open_windows == 0  # gold holds none
