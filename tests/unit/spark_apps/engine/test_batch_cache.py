"""The app's batch cache (`UnsafeRowBatches`, spark_apps/jvm/order-validator): Spark's row bytes instead of
Spark's columns. A cached DataFrame must read back exactly what it was computed as, whole, by any
subset and order of its columns, across many cached batches and for a row larger than a batch, on
the tests' session, which caches as the app does."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_apps.engine.session import ROW_CACHE_SERIALIZER
from tests.row_helpers import line_items

ROWS = 40_000  # ~9 MB of rows: several batches of ~4 MiB in each of the two partitions


def _orders_like(spark: SparkSession, rows: int) -> DataFrame:
    """Every kind of column the app's batch carries: nulls in each, decimals (compact and not),
    timestamps, binary, nested line items, a map."""
    return spark.range(rows, numPartitions=2).select(
        F.col("id").alias("offset"),
        F.when(F.col("id") % 7 == 0, None)
        .otherwise(F.concat(F.lit("order-"), F.col("id").cast("string")))
        .alias("order_id"),
        (F.col("id") / 100).cast("decimal(18,2)").alias("final_amount"),
        (F.col("id") * 1_000_003).cast("decimal(38,6)").alias("wide_amount"),
        F.timestamp_micros(F.col("id") * 1_000_001).alias("timestamp"),
        F.col("id").cast("string").cast("binary").alias("value"),
        line_items(F.col("id")).alias("line_items"),
        F.create_map(F.lit("partition"), (F.col("id") % 4).cast("int")).alias("meta"),
        F.when(F.col("id") % 3 == 0, F.lit("no_store")).alias("dlq_reason"),
        (F.col("id") % 2 == 0).alias("repeat"),
    )


def test_the_tests_session_caches_as_the_app_does(spark: SparkSession) -> None:
    assert spark.conf.get("spark.sql.cache.serializer") == ROW_CACHE_SERIALIZER


def test_a_cached_batch_reads_back_whole_and_by_any_columns(spark: SparkSession) -> None:
    computed = _orders_like(spark, ROWS)
    expected = sorted(computed.collect())
    cached = _orders_like(spark, ROWS).persist()
    try:
        assert cached.count() == ROWS
        assert sorted(cached.collect()) == expected
        # A subset, in another order than the cache's (the count's and the writers' reads).
        columns = ["offset", "line_items", "final_amount", "order_id"]
        assert sorted(cached.select(*columns).collect()) == sorted(computed.select(*columns).collect())
        # A computation over the cached rows, as the engine's counting is.
        totals = cached.groupBy("dlq_reason").agg(F.sum("final_amount"), F.count("line_items"))
        expected_totals = computed.groupBy("dlq_reason").agg(F.sum("final_amount"), F.count("line_items"))
        assert totals.orderBy("dlq_reason").collect() == expected_totals.orderBy("dlq_reason").collect()
        assert cached.filter(F.col("order_id").isNull()).count() == len(
            [r for r in expected if r.order_id is None]
        )
    finally:
        cached.unpersist(blocking=True)


def test_a_row_larger_than_a_cached_batch_and_an_empty_partition(spark: SparkSession) -> None:
    big = "x" * (5 << 20)  # larger than a cached batch's ~4 MiB: its batch holds it alone
    computed = spark.range(4, numPartitions=2).select(
        F.col("id"), F.when(F.col("id") == 1, F.lit(big)).otherwise(F.lit("small")).alias("text")
    )
    cached = (
        computed.filter(F.col("id") != 2).filter(F.col("id") != 3).persist()
    )  # the second partition (2, 3) is empty
    try:
        rows = sorted(cached.collect())
        assert [(row.id, len(row.text)) for row in rows] == [(0, 5), (1, 5 << 20)]
        assert rows[1].text == big
        assert cached.filter(F.col("id") > 5).count() == 0
    finally:
        cached.unpersist(blocking=True)
