"""A live table's Delta log keeps an hour of entries, not Delta's 30 days (issue 57).

Gold and bronze take a commit per live batch (~35,000 a day each), and a reader lists a table's whole
log directory on a local disk to find its newest version: kept for 30 days, the entries made every
commit of a week-old deployment take seconds (`make bench-log-length`). The tables the app creates
declare a 1-hour `delta.logRetentionDuration`, a table created before gets it at the driver's start,
and the next checkpoint's cleanup drops what is older.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import to_arrow_schema

from revenue_platform.lake_maintenance import maintain_table
from spark_apps.contract.gold_layout import GOLD_HOUR_COLUMN
from spark_apps.contract.naming import DeploymentNames
from spark_apps.storage.bronze import APPENDS_NEVER_CHECKPOINT, BRONZE_TABLE_PROPERTIES, ensure_bronze_table
from spark_apps.storage.gold import ensure_gold_table
from spark_apps.storage.tables import (
    LIVE_TABLE_LOG_RETENTION,
    LIVE_TABLE_PROPERTIES,
    LOG_RETENTION_PROPERTY,
    ensure_delta_table,
    ensure_live_table_properties,
)
from spark_apps.validation.schemas import BRONZE_SCHEMA, GOLD_TABLE_SCHEMA

pytestmark = pytest.mark.integration

OLD_COMMITS = 150  # more than the 100 between bronze's checkpoints


def _log_entries(table: str) -> list[Path]:
    return sorted((Path(table) / "_delta_log").glob("*.json"))


def test_a_live_tables_log_drops_entries_older_than_an_hour_and_the_table_reads_the_same(
    spark: SparkSession, tmp_path: Path
) -> None:
    names = DeploymentNames(str(tmp_path), "blue")
    bronze, gold = names.bronze_orders_table, names.gold_revenue_table
    ensure_bronze_table(spark, bronze)
    ensure_gold_table(spark, gold)
    for table in (bronze, gold):
        declared = DeltaTable(table).metadata().configuration
        assert declared[LOG_RETENTION_PROPERTY] == LIVE_TABLE_LOG_RETENTION == "interval 1 hours"

    # Two days of live batches' commits to bronze (their log files dated two days ago), then one now.
    schema = to_arrow_schema(BRONZE_SCHEMA, timezone="UTC")
    row = pa.Table.from_pylist([{"offset": 1, "ingest_date": None, "dlq_reason": "old"}], schema=schema)
    for _ in range(OLD_COMMITS):
        write_deltalake(bronze, row, mode="append")
    two_days_ago = time.time() - 2 * 86_400
    for entry in _log_entries(bronze):
        os.utime(entry, (two_days_ago, two_days_ago))
    (
        spark.createDataFrame([(2, "new", None)], "offset long, dlq_reason string, ingest_date date")
        .write.format("delta")
        .mode("append")
        .save(bronze)
    )
    assert len(_log_entries(bronze)) == OLD_COMMITS + 2

    # The hourly maintenance checkpoints and cleans up, as the tables' own writers do every 100 commits.
    maintain_table(bronze, "bronze", timedelta(days=7), None)
    kept = _log_entries(bronze)
    # Gone: every entry before the checkpoint (bronze's appends write none: the driver's or the
    # maintenance's); kept: this hour's (Delta's 30 days would have kept all 152).
    assert kept[0].name > f"{OLD_COMMITS // 2:020d}.json", kept[0].name
    assert len(kept) <= 100 + 2
    read = spark.read.format("delta").load(bronze)
    assert read.count() == OLD_COMMITS + 1
    spark.createDataFrame(
        [(3, "after", None)], "offset long, dlq_reason string, ingest_date date"
    ).write.format("delta").mode("append").save(bronze)
    assert spark.read.format("delta").load(bronze).count() == OLD_COMMITS + 2


def test_a_table_created_before_gets_the_retention_once_and_spark_writes_it_after(
    spark: SparkSession, tmp_path: Path
) -> None:
    gold = str(tmp_path / "gold")
    ensure_delta_table(spark, gold, GOLD_TABLE_SCHEMA, GOLD_HOUR_COLUMN)  # as the app created it before
    assert LOG_RETENTION_PROPERTY not in DeltaTable(gold).metadata().configuration
    assert ensure_live_table_properties(gold, {}) == LIVE_TABLE_PROPERTIES
    assert ensure_live_table_properties(gold, {}) == {}  # a restart commits nothing more
    assert DeltaTable(gold).metadata().configuration[LOG_RETENTION_PROPERTY] == LIVE_TABLE_LOG_RETENTION
    from delta.tables import DeltaTable as SparkDeltaTable

    assert spark.read.format("delta").load(gold).count() == 0
    properties = SparkDeltaTable.forPath(spark, gold).detail().first()["properties"]
    assert properties[LOG_RETENTION_PROPERTY] == LIVE_TABLE_LOG_RETENTION


def test_a_bronze_table_whose_appends_checkpointed_gets_the_drivers_checkpoints_instead(
    spark: SparkSession, tmp_path: Path
) -> None:
    bronze = str(tmp_path / "bronze")
    # As the app created it before: Spark's appends checkpointed every 100th commit, inside a batch.
    ensure_delta_table(
        spark,
        bronze,
        BRONZE_SCHEMA,
        "ingest_date",
        properties={"delta.checkpointInterval": "100", **LIVE_TABLE_PROPERTIES},
    )
    assert ensure_live_table_properties(bronze, {}, BRONZE_TABLE_PROPERTIES) == {
        "delta.checkpointInterval": str(APPENDS_NEVER_CHECKPOINT)
    }
    assert ensure_live_table_properties(bronze, {}, BRONZE_TABLE_PROPERTIES) == {}
    from delta.tables import DeltaTable as SparkDeltaTable

    properties = SparkDeltaTable.forPath(spark, bronze).detail().first()["properties"]
    assert properties["delta.checkpointInterval"] == "2147483647"
    assert properties[LOG_RETENTION_PROPERTY] == LIVE_TABLE_LOG_RETENTION


def test_a_file_whose_tombstone_expired_is_still_vacuumed_not_left_on_disk(tmp_path: Path) -> None:
    """Tombstones keep an hour (Delta wants the log to keep at least as long): once one leaves the
    snapshot, only a full VACUUM still finds its file. Without it, every compacted file stays for good."""
    import json

    table = str(tmp_path / "gold")
    write_deltalake(table, pa.table({"a": [1]}), configuration=dict(LIVE_TABLE_PROPERTIES))
    [superseded] = Path(table).glob("*.parquet")
    three_days_ago = time.time() - 3 * 86_400
    os.utime(superseded, (three_days_ago, three_days_ago))
    write_deltalake(table, pa.table({"a": [2]}), mode="overwrite")
    # Its removal two hours ago: past the hour its tombstone is kept, so the next checkpoint drops it.
    entry = Path(table) / "_delta_log" / f"{1:020d}.json"
    actions = [json.loads(line) for line in entry.read_text().splitlines()]
    for action in actions:
        if "remove" in action:
            action["remove"]["deletionTimestamp"] = int((time.time() - 7_200) * 1000)
    entry.write_text("".join(json.dumps(action) + "\n" for action in actions))
    DeltaTable(table).create_checkpoint()

    report = maintain_table(table, "gold", timedelta(hours=24), None)
    assert report.files_vacuumed == 1
    assert not superseded.exists()
    assert DeltaTable(table).to_pyarrow_table().column("a").to_pylist() == [2]
