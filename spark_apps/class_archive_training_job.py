"""The training run of the Spark driver's class archive: a few seconds of the platform's own work.

A Spark driver spends most of its start loading and verifying classes: Spark SQL, Delta, the Kafka
connector, RocksDB's state store, ~24,000 of them. `make jvm` runs this job once under
`spark-submit` with `-XX:ArchiveClassesAtExit` (JDK class data sharing); every later driver maps the
archive instead of loading those classes from the jars again (`revenue_platform.local_stack.class_archive`).
What this job does decides what the archive holds, so it touches what the apps touch: the order
validator, the dedupe operator on the RocksDB state store in a streaming query, the window counting,
Delta appends and a gold MERGE, reads of Delta tables, and the Kafka source's plan (no broker is
contacted). It writes only under the folder it is given.

Run: spark-submit --jars <.jvm/spark-jars/*.jar> spark_apps/class_archive_training_job.py <scratch folder>
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from spark_apps.contract.records import GOLD_BATCH_COLUMN, STORE_ADDRESS_COLUMNS
from spark_apps.engine.session import DELTA_CONF, build_spark_session
from spark_apps.revenue.counting import not_counted
from spark_apps.revenue.dedupe import with_repeats
from spark_apps.revenue.stores import enrich_with_stores
from spark_apps.revenue.windows import windowed_revenue
from spark_apps.storage.bronze import BronzeAppender, bronze_rows, ensure_bronze_table, read_bronze
from spark_apps.storage.gold import ensure_gold_table, gold_frame, merge_gold
from spark_apps.validation.orders import parse_and_validate_orders, valid_orders
from spark_apps.validation.schemas import KAFKA_RAW_SCHEMA

ORDERS = 200
STORE_ROWS_SCHEMA = StructType(
    [StructField(name, StringType()) for name in ("location_id", *STORE_ADDRESS_COLUMNS)]
)
START = datetime(2026, 1, 1, tzinfo=UTC)


def _kafka_rows() -> list[tuple[bytes, bytes, str, int, int, datetime, int]]:
    """Orders as the Kafka source yields them: valid ones, a repeat and a malformed record."""
    rows = []
    for offset in range(ORDERS):
        ordered_at = START + timedelta(seconds=offset)
        order_id = offset % (ORDERS - 1)  # the last order repeats the first
        order = (
            f'{{"orderId": {order_id}, "locationId": "store_{offset % 5}", '
            f'"finalAmount": {offset % 50}.25, "orderType": "{"GENERAL" if offset % 2 else "RESTAURANT"}", '
            '"orderLineItems": [{"item": "Bread", "count": 1, "amount": 1.25}], '
            f'"orderedDateTime": "{ordered_at:%Y-%m-%dT%H:%M:%S}"}}'
        )
        value = order.encode() if offset != 7 else b"{not json"
        rows.append((str(offset).encode(), value, "orders", offset % 2, offset, ordered_at, 0))
    return rows


def _count_into_gold(gold_path: str, bronze_path: str) -> Callable[[DataFrame, int], None]:
    def batch(frame: DataFrame, batch_id: int) -> None:
        valid = valid_orders(frame).filter(~F.col("repeat"))
        revenue = windowed_revenue(valid, "15 seconds")
        stores = frame.sparkSession.createDataFrame([], STORE_ROWS_SCHEMA)
        enriched = enrich_with_stores(revenue, stores).withColumn(
            GOLD_BATCH_COLUMN, F.lit(batch_id).cast("long")
        )
        merge_gold(enriched, gold_path)
        BronzeAppender(bronze_path).append(bronze_rows(frame, batch_id, not_counted(None)), batch_id)

    return batch


def train(spark: SparkSession, scratch: Path) -> None:
    raw_dir = str(scratch / "raw")
    spark.createDataFrame(_kafka_rows(), KAFKA_RAW_SCHEMA).write.mode("overwrite").parquet(raw_dir)
    gold_path, bronze_path = str(scratch / "gold"), str(scratch / "bronze")
    ensure_gold_table(spark, gold_path)
    ensure_bronze_table(spark, bronze_path)
    stream = parse_and_validate_orders(spark.readStream.schema(KAFKA_RAW_SCHEMA).parquet(raw_dir))
    query = (
        with_repeats(stream, horizon_s=3600, delay_s=30)
        .writeStream.foreachBatch(_count_into_gold(gold_path, bronze_path))
        .option("checkpointLocation", str(scratch / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    gold_frame(spark, gold_path).agg(F.sum("order_count")).collect()
    read_bronze(spark, bronze_path).filter(F.col("dlq_reason").isNotNull()).count()
    # The Kafka source's plans, batch and streaming: built, never run (nothing listens on port 9).
    for reader in (spark.read, spark.readStream):
        kafka = reader.format("kafka").option("kafka.bootstrap.servers", "127.0.0.1:9")
        assert kafka.option("subscribe", "orders").load().columns


def main(argv: list[str]) -> int:
    spark = build_spark_session("class-archive-training", extra_conf=dict(DELTA_CONF))
    try:
        train(spark, Path(argv[0]))
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
