"""A deployment's lake as weeks of live batches leave it, written in seconds to minutes (issue 57): the
`month_two` bench phase seeds one, then runs the unchanged app on it live (bench/phases/month_two.py).

What grows with the days a deployment runs, and is seeded here in the lake's real layout:
- gold: every 15 s window of every store and order type, one file per hour (`window_hour`, as the
  hourly layout and `maintain_lake`'s compaction leave closed hours);
- bronze: one file per day before today (`ingest_date`, as compaction leaves closed days) but
  yesterday, which is in UNCOMPACTED_BRONZE_FILES small files, as live batches leave a day until
  the first maintenance after it compacts it; its rows are placeholders (a dead-letter reason of
  their own, so nothing counts them): a live batch never reads old days, only their entries in the
  table's snapshot;
- both tables' Delta logs: one commit per live batch (`log_entries_per_day`, ~34,560 at one batch per
  2.5 s) for as long as the tables' log retention keeps them (`shipped_log_retention_days`), as no-op
  commits after the data and a checkpoint at the newest version (a reader replays nothing; what grows
  is the directory a reader lists). Spark also writes a checksum file per commit, not seeded: the
  seeded log is the smaller of the two.
Not seeded: the dedupe state (the app's checkpoint starts empty; at 5,000/s the state holds the
run's own ids), Kafka history (the live topic starts empty).
"""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

DAY_MS = 86_400_000
WINDOW = timedelta(seconds=15)
ORDER_TYPES = ("GENERAL", "RESTAURANT")
ADDRESS = ("1 Main St", "", "Springfield", "IL", "62701", "5550100")
SEEDED_DLQ_REASON = "seeded_history"
BRONZE_ROWS_PER_DAY = 1_000
# Yesterday's bronze as live batches leave it until maintenance compacts it: many small files (a live
# day at one batch per 2.5 s is ~69,000; a share of them here keeps the seed fast).
UNCOMPACTED_BRONZE_FILES = 2_000
# One live batch per 2.5 s (the shipped 2 s trigger and a batch's own time): a commit each to bronze and gold.
LOG_ENTRIES_PER_DAY = 34_560


def shipped_log_retention_days() -> float:
    """How many days of log entries the app's gold and bronze keep (`LIVE_TABLE_LOG_RETENTION`)."""
    from spark_apps.contract.config_rules import interval_seconds
    from spark_apps.storage.tables import LIVE_TABLE_LOG_RETENTION

    return interval_seconds(LIVE_TABLE_LOG_RETENTION.removeprefix("interval ")) / 86_400


def append_noop_commits(table: Path, entries: int, span_days: float, now_ms: int) -> int:
    """Add `entries` commits that change nothing after `table`'s newest version, their times (and
    their files' times, which log cleanup reads) spread over the `span_days` before `now_ms`, and a
    checkpoint at the new newest version. Returns that version."""
    from deltalake import DeltaTable

    delta = DeltaTable(str(table))
    delta.create_checkpoint()
    base = delta.version()
    log = table / "_delta_log"
    if entries == 0:
        return base
    step_ms = span_days * DAY_MS / entries
    for offset in range(1, entries + 1):
        at_ms = int(now_ms - span_days * DAY_MS + offset * step_ms)
        entry = log / f"{base + offset:020d}.json"
        commit = {"commitInfo": {"timestamp": at_ms, "operation": "WRITE", "operationParameters": {}}}
        entry.write_text(json.dumps(commit) + "\n")
        os.utime(entry, (at_ms / 1000, at_ms / 1000))
    newest = base + entries
    # No commit after `base` changed the table: its checkpoint is the state at every later version.
    shutil.copyfile(log / f"{base:020d}.checkpoint.parquet", log / f"{newest:020d}.checkpoint.parquet")
    last = json.loads((log / "_last_checkpoint").read_text())
    (log / "_last_checkpoint").write_text(json.dumps({**last, "version": newest}))
    return newest


def _gold_day(first_hour: datetime, stores: int) -> Any:
    """24 hours of gold rows from `first_hour`: every window of every store and type, 1 order of 2.50."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    from spark_apps.contract.gold_layout import window_hour
    from spark_apps.validation.schemas import GOLD_TABLE_SCHEMA

    per_hour = int(timedelta(hours=1) / WINDOW)
    starts = [first_hour + WINDOW * index for index in range(24 * per_hour)]
    keys = [(f"store_{store}", kind) for store in range(stores) for kind in ORDER_TYPES]
    rows = len(starts) * len(keys)
    columns: list[list[Any]] = [
        [key[0] for _ in starts for key in keys],
        [key[1] for _ in starts for key in keys],
        [start for start in starts for _ in keys],
        [start + WINDOW for start in starts for _ in keys],
        [1] * rows,
        [Decimal("2.50")] * rows,
        *([value] * rows for value in ADDRESS),
        [0] * rows,
        [window_hour(start) for start in starts for _ in keys],
    ]
    schema = to_arrow_schema(GOLD_TABLE_SCHEMA, timezone="UTC")
    return pa.Table.from_arrays(
        [pa.array(column, type=field.type) for column, field in zip(columns, schema, strict=True)],
        schema=schema,
    )


def _shifted(day: Any, by: timedelta) -> Any:
    """Gold rows of a day moved `by` later: window times and their hour partition (built once, then
    shifted: building rows in Python costs seconds a day)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from spark_apps.contract.gold_layout import GOLD_HOUR_COLUMN

    shift = pa.scalar(by, type=pa.duration("us"))
    for column in ("window_start", "window_end"):
        day = day.set_column(day.schema.get_field_index(column), column, pc.add(day[column], shift))
    hours = pc.strftime(day["window_start"], format="%Y-%m-%dT%H")
    return day.set_column(day.schema.get_field_index(GOLD_HOUR_COLUMN), GOLD_HOUR_COLUMN, hours)


def _bronze_day(day: date, rows: int) -> Any:
    """`rows` placeholder bronze rows of `day`: a dead-letter reason of their own, nothing else."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    from spark_apps.validation.schemas import BRONZE_SCHEMA

    schema = to_arrow_schema(BRONZE_SCHEMA, timezone="UTC")
    arrays = []
    for field in schema:
        if field.name == "dlq_reason":
            arrays.append(pa.array([SEEDED_DLQ_REASON] * rows, type=field.type))
        elif field.name == "ingest_date":
            arrays.append(pa.array([day] * rows, type=field.type))
        else:
            arrays.append(pa.nulls(rows, type=field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def seed_deployment(
    gold_table: Path,
    bronze_table: Path,
    days: int,
    stores: int,
    now: datetime,
    log_days: float,
    log_entries_per_day: int = LOG_ENTRIES_PER_DAY,
) -> dict[str, Any]:
    """Gold and bronze of a deployment that has run `days` days up to `now`'s hour (gold) and day
    (bronze), with `log_days` days of log entries each (the tables' log retention, at most `days`)."""
    from deltalake import write_deltalake

    from spark_apps.contract.gold_layout import GOLD_HOUR_COLUMN
    from spark_apps.storage.bronze import BRONZE_TABLE_PROPERTIES
    from spark_apps.storage.tables import LIVE_TABLE_PROPERTIES

    now_ms = int(now.timestamp() * 1000)
    this_hour = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    first_hour = this_hour - timedelta(days=days)
    first_day = _gold_day(first_hour, stores)
    for day in range(days):
        write_deltalake(
            str(gold_table),
            _shifted(first_day, timedelta(days=day)),
            mode="append",
            partition_by=[GOLD_HOUR_COLUMN],
            configuration=dict(LIVE_TABLE_PROPERTIES),
        )
    today = this_hour.date()
    for day in range(days, 0, -1):
        write_deltalake(
            str(bronze_table),
            # Yesterday's files are added below; an empty write creates the table for a 1-day seed.
            _bronze_day(today - timedelta(days=day), BRONZE_ROWS_PER_DAY if day > 1 else 0),
            mode="append",
            partition_by=["ingest_date"],
            configuration=dict(BRONZE_TABLE_PROPERTIES),
        )
    _append_small_files(bronze_table, _bronze_day(today - timedelta(days=1), UNCOMPACTED_BRONZE_FILES))
    entries = round(min(days, log_days) * log_entries_per_day)
    return {
        "days": days,
        "gold_until": this_hour.isoformat(),
        "gold_rows": days * 24 * int(timedelta(hours=1) / WINDOW) * stores * len(ORDER_TYPES),
        "gold_version": append_noop_commits(gold_table, entries, min(days, log_days), now_ms),
        "bronze_version": append_noop_commits(bronze_table, entries, min(days, log_days), now_ms),
        "log_entries_per_table": entries,
    }


def _append_small_files(table: Path, rows: Any) -> None:
    """Append `rows` (one ingest day) to the bronze table at `table` as one commit of a file per row."""
    import uuid

    import pyarrow.parquet as pq
    from deltalake import DeltaTable
    from deltalake.transaction import AddAction, RemoveAction

    day = rows.column("ingest_date")[0].as_py().isoformat()
    data = rows.drop_columns(["ingest_date"])
    folder = table / f"ingest_date={day}"
    folder.mkdir(parents=True, exist_ok=True)
    actions: list[AddAction | RemoveAction] = []
    for index in range(data.num_rows):
        name = f"ingest_date={day}/part-{index:05d}-{uuid.uuid4()}.parquet"
        pq.write_table(data.slice(index, 1), table / name)
        actions.append(
            AddAction(
                path=name,
                size=(table / name).stat().st_size,
                partition_values={"ingest_date": day},
                modification_time=int((table / name).stat().st_mtime * 1000),
                data_change=True,
                stats=json.dumps({"numRecords": 1}),
            )
        )
    delta = DeltaTable(str(table))
    schema = delta.schema()
    delta.create_write_transaction(actions, mode="append", schema=schema, partition_by=["ingest_date"])


def commits_after(table: Path, version: int) -> list[dict[str, int]]:
    """Each commit of `table` after `version`: the bytes and rows it added and the files it removed."""
    found = []
    while (entry := table / "_delta_log" / f"{version + 1:020d}.json").exists():
        version += 1
        added = rows = removed = 0
        for line in entry.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                added += int(action["add"].get("size") or 0)
                stats = action["add"].get("stats")
                rows += int(json.loads(stats).get("numRecords", 0)) if stats else 0
            elif "remove" in action:
                removed += 1
        found.append({"version": version, "bytes_added": added, "rows_added": rows, "files_removed": removed})
    return found


def disk_use(root: Path) -> dict[str, int]:
    """Bytes and files under `root`, and the files of each Delta log below it."""
    total = files = log_files = 0
    for folder, _, names in os.walk(root):
        for name in names:
            try:
                total += os.stat(os.path.join(folder, name)).st_size
            except FileNotFoundError:
                continue
        files += len(names)
        if os.path.basename(folder) == "_delta_log":
            log_files += len(names)
    return {"bytes": total, "files": files, "delta_log_files": log_files}
