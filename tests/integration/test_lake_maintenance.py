"""Lake maintenance (issue 57): the maintain_lake DAG compacts the closed partitions of a deployment's
gold and bronze, VACUUMs what no snapshot within the retention references and leaves every number as
it was; the open hour and today's bronze, where live batches write, are not touched, and live batches
writing them while it runs go through.

Real Delta tables (delta-rs, as the DAG's task writes them) and a real Airflow run (`dag.test()`
against the session's migrated metadata DB).
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from revenue_platform.errors import ConfigError
from revenue_platform.gold_table import read_gold
from revenue_platform.lake_maintenance import (
    MaintenancePolicy,
    MaintenanceRequest,
    maintain_lake,
    maintenance_record,
)
from revenue_platform.registry import DeploymentRecord, DeploymentRegistry
from spark_apps.contract.gold_layout import GOLD_HOUR_COLUMN, window_hour
from spark_apps.contract.naming import DeploymentNames
from spark_apps.contract.side_files import read_json
from spark_apps.storage.bronze import BronzeAppender, ensure_bronze_table
from spark_apps.storage.gold_from_driver import merge_gold_from_driver
from spark_apps.validation.schemas import BRONZE_SCHEMA, GOLD_SCHEMA
from tests.streaming_helpers import load_dags, task_states, xcom

pytestmark = pytest.mark.integration

NOW = datetime.now(UTC).replace(minute=30, second=0, microsecond=0)
OPEN_HOUR = NOW.replace(minute=0)
CLOSED_HOUR = OPEN_HOUR - timedelta(hours=5)
WINDOW = timedelta(seconds=15)
ADDRESS = ("1 Main St", "", "Springfield", "IL", "62701", "5550100")
GOLD_ARROW = to_arrow_schema(GOLD_SCHEMA, timezone="UTC").append(
    pa.field(GOLD_HOUR_COLUMN, pa.string(), nullable=False)
)
BRONZE_ARROW = pa.schema([("ingest_date", pa.date32()), ("offset", pa.int64())])
NO_RETENTION = MaintenancePolicy(
    gold_retention=timedelta(0), bronze_retention=timedelta(0), control_retention=timedelta(0)
)


def _gold_rows(first: datetime, windows: int, batch: int, count: int) -> list[tuple[Any, ...]]:
    return [
        (
            "store_1",
            kind,
            first + WINDOW * index,
            first + WINDOW * (index + 1),
            count,
            Decimal("1.25") * count,
            *ADDRESS,
            batch,
        )
        for index in range(windows)
        for kind in ("GENERAL", "RESTAURANT")
    ]


def _append_gold_file(table: str, rows: list[tuple[Any, ...]]) -> None:
    """One more file in its hour, as a Spark MERGE's several tasks leave them."""
    records = [(*row, window_hour(row[2])) for row in rows]
    columns = list(zip(*records, strict=True))
    arrays = [pa.array(column, type=field.type) for column, field in zip(columns, GOLD_ARROW, strict=True)]
    write_deltalake(
        table, pa.Table.from_arrays(arrays, schema=GOLD_ARROW), mode="append", partition_by=[GOLD_HOUR_COLUMN]
    )


def _lake(root: Path, today: date | None = None) -> DeploymentNames:
    """A registered deployment whose gold holds a closed hour in two files and an open hour in two (one
    rewritten by three live batches), and whose bronze holds the day before `today` and `today` in three
    small files each (`today`: NOW's date, the clock the tests hand maintain_lake)."""
    today = today or NOW.date()
    DeploymentRegistry(str(root)).register(
        DeploymentRecord(deployment_id="blue", colour="blue"), actor="test"
    )
    names = DeploymentNames(str(root), "blue")
    write_deltalake(names.gold_revenue_table, GOLD_ARROW.empty_table(), partition_by=[GOLD_HOUR_COLUMN])
    _append_gold_file(names.gold_revenue_table, _gold_rows(CLOSED_HOUR, 4, 1, 1))
    _append_gold_file(names.gold_revenue_table, _gold_rows(CLOSED_HOUR + 4 * WINDOW, 4, 2, 1))
    for batch in range(3, 6):  # live batches: each rewrites the open hour's file with new totals
        merge_gold_from_driver(_gold_rows(OPEN_HOUR, 3, batch, batch), names.gold_revenue_table)
    _append_gold_file(names.gold_revenue_table, _gold_rows(OPEN_HOUR + 10 * WINDOW, 2, 6, 1))
    for day in (today - timedelta(days=1), today):
        for offset in range(3):
            rows = pa.table({"ingest_date": [day], "offset": [offset]}, schema=BRONZE_ARROW)
            write_deltalake(names.bronze_orders_table, rows, mode="append", partition_by=["ingest_date"])
    return names


def _parquet_files(table: str) -> set[str]:
    return {
        str(path.relative_to(table))
        for path in Path(table).rglob("*.parquet")
        if "_delta_log" not in path.parts
    }


def _snapshot_files(table: str) -> set[str]:
    from urllib.parse import unquote

    return {
        unquote(path)
        for path in pa.table(DeltaTable(table).get_add_actions(flatten=True)).column("path").to_pylist()
    }


def _files_of(files: set[str], partition: str) -> set[str]:
    return {path for path in files if path.startswith(partition + "/")}


def test_maintenance_compacts_closed_partitions_vacuums_and_keeps_every_number(tmp_path: Path) -> None:
    names = _lake(tmp_path / "lake")
    gold, bronze = names.gold_revenue_table, names.bronze_orders_table
    numbers_before = sorted(read_gold(gold).to_pylist(), key=str)
    open_partition = f"{GOLD_HOUR_COLUMN}={window_hour(OPEN_HOUR)}"
    closed_partition = f"{GOLD_HOUR_COLUMN}={window_hour(CLOSED_HOUR)}"
    open_files = _files_of(_snapshot_files(gold), open_partition)
    assert len(_files_of(_snapshot_files(gold), closed_partition)) == 2
    assert len(open_files) == 2
    assert len(_parquet_files(gold)) == 6, (
        "two closed-hour files, the open hour's three versions and one more"
    )

    # A dry run changes nothing and says what VACUUM would delete.
    said: list[str] = []
    dry = maintain_lake(
        str(tmp_path / "lake"), ["blue"], NO_RETENTION, now=NOW, dry_run=True, say=said.append
    )
    assert [r.files_vacuumed for r in dry if r.role == "gold[blue]"] == [2]
    assert len(_parquet_files(gold)) == 6
    assert len(_files_of(_snapshot_files(gold), closed_partition)) == 2
    assert all(line.startswith("[dry run] ") for line in said)
    assert read_json(maintenance_record(str(tmp_path / "lake"))) is None, "a dry run records no success"

    # Files newer than the retention stay: the superseded open-hour versions are minutes old.
    kept = maintain_lake(
        str(tmp_path / "lake"), ["blue"], MaintenancePolicy(gold_retention=timedelta(hours=1)), now=NOW
    )
    assert [r.files_vacuumed for r in kept if r.role == "gold[blue]"] == [0]

    reports = {r.role: r for r in maintain_lake(str(tmp_path / "lake"), ["blue"], NO_RETENTION, now=NOW)}
    assert sorted(read_gold(gold).to_pylist(), key=str) == numbers_before, "maintenance changed a number"
    # The closed hour is one file (compacted by the earlier run); the open hour's file is the one the
    # live batch wrote, untouched; on disk only what the snapshot references.
    assert len(_files_of(_snapshot_files(gold), closed_partition)) == 1
    assert _files_of(_snapshot_files(gold), open_partition) == open_files
    assert _parquet_files(gold) == _snapshot_files(gold)
    assert reports["gold[blue]"].files_vacuumed == 4, "two superseded open-hour versions, two compacted files"
    # Bronze: yesterday compacted into one file, today's three appends left for the live batches.
    bronze_files = _snapshot_files(bronze)
    yesterday, today = (
        f"ingest_date={day.isoformat()}" for day in (NOW.date() - timedelta(days=1), NOW.date())
    )
    assert len(_files_of(bronze_files, yesterday)) == 1
    assert len(_files_of(bronze_files, today)) == 3
    assert sorted(DeltaTable(bronze).to_pyarrow_table().column("offset").to_pylist()) == [0, 0, 1, 1, 2, 2]
    assert _parquet_files(bronze) == bronze_files
    assert not reports["registry_deployments"].skipped
    record = read_json(maintenance_record(str(tmp_path / "lake")))
    assert record is not None
    assert {"kind": "gold", "deployment": "blue", "files": reports["gold[blue]"].files_after,
            "bytes": reports["gold[blue]"].bytes_after} in record["tables"]  # fmt: skip
    assert reports["quality_results"].skipped == "no table yet"


def test_the_maintain_lake_dag_maintains_every_registered_deployment_and_refuses_a_bad_form(
    airflow_db: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "lake"
    # The DAG reads the wall clock, not NOW (taken when the module was imported, possibly before a
    # midnight the run then crosses: CI, 2026-12-03, compacted both fixture days): today, now.
    names = _lake(root, today=datetime.now(UTC).date())
    monkeypatch.setenv("PLATFORM_LAKE_ROOT", str(root))
    dag = load_dags("maintain_lake")["maintain_lake"]

    run = dag.test(run_conf={"dry_run": False, "gold_retention_hours": 1})
    assert run.state == "success", task_states(run)
    reports = {report["role"]: report for report in xcom(run, "maintain")}
    assert reports["gold[blue]"]["files_compacted"] == 2
    assert reports["bronze[blue]"]["files_compacted"] == 3
    assert (
        len(
            _files_of(
                _snapshot_files(names.gold_revenue_table), f"{GOLD_HOUR_COLUMN}={window_hour(CLOSED_HOUR)}"
            )
        )
        == 1
    )

    refused = dag.test(run_conf={"deployment_id": "nobody"})
    assert refused.state == "failed"
    assert task_states(refused)["maintain"] == "failed"
    with pytest.raises(ConfigError, match="gold_retention_hours"):
        MaintenanceRequest.from_params({"gold_retention_hours": 0})
    with pytest.raises(ConfigError, match="bronze_retention_hours"):
        MaintenanceRequest.from_params({"bronze_retention_hours": "168; rm -rf /"})


def _bronze_batch(spark: SparkSession, batch_id: int, day: date, rows: int, files: int = 1) -> DataFrame:
    """`rows` bronze rows of ingest batch `batch_id` on `day`, in `files` files."""
    values = {field.name: F.lit(None).cast(field.dataType) for field in BRONZE_SCHEMA.fields}
    values["offset"] = (F.col("id") + F.lit(batch_id * 1_000)).cast("long")
    values["ingest_batch_id"] = F.lit(batch_id).cast("long")
    values["ingest_date"] = F.lit(day)
    rows_of_batch = spark.range(rows).select(
        *[values[name].alias(name) for name in BRONZE_SCHEMA.fieldNames()]
    )
    return rows_of_batch.repartition(files)


def test_maintenance_beside_the_live_writers_fails_neither_and_loses_nothing(
    spark: SparkSession, tmp_path: Path
) -> None:
    """While Spark appends batch after batch to today's bronze (the app's `BronzeAppender`) and the
    driver's delta-rs MERGE rewrites gold's open hour, maintenance compacts yesterday's bronze (30
    files Spark wrote) and gold's closed hour: each side's commits go through (Delta's conflict rules:
    compaction changes no data and touches no partition a live batch writes), every row is there once."""
    root = tmp_path / "lake"
    names = DeploymentNames(str(root), "blue")
    gold, bronze = names.gold_revenue_table, names.bronze_orders_table
    yesterday = NOW.date() - timedelta(days=1)
    ensure_bronze_table(spark, bronze)
    appender = BronzeAppender(bronze)
    assert appender.append(_bronze_batch(spark, 0, yesterday, 300, files=30), 0, {"watermark_us": 0})
    write_deltalake(gold, GOLD_ARROW.empty_table(), partition_by=[GOLD_HOUR_COLUMN])
    merge_gold_from_driver(_gold_rows(CLOSED_HOUR, 4, 0, 1), gold)
    merge_gold_from_driver(_gold_rows(CLOSED_HOUR + 4 * WINDOW, 4, 0, 1), gold)  # a second file
    closed_rows = sorted(map(str, read_gold(gold).to_pylist()))

    writes: list[tuple[float, float]] = []
    maintained: list[tuple[float, float]] = []
    failures: list[BaseException] = []
    stop = threading.Event()

    def live_batches() -> None:
        batch = 1
        try:
            while not stop.is_set():
                began = time.monotonic()
                appender.append(_bronze_batch(spark, batch, NOW.date(), 50), batch, {"watermark_us": batch})
                merge_gold_from_driver(_gold_rows(OPEN_HOUR, 3, batch, batch), gold)
                writes.append((began, time.monotonic()))
                batch += 1
        except BaseException as error:  # re-raised by the test's own thread below
            failures.append(error)

    writer = threading.Thread(target=live_batches, name="live-batches")
    writer.start()
    try:
        while not writes and writer.is_alive():  # warm: the first batch has committed
            time.sleep(0.05)
        began = time.monotonic()
        reports = {r.role: r for r in maintain_lake(str(root), ["blue"], now=NOW)}
        maintained.append((began, time.monotonic()))
    finally:
        stop.set()
        writer.join(timeout=300)
    assert not failures, failures
    assert _overlapping(writes, maintained), "no live batch ran while maintenance did: nothing was proved"

    assert reports["bronze[blue]"].files_compacted == 30
    assert reports["gold[blue]"].files_compacted == 2
    bronze_files = _snapshot_files(bronze)
    assert len(_files_of(bronze_files, f"ingest_date={yesterday.isoformat()}")) == 1
    batches = len(writes)
    counts = {
        int(row["ingest_batch_id"]): int(row["count"])
        for row in spark.read.format("delta").load(bronze).groupBy("ingest_batch_id").count().collect()
    }
    assert counts == {0: 300, **{batch: 50 for batch in range(1, batches + 1)}}
    # Gold: the closed hour as it was, the open hour at the last batch's totals.
    rows = read_gold(gold).to_pylist()
    assert sorted(str(row) for row in rows if row["window_start"] < OPEN_HOUR) == closed_rows
    assert {row["order_count"] for row in rows if row["window_start"] >= OPEN_HOUR} == {batches}


def _overlapping(first: list[tuple[float, float]], second: list[tuple[float, float]]) -> bool:
    return any(a < d and c < b for a, b in first for c, d in second)
