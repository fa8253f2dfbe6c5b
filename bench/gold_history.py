"""What one live gold batch costs after days of history, in gold's hourly layout and in the unpartitioned
one it replaced (issue 57): `python -m bench.gold_history` (`make bench-gold-history`).

Gold is seeded as a live app leaves it after N days of 15-second windows for `--stores` stores and
both order types, its newest hour half written: unpartitioned, every window in the one file the live
batches kept rewriting; hourly, one file per hour. Then `--batches` live batches MERGE through the
driver's writer (`merge_gold_from_driver`, the app's default path): each updates the newest window of
every store and type and opens the next one, inside the newest hour (200 rows at 50 stores).
Reported per layout and history: the median wall time of a batch, and the rows and bytes each batch
wrote, from the Delta log's add actions. No Spark, no broker: seconds to a few minutes, most of it
seeding.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

WINDOW = timedelta(seconds=15)
START = datetime(2026, 10, 1, tzinfo=UTC)
TYPES = ("GENERAL", "RESTAURANT")
ADDRESS = ("1 Main St", "", "Springfield", "IL", "62701", "5550100")


def _rows(starts: list[datetime], stores: int, batch: int, count: int = 1) -> list[tuple[Any, ...]]:
    return [
        (f"store_{store}", kind, start, start + WINDOW, count, Decimal("2.50") * count, *ADDRESS, batch)
        for start in starts
        for store in range(stores)
        for kind in TYPES
    ]


def _seed(path: Path, hourly: bool, days: float, stores: int) -> datetime:
    """N days of gold as live batches leave it; returns the newest window's start."""
    import pyarrow as pa
    from deltalake import write_deltalake
    from pyspark.sql.pandas.types import to_arrow_schema

    from spark_apps.contract.gold_layout import GOLD_HOUR_COLUMN, window_hour
    from spark_apps.validation.schemas import GOLD_SCHEMA

    schema = to_arrow_schema(GOLD_SCHEMA, timezone="UTC")
    if hourly:
        schema = schema.append(pa.field(GOLD_HOUR_COLUMN, pa.string(), nullable=False))
    hours = max(1, round(days * 24))
    per_hour = int(timedelta(hours=1) / WINDOW)
    chunk: list[tuple[Any, ...]] = []
    for hour in range(hours):
        first = START + timedelta(hours=hour)
        # The newest hour is half written: the live batches land inside it, as they do in an open hour.
        windows = per_hour if hour < hours - 1 else per_hour // 2
        rows = _rows([first + WINDOW * index for index in range(windows)], stores, hour)
        chunk += [(*row, window_hour(row[2])) for row in rows] if hourly else rows
        if len(chunk) >= 2_000_000 or hour == hours - 1:
            columns = list(zip(*chunk, strict=True))
            table = pa.Table.from_arrays(
                [pa.array(column, type=field.type) for column, field in zip(columns, schema, strict=True)],
                schema=schema,
            )
            # Unpartitioned: a live app's batches leave every window in one file (each rewrote it);
            # one append per chunk comes close (a file per 2 M rows).
            write_deltalake(
                str(path), table, mode="append", partition_by=[GOLD_HOUR_COLUMN] if hourly else None
            )
            chunk = []
    return START + timedelta(hours=hours - 1) + WINDOW * (per_hour // 2 - 1)


def _last_commit_writes(path: Path) -> tuple[int, int]:
    """Rows and bytes the table's latest commit added."""
    log = path / "_delta_log"
    latest = max(log.glob("*.json"), key=lambda file: int(file.stem))
    rows = written = 0
    for line in latest.read_text().splitlines():
        action = json.loads(line)
        if "add" in action:
            written += action["add"]["size"]
            rows += json.loads(action["add"]["stats"])["numRecords"]
    return rows, written


def measure(hourly: bool, days: float, stores: int, batches: int, workdir: Path) -> dict[str, Any]:
    from spark_apps.storage.gold_from_driver import merge_gold_from_driver

    path = workdir / f"gold-{'hourly' if hourly else 'flat'}-{days}d"
    shutil.rmtree(path, ignore_errors=True)
    started = time.perf_counter()
    newest = _seed(path, hourly, days, stores)
    seeded_s = time.perf_counter() - started
    walls, rows, written = [], [], []
    for batch in range(batches):
        live = _rows([newest], stores, 1_000_000 + batch, count=2 + batch) + _rows(
            [newest + WINDOW], stores, 1_000_000 + batch
        )
        began = time.perf_counter()
        merge_gold_from_driver(live, str(path))
        walls.append(time.perf_counter() - began)
        batch_rows, batch_bytes = _last_commit_writes(path)
        rows.append(batch_rows)
        written.append(batch_bytes)
        newest += WINDOW
    shutil.rmtree(path, ignore_errors=True)
    return {
        "layout": "hourly" if hourly else "unpartitioned",
        "days": days,
        "gold_rows": int((max(1, round(days * 24)) - 0.5) * (timedelta(hours=1) / WINDOW))
        * stores
        * len(TYPES),
        "seed_s": round(seeded_s, 1),
        "batch_wall_s_median": round(statistics.median(walls), 3),
        "rows_written_per_batch": int(statistics.median(rows)),
        "bytes_written_per_batch": int(statistics.median(written)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", type=int, default=50)
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--days", type=float, nargs="+", default=[1.0, 3.0, 30.0])
    parser.add_argument(
        "--flat-max-days", type=float, default=3.0, help="skip the unpartitioned layout beyond this history"
    )
    args = parser.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(prefix="gold-history-") as workdir:
        for days in args.days:
            for hourly in (False, True):
                if not hourly and days > args.flat_max_days:
                    continue
                result = measure(hourly, days, args.stores, args.batches, Path(workdir))
                print(json.dumps(result), flush=True)
                results.append(result)
    hourly_results = [r for r in results if r["layout"] == "hourly"]
    if len(hourly_results) >= 2:
        first, last = hourly_results[0], hourly_results[-1]
        print(
            f"hourly layout, {last['days']} days against {first['days']}: batch wall "
            f"{last['batch_wall_s_median'] / first['batch_wall_s_median']:.2f}x, bytes written "
            f"{last['bytes_written_per_batch'] / first['bytes_written_per_batch']:.2f}x"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
