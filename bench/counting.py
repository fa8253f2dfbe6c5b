"""`python -m bench.counting`: what counting one batch on the executors costs (`spark_apps.revenue.counting`).

One process, one local SparkSession (`local[2]`, 2 shuffle partitions, as the app on this machine). A
cached batch of `--orders` synthetic valid orders (`--stores` stores, event times spread over
`--span-seconds`, one repeat in 200) is counted `--rounds` times in 15-second windows, the way the
engine counts each micro-batch: `count_batch` from an empty state, then `RevenueState.apply`.
It prints the windows and the milliseconds per round (median and minimum: on a shared machine the
minimum is the steadier of the two). A live batch at 20,000 orders/s with the 2 s trigger is
`--orders 40000 --span-seconds 2`; a replay batch is `--orders 500000 --span-seconds 3600`.
"""

from __future__ import annotations

import argparse
import statistics
import time

from spark_apps.revenue.state import MICROS_PER_SECOND, RevenueState, WindowSpec

WINDOW = "15 seconds"
WATERMARK_DELAY_US = 30 * MICROS_PER_SECOND
FIRST_EVENT_US = 1_795_000_000 * MICROS_PER_SECOND


def main() -> None:
    from pyspark.sql import functions as F

    from spark_apps.engine.session import build_spark_session
    from spark_apps.revenue.counting import count_batch

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--orders", type=int, default=40_000)
    parser.add_argument("--stores", type=int, default=50)
    parser.add_argument("--span-seconds", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    spark = build_spark_session(
        "bench-counting", extra_conf={"spark.master": "local[2]", "spark.sql.shuffle.partitions": "2"}
    )
    spark.sparkContext.setLogLevel("ERROR")
    event_us = F.lit(FIRST_EVENT_US) + F.floor(
        F.col("id") * args.span_seconds * MICROS_PER_SECOND / args.orders
    ).cast("long")
    batch = (
        spark.range(args.orders)
        .select(
            F.concat(F.lit("store_"), (F.col("id") % args.stores).cast("string")).alias("location_id"),
            F.when(F.col("id") % 3 == 0, "RESTAURANT").otherwise("GENERAL").alias("order_type"),
            F.timestamp_micros(event_us).alias("ordered_at"),
            ((F.col("id") % 100_000) / 100).cast("decimal(18,2)").alias("final_amount"),
            F.timestamp_micros(event_us + 1_000).alias("timestamp"),
            (F.col("id") % 200 == 199).alias("repeat"),
        )
        .persist()
    )
    batch.count()
    window_us = 15 * MICROS_PER_SECOND
    elapsed, windows = [], 0
    for _ in range(args.rounds + 1):  # the first round compiles
        started = time.perf_counter()
        state = RevenueState(WindowSpec(window_us, window_us), WATERMARK_DELAY_US)
        windows = len(state.apply(count_batch(batch, None, WINDOW, None)).windows)
        elapsed.append((time.perf_counter() - started) * 1000)
    measured = elapsed[1:]
    print(
        f"orders={args.orders} stores={args.stores} span={args.span_seconds}s windows={windows}: "
        f"median {statistics.median(measured):.0f} ms, min {min(measured):.0f} ms "
        f"({', '.join(f'{ms:.0f}' for ms in measured)})"
    )
    spark.stop()


if __name__ == "__main__":
    main()
