"""A micro-batch's plans carry values that change every batch (the watermark it counts from, its batch
id), and none of them may reach the Java source Spark generates: a new source is compiled again
and runs as a class the JIT has not seen, every batch. Counted with Spark's own `CodegenMetrics`
(one compilation per generated class that was not in Spark's code cache), on a real Delta table."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_apps.revenue.counting import count_batch, not_counted
from spark_apps.storage.bronze import BronzeAppender, bronze_rows, ensure_bronze_table, read_bronze
from spark_apps.validation.schemas import BRONZE_ORDER_COLUMNS, BRONZE_SCHEMA, KAFKA_RAW_COLUMNS

S = 1_000_000
ORDERS = 1_000


def _compilations(spark: SparkSession) -> int:
    metrics = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics  # type: ignore[union-attr]
    return int(metrics.METRIC_COMPILATION_TIME().getCount())


def _validated_batch(spark: SparkSession) -> DataFrame:
    """A cached batch as foreachBatch gets it: valid orders at event times 0, 1, ... 999 s, each
    appended a microsecond after it, none a repeat."""
    columns = {field.name: F.lit(None).cast(field.dataType) for field in BRONZE_SCHEMA.fields}
    columns |= {
        "offset": F.col("id"),
        "timestamp": F.timestamp_micros(F.col("id") * S + 1),
        "ordered_at": F.timestamp_micros(F.col("id") * S),
        "location_id": F.lit("L"),
        "order_type": F.lit("GENERAL"),
        "final_amount": F.lit(1).cast("decimal(18,2)"),
    }
    names = (*KAFKA_RAW_COLUMNS, "dlq_reason", *BRONZE_ORDER_COLUMNS)
    batch = spark.range(ORDERS).select(
        *[columns[name].alias(name) for name in names], F.lit(False).alias("repeat")
    )
    batch.persist()
    batch.count()
    return batch


def test_batches_with_a_new_watermark_and_batch_id_run_the_code_compiled_for_the_first(
    spark: SparkSession, tmp_path: Path
) -> None:
    batch = _validated_batch(spark)
    table = str(tmp_path / "bronze")
    ensure_bronze_table(spark, table)
    bronze = BronzeAppender(table)
    late, compiled_after_the_first = [], []
    try:
        for batch_id, watermark_s in enumerate((100, 250, 400)):
            before = _compilations(spark)
            counted = count_batch(batch, watermark_s * S, "15 seconds", None)
            bronze.append(bronze_rows(batch, batch_id, not_counted(watermark_s * S)), batch_id)
            if batch_id > 0:
                compiled_after_the_first.append(_compilations(spark) - before)
            late.append(counted.late)
    finally:
        batch.unpersist()

    assert compiled_after_the_first == [0, 0]
    # The values still arrive: orders at or before each watermark are late, and bronze marks them.
    assert late == [101, 251, 401]
    archived = (
        read_bronze(spark, table)
        .groupBy("ingest_batch_id")
        .agg(F.count_if("superseded").alias("superseded"), F.count("*").alias("rows"))
        .orderBy("ingest_batch_id")
        .collect()
    )
    assert [(r["ingest_batch_id"], r["superseded"], r["rows"]) for r in archived] == [
        (0, 101, ORDERS),
        (1, 251, ORDERS),
        (2, 401, ORDERS),
    ]
