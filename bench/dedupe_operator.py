"""`python -m bench.dedupe_operator`: what the stream's dedupe operator costs per batch, at scale.

One process, one local SparkSession. Generated Kafka order records (the bench's mix) are validated
once, multiplied into `--orders` rows with distinct order ids (so the state grows by every row, as
in a replay whose history falls inside one horizon) and Kafka timestamps 1 ms apart, and written as
parquet files of `--batch` rows. Each variant then streams those files, one file per micro-batch,
through `foreachBatch`, which persists the batch as the app does and counts the rows it would count
and a hash of all their columns:

- `none`: the validated rows as they are (the floor every variant pays);
- `operator`: `spark_apps.revenue.dedupe.with_repeats`, the app's dedupe in Spark's state store;
- `operator_narrow`: the same on only the columns the operator reads (what carrying the rest of the
  row through it costs; the operator carries it packed as one binary column, `RowBytes`);
- `operator_routed`: the operator on rows whose line items are replaced by the split topics' JSON
  of the order, made before it.

It reports each variant's batches (rows, trigger time, the state operator's update and commit time,
its state rows) and the records per second over the batches after the first (the first one
compiles). Single runs on a shared machine vary by ±30 %: compare variants of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.validator_ablation import order_records

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# Far above any generated order id: copy k of an order gets id + k * ID_STRIDE.
ID_STRIDE = 1_000_000_000
VARIANTS = ("none", "operator", "operator_narrow", "operator_routed")
# What the operator needs of a row: the narrow variant carries only these through it, to measure what
# carrying the rest of the row costs.
_NARROW_COLUMNS = ("order_id", "timestamp", "partition", "offset", "dlq_reason")


def write_batches(spark: SparkSession, folder: Path, orders: int, batch: int, cores: int) -> int:
    """Validated order rows, `orders` of them, as parquet files of `batch` rows: each copy of the base
    rows gets ids of its own, so only the bench mix's re-sends repeat an id."""
    from pyspark.sql import functions as F

    from spark_apps.validation.orders import parse_and_validate_orders

    base_rows = min(orders, 100_000)
    validated = parse_and_validate_orders(order_records(spark, base_rows, cores)).cache()
    base = validated.count()
    copies = -(-orders // base)
    copy = F.col("_copy")
    position = copy * F.lit(base) + F.col("offset")
    multiplied = (
        validated.crossJoin(spark.range(copies).withColumnRenamed("id", "_copy"))
        .withColumn("order_id", F.col("order_id") + copy * F.lit(ID_STRIDE))
        .withColumn("offset", position)
        .withColumn("timestamp", F.timestamp_millis(F.lit(1_767_225_600_000) + position))
        .drop("_copy")
        .filter(F.col("offset") < orders)
    )
    files = -(-orders // batch)
    (
        multiplied.repartitionByRange(files, "offset")
        .sortWithinPartitions("offset")
        .write.mode("overwrite")
        .parquet(str(folder))
    )
    validated.unpersist()
    return spark.read.parquet(str(folder)).count()


def run_variant(
    spark: SparkSession, variant: str, source: Path, work: Path, drop: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Stream the files through `variant`, one per batch, without the columns `drop`; its batches'
    progress, summarised."""
    from pyspark.sql import functions as F

    from spark_apps.revenue.dedupe import REPEAT_COLUMN, with_repeats
    from spark_apps.validation.schemas import ORDER_COLUMNS

    stream = (
        spark.readStream.schema(spark.read.parquet(str(source)).schema)
        .option("maxFilesPerTrigger", 1)
        .parquet(str(source))
        .drop(*drop)
    )
    if variant == "operator_routed":
        # The split topics' JSON made before the operator, in place of the line items it is made of.
        routed = F.when(F.col("dlq_reason").isNull(), F.to_json(F.struct(*ORDER_COLUMNS)))
        stream = with_repeats(
            stream.withColumn("routed_value", routed).drop("order_line_items"), horizon_s=3600, delay_s=30
        )
    elif variant == "operator_narrow":
        stream = with_repeats(stream.select(*_NARROW_COLUMNS), horizon_s=3600, delay_s=30)
    elif variant == "operator":
        stream = with_repeats(stream, horizon_s=3600, delay_s=30)
    counted: list[int] = []

    def count(batch: DataFrame, _batch_id: int) -> None:
        batch.persist()  # as the app does with every batch (its writes read it several times)
        try:
            counted_rows(batch.filter(~F.col(REPEAT_COLUMN)) if REPEAT_COLUMN in batch.columns else batch)
        finally:
            batch.unpersist()

    def counted_rows(frame: DataFrame) -> None:
        # A hash of every column, so that each variant reads the whole row (a plain count would let
        # Spark skip the columns the operator has to carry).
        columns = [c for c in frame.columns if c != REPEAT_COLUMN]
        valid = frame.filter(F.col("dlq_reason").isNull())
        counted.append(valid.agg(F.count(F.lit(1)), F.bit_xor(F.xxhash64(*columns))).collect()[0][0])

    query = (
        stream.writeStream.foreachBatch(count)
        .option("checkpointLocation", str(work / f"checkpoint-{variant}"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    batches = []
    for progress in query.recentProgress:
        rows = progress["numInputRows"]
        if not rows:
            continue
        state = (progress.get("stateOperators") or [{}])[0]
        batches.append(
            {
                "rows": rows,
                "trigger_ms": progress["durationMs"].get("triggerExecution"),
                "state_update_ms": state.get("allUpdatesTimeMs"),
                "state_commit_ms": state.get("commitTimeMs"),
                "state_rows": state.get("numRowsTotal"),
            }
        )
    warm = batches[1:] or batches
    warm_rows = sum(b["rows"] for b in warm)
    warm_ms = sum(b["trigger_ms"] for b in warm)
    return {
        "batches": batches,
        "counted": sum(counted),
        "warm_records_per_s": round(warm_rows * 1000 / warm_ms) if warm_ms else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--orders", type=int, default=2_000_000)
    parser.add_argument("--batch", type=int, default=500_000)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument(
        "--drop-columns", default="", help="comma-separated columns every variant reads without"
    )
    args = parser.parse_args(argv)
    from spark_apps.engine.session import BATCH_CACHE_CONF, build_spark_session, local_jar_paths

    variants = [v for v in args.variants.split(",") if v]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        parser.error(f"unknown variants {unknown}; choose from {', '.join(VARIANTS)}")
    spark = build_spark_session(
        "dedupe-operator-bench",
        master=f"local[{args.cores}]",
        jars=local_jar_paths(),
        extra_conf={
            "spark.sql.shuffle.partitions": str(args.cores),
            "spark.driver.memory": "2g",
            # The batch is persisted as the app persists it.
            **BATCH_CACHE_CONF,
            # e.g. a JFR recording of the run: -XX:StartFlightRecording=filename=/tmp/run.jfr
            "spark.driver.extraJavaOptions": os.environ.get("DEDUPE_BENCH_JAVA_OPTIONS", ""),
        },
    )
    spark.sparkContext.setLogLevel("WARN")
    load_at_start = os.getloadavg()
    try:
        with tempfile.TemporaryDirectory(prefix="dedupe-operator-bench-") as folder:
            work = Path(folder)
            rows = write_batches(spark, work / "orders", args.orders, args.batch, args.cores)
            drop = tuple(c for c in args.drop_columns.split(",") if c)
            results = {v: run_variant(spark, v, work / "orders", work, drop) for v in variants}
        print(
            json.dumps(
                {
                    "rows": rows,
                    "batch": args.batch,
                    "dropped_columns": args.drop_columns,
                    "cores": args.cores,
                    "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
                    "load_average_at_start": load_at_start,
                    "variants": results,
                },
                indent=2,
            )
        )
        return 0
    finally:
        spark.stop()


if __name__ == "__main__":
    raise SystemExit(main())
