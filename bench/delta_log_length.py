"""What one commit costs when a table's Delta log is as long as weeks of live batches leave it (issue 57):
`python -m bench.delta_log_length` (`make bench-log-length`).

A live deployment commits to bronze and to gold once per batch: ~35,000 commits a day each at one batch
per 2.5 s. Delta keeps every log entry for the table's `delta.logRetentionDuration` (30 days unless the
table says otherwise), and a reader finds the newest version by listing the log directory. Whether
that listing reads only what is new or the whole directory depends on the storage: Hadoop's local file
system (Spark's `HDFSLogStore`) and delta-rs on a local path list every entry.

For each `--entries` count, a small table is seeded as weeks of commits leave it: its data at
version 0, then that many commits that change nothing (a `commitInfo` only, as many log files as a
run of that many batches leaves besides its checksum files), and a checkpoint at the newest version,
so a reader replays nothing and only the listing grows. Then, `--rounds` times each:
- Spark appends 1,000 rows (the app's bronze append: a Delta snapshot update and a commit);
- Spark reads the 20 newest commits' history (the app's resume reads bronze's latest commits);
- delta-rs opens the table and appends 1,000 rows (the driver's gold writer opens gold each batch).
Reported: the median milliseconds of each per log length, and the ratio to the shortest log.
One local SparkSession; no broker.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.month_two import append_noop_commits

ROWS_PER_COMMIT = 1_000


def seed_long_log(path: Path, entries: int, span_days: float, now_ms: int) -> None:
    """A Delta table at `path` whose log holds `entries` no-op commits after its data, spread over the
    `span_days` before `now_ms`, and a checkpoint at the newest version."""
    import pyarrow as pa
    from deltalake import write_deltalake

    write_deltalake(
        str(path),
        pa.table({"order_id": list(range(ROWS_PER_COMMIT)), "ingest_date": ["2026-10-01"] * ROWS_PER_COMMIT}),
        partition_by=["ingest_date"],
    )
    append_noop_commits(path, entries, span_days, now_ms)


def _median_ms(action: Callable[[], Any], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        began = time.perf_counter()
        action()
        times.append((time.perf_counter() - began) * 1000)
    return round(statistics.median(times), 1)


def measure(spark: Any, workdir: Path, entries: int, span_days: float, rounds: int) -> dict[str, Any]:
    import pyarrow as pa
    from delta.tables import DeltaTable as SparkDeltaTable
    from deltalake import DeltaTable, write_deltalake

    spark_path = workdir / f"spark-{entries}"
    rs_path = workdir / f"delta-rs-{entries}"
    began = time.perf_counter()
    now_ms = int(time.time() * 1000)
    seed_long_log(spark_path, entries, span_days, now_ms)
    seed_long_log(rs_path, entries, span_days, now_ms)
    seeded_s = time.perf_counter() - began
    rows = spark.range(ROWS_PER_COMMIT).selectExpr("id AS order_id", "'2026-12-03' AS ingest_date")
    rows.cache().count()
    arrow_rows = pa.table(
        {"order_id": list(range(ROWS_PER_COMMIT)), "ingest_date": ["2026-12-03"] * ROWS_PER_COMMIT}
    )

    def spark_append() -> None:
        rows.write.format("delta").mode("append").partitionBy("ingest_date").save(str(spark_path))

    def spark_history() -> None:
        SparkDeltaTable.forPath(spark, str(spark_path)).history(20).collect()

    def delta_rs_open_and_append() -> None:
        write_deltalake(DeltaTable(str(rs_path)), arrow_rows, mode="append")

    spark_append()  # the first append plans and compiles; the rounds measure the steady cost
    result = {
        "log_entries": entries,
        "log_files": sum(1 for _ in (spark_path / "_delta_log").iterdir()),
        "seed_s": round(seeded_s, 1),
        "spark_append_ms": _median_ms(spark_append, rounds),
        "spark_history_ms": _median_ms(spark_history, rounds),
        "delta_rs_open_append_ms": _median_ms(delta_rs_open_and_append, rounds),
    }
    rows.unpersist()
    shutil.rmtree(spark_path, ignore_errors=True)
    shutil.rmtree(rs_path, ignore_errors=True)
    return result


def main(argv: list[str] | None = None) -> int:
    from spark_apps.engine.session import build_spark_session, local_jar_paths

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--entries",
        type=int,
        nargs="+",
        default=[0, 35_000, 245_000, 1_040_000],
        help="log entries before the newest checkpoint (35,000: a day of 2.5 s batches; 1,040,000: 30 days)",
    )
    parser.add_argument("--span-days", type=float, default=30.0, help="the time the seeded commits span")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--workdir", type=Path, default=None, help="where to seed (default: a temp folder)")
    args = parser.parse_args(argv)
    spark = build_spark_session(
        "bench-log-length",
        master="local[2]",
        jars=local_jar_paths(),
        extra_conf={"spark.sql.shuffle.partitions": "2"},
    )
    spark.sparkContext.setLogLevel("ERROR")
    results = []
    with tempfile.TemporaryDirectory(prefix="log-length-", dir=args.workdir) as workdir:
        for entries in args.entries:
            result = measure(spark, Path(workdir), entries, args.span_days, args.rounds)
            print(json.dumps(result), flush=True)
            results.append(result)
    spark.stop()
    first = results[0]
    for result in results[1:]:
        ratios = ", ".join(
            f"{key} {result[key] / max(first[key], 0.1):.2f}x"
            for key in ("spark_append_ms", "spark_history_ms", "delta_rs_open_append_ms")
        )
        print(f"{result['log_entries']:,} log entries against {first['log_entries']:,}: {ratios}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
