"""`python -m bench.validator_ablation`: the order validator with and without its JVM fast path.

One process, one local SparkSession, the same cached DataFrame of generated Kafka order records
(the bench's mix: 1 malformed record per 1,000 orders, 1 re-send per 200), written to Spark's
`noop` sink: what is timed is the validation alone, warm (one untimed run first, then the best
of `--runs`). Variants: `exact` (every record through the variant-based checks,
`exact_order_validation`), `fast` (`parse_and_validate_orders`: the JVM fast path, the exact
checks only for what it does not certify) and `udf_only` (just the fast path's UDF, for scale).

Per record it reports task us (the tasks' run time summed, from Spark's status store: core-us as a
Spark event-log profile counts them, without the driver's planning), task CPU us and GC; `scan_only`
(reading the cached column) is the floor every variant pays. Wall time is printed too, but on a
shared machine it mostly measures the other load.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from revenue_platform.orders_generator import GeneratorSettings, generate_orders

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def order_records(spark: SparkSession, orders: int, cores: int) -> DataFrame:
    """Kafka-shaped rows of generated orders (the bench's mix), cached and materialised."""
    from spark_apps.validation.schemas import KAFKA_RAW_SCHEMA

    settings = GeneratorSettings(
        orders=orders, stores=50, span_seconds=3600, bad_every=1000, duplicate_every=200
    )
    # Every event time is well before the Kafka timestamp: the mix's own bad records aside, all valid.
    kafka_timestamp = settings.start + timedelta(hours=2)
    rows = [
        (record.key, record.value, "orders", 0, offset, kafka_timestamp, 0)
        for offset, record in enumerate(generate_orders(settings))
    ]
    frame = spark.createDataFrame(rows, KAFKA_RAW_SCHEMA).repartition(cores).cache()
    frame.count()
    return frame


def _task_times(spark: SparkSession, group: str) -> tuple[float, float, float]:
    """(run, CPU, GC) seconds summed over the tasks of the jobs of `group` (Spark's status store)."""
    context = spark.sparkContext
    store = context._jsc.sc().statusStore()
    stage_ids = [
        stage
        for job in context.statusTracker().getJobIdsForGroup(group)
        for stage in (context.statusTracker().getJobInfo(job) or _NO_JOB).stageIds
    ]
    deadline = time.monotonic() + 10
    # The status store is filled by a listener, asynchronously: wait until every stage has ended.
    while True:
        stages = [store.lastStageAttempt(stage) for stage in stage_ids]
        if all(str(s.status()) in ("COMPLETE", "SKIPPED") for s in stages) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    run_s = sum(s.executorRunTime() + s.executorDeserializeTime() for s in stages) / 1e3
    cpu_s = sum(s.executorCpuTime() + s.executorDeserializeCpuTime() for s in stages) / 1e9
    gc_s = sum(s.jvmGcTime() for s in stages) / 1e3
    return run_s, cpu_s, gc_s


class _NoJob:
    stageIds: tuple[int, ...] = ()


_NO_JOB = _NoJob()


def time_variant(
    spark: SparkSession, name: str, build: Callable[[], DataFrame], records: int, runs: int
) -> dict[str, Any]:
    """Best of `runs` warm noop writes (after one untimed warm-up run): wall time and task time."""
    attempts = []
    for attempt in range(runs + 1):
        group = f"validator-ablation-{name}-{attempt}"
        spark.sparkContext.setJobGroup(group, group)
        began = time.perf_counter()
        build().write.format("noop").mode("overwrite").save()
        wall = time.perf_counter() - began
        task_s, task_cpu_s, gc_s = _task_times(spark, group)
        if attempt > 0:
            attempts.append(
                {
                    "wall_s": round(wall, 3),
                    "task_s": round(task_s, 3),
                    "task_cpu_s": round(task_cpu_s, 3),
                    "gc_s": round(gc_s, 3),
                }
            )
    best = min(attempts, key=lambda a: a["task_s"])
    return {
        "attempts": attempts,
        "task_us_per_record": round(best["task_s"] * 1e6 / records, 2),
        "task_cpu_us_per_record": round(best["task_cpu_s"] * 1e6 / records, 2),
        "task_gc_us_per_record": round(best["gc_s"] * 1e6 / records, 2),
        "best_wall_s": min(a["wall_s"] for a in attempts),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--orders", type=int, default=200_000)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    from pyspark.sql import functions as F

    from spark_apps.engine.session import build_spark_session, local_jar_paths
    from spark_apps.validation.orders import (
        FAST_PATH_FUNCTION,
        exact_order_validation,
        parse_and_validate_orders,
        register_order_fast_path,
    )

    spark = build_spark_session(
        "validator-ablation",
        master=f"local[{args.cores}]",
        jars=local_jar_paths(),
        extra_conf={"spark.sql.shuffle.partitions": str(args.cores), "spark.driver.memory": "2g"},
    )
    spark.sparkContext.setLogLevel("WARN")
    load_at_start = os.getloadavg()
    try:
        records = order_records(spark, args.orders, args.cores)
        count = records.count()
        register_order_fast_path(spark)
        fast = parse_and_validate_orders(records)
        exact = exact_order_validation(records)
        certified = records.select(F.call_function(FAST_PATH_FUNCTION, "value").isNotNull().alias("c"))
        certified_share = certified.filter("c").count() / count
        mismatches = (
            fast.exceptAll(exact).count() + exact.exceptAll(fast).count()  # same rows, same values
        )
        variants: dict[str, Callable[[], DataFrame]] = {
            "exact": lambda: exact,
            "fast": lambda: fast,
            "udf_only": lambda: records.select(F.call_function(FAST_PATH_FUNCTION, "value").alias("typed")),
            "scan_only": lambda: records.select("value"),
        }
        timings = {
            name: time_variant(spark, name, build, count, args.runs) for name, build in variants.items()
        }
        for timing in timings.values():
            # What `cores` busy cores would sustain on validation alone at this cost per record.
            timing["records_per_s_on_cores"] = round(args.cores * 1e6 / timing["task_us_per_record"])
        results = {
            "records": count,
            "cores": args.cores,
            "certified_share": round(certified_share, 4),
            "rows_differing_between_exact_and_fast": mismatches,
            "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "load_average_at_start": load_at_start,
            "variants": timings,
        }
        print(json.dumps(results, indent=2))
        exact_us, fast_us = timings["exact"]["task_us_per_record"], timings["fast"]["task_us_per_record"]
        fast_rate, exact_rate = (timings[v]["records_per_s_on_cores"] for v in ("fast", "exact"))
        print(
            f"task time per record: exact {exact_us} us, fast {fast_us} us ({exact_us / fast_us:.1f}x less); "
            f"{fast_rate:,} vs {exact_rate:,} records/s on {args.cores} cores"
        )
        return 0 if mismatches == 0 else 1
    finally:
        spark.stop()


if __name__ == "__main__":
    raise SystemExit(main())
