"""The dedupe operator reads five columns of a record and carries the others through it packed as one
binary column of Spark's row bytes (`RowBytes`, spark_apps/jvm/order-validator/.../state). Every column
must come out as it went in, in its place, whatever its type, null or not; the packing itself must
give back exactly what it was given, in generated code and in Spark's interpreted evaluation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.classic.column import Column as ClassicColumn

from spark_apps.revenue.dedupe import CONFLICT_COLUMN, REPEAT_COLUMN, with_repeats
from tests.row_helpers import line_items
from tests.spark_helpers import session_conf

ROWS = 3_000


def _records(spark: SparkSession, rows: int) -> DataFrame:
    """The columns the operator reads among every kind it carries (the order of the app's rows does
    not matter here: the read ones are spread between the others on purpose)."""
    return spark.range(rows, numPartitions=2).select(
        F.col("id").cast("string").cast("binary").alias("value"),
        # Every third id twice: the operator judges repeats among these rows.
        (F.col("id") - F.col("id") % 3 * (F.col("id") % 2)).alias("order_id"),
        line_items(F.col("id")).alias("line_items"),
        F.timestamp_micros(F.lit(1_795_000_000_000_000) + F.col("id") * 1_000).alias("timestamp"),
        (F.col("id") / 100).cast("decimal(18,2)").alias("final_amount"),
        (F.col("id") * 1_000_003).cast("decimal(38,6)").alias("wide_amount"),
        (F.col("id") % 4).cast("int").alias("partition"),
        F.create_map(F.lit("store"), (F.col("id") % 7).cast("int")).alias("meta"),
        F.col("id").alias("offset"),
        F.when(F.col("id") % 7 == 0, None).otherwise(F.lit("note")).alias("note"),
        F.when(F.col("id") % 9 == 0, F.lit("no_store")).alias("dlq_reason"),
    )


def test_every_column_crosses_the_operator_as_it_came(spark: SparkSession, tmp_path: Path) -> None:
    records = _records(spark, ROWS)
    records.write.parquet(str(tmp_path / "input"))
    came_out: list[Any] = []
    schemas: list[list[tuple[str, str]]] = []

    def collect(batch: DataFrame, _batch_id: int) -> None:
        schemas.append([(f.name, f.dataType.simpleString()) for f in batch.schema.fields])
        came_out.extend(batch.drop(REPEAT_COLUMN, CONFLICT_COLUMN).collect())

    source = spark.readStream.schema(records.schema).parquet(str(tmp_path / "input"))
    query = (
        with_repeats(source, horizon_s=3600, delay_s=30)
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()

    expected_schema = [(f.name, f.dataType.simpleString()) for f in records.schema.fields]
    assert schemas
    assert all(
        s == [*expected_schema, (REPEAT_COLUMN, "boolean"), (CONFLICT_COLUMN, "boolean")] for s in schemas
    )
    assert sorted(came_out) == sorted(records.collect())


def _packed_and_back(spark: SparkSession, frame: DataFrame) -> DataFrame:
    row_bytes = spark._jvm.io.github.revenueplatform.state.RowBytes  # type: ignore[union-attr]
    packed = ClassicColumn(row_bytes.pack(F.struct(*frame.columns)._jc))  # type: ignore[operator]
    schema = spark._jvm.org.apache.spark.sql.types.DataType.fromJson(  # type: ignore[union-attr]
        frame.schema.json()
    )
    back = ClassicColumn(row_bytes.unpack(F.col("packed")._jc, schema))  # type: ignore[operator]
    return frame.select(packed.alias("packed")).select(back.alias("row")).select("row.*")


def test_packed_rows_read_back_exactly_in_generated_and_interpreted_code(spark: SparkSession) -> None:
    computed = _records(spark, ROWS)
    expected = sorted(computed.collect())
    # Generated code: the projection over a range is compiled.
    generated = _packed_and_back(spark, computed)
    assert generated.schema == computed.schema
    assert sorted(generated.collect()) == expected
    # Interpreted: Spark's own evaluation of each expression, no generated code anywhere.
    interpreted_conf = {
        "spark.sql.codegen.wholeStage": "false",
        "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    }
    with session_conf(spark, interpreted_conf):
        assert sorted(_packed_and_back(spark, computed).collect()) == expected
