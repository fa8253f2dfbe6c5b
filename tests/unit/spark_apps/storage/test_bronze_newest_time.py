"""Bronze's newest record comes from the Delta log's statistics, not from a scan of every data file:
the reprocess job asks for it before reading a range from bronze, and a scan's cost grew with every
day archived (issue 57). The old days' data files are damaged here, so a reader that opened them fails."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from spark_apps.storage import bronze
from spark_apps.storage.bronze import ensure_bronze_table, newest_archived_time
from spark_apps.validation.schemas import BRONZE_SCHEMA

NEWEST = datetime(2026, 12, 3, 10, 0, 7, 123_000, tzinfo=UTC)  # Kafka's precision: milliseconds


def _append_day(spark: SparkSession, table: str, day: str, newest: datetime, invalid_later: bool) -> None:
    """Five records of `day` arriving up to `newest` (and, with `invalid_later`, a dead letter after it)."""
    values = {field.name: F.lit(None).cast(field.dataType) for field in BRONZE_SCHEMA.fields}
    values["timestamp"] = F.timestamp_micros(F.lit(int(newest.timestamp() * 1_000_000)) - F.col("id") * 1_000)
    values["offset"] = F.col("id")
    values["ingest_date"] = F.to_date(F.lit(day))
    spark.range(5).select(*[values[name].alias(name) for name in BRONZE_SCHEMA.fieldNames()]).write.format(
        "delta"
    ).mode("append").save(table)
    if invalid_later:  # a record without a timestamp: never the newest
        values["timestamp"] = F.lit(None).cast("timestamp")
        spark.range(1).select(
            *[values[name].alias(name) for name in BRONZE_SCHEMA.fieldNames()]
        ).write.format("delta").mode("append").save(table)


def test_the_newest_record_is_read_from_the_log_with_no_data_file_opened(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = str(tmp_path / "bronze")
    ensure_bronze_table(spark, table)
    assert newest_archived_time(spark, table) is None  # created, nothing archived
    _append_day(spark, table, "2026-11-01", datetime(2026, 11, 1, 23, 0, tzinfo=UTC), invalid_later=False)
    _append_day(spark, table, "2026-12-03", NEWEST, invalid_later=True)
    assert newest_archived_time(spark, table) == NEWEST  # the same answer a scan gives
    assert bronze._newest_by_scan(spark, table) == NEWEST

    for data_file in Path(table).rglob("*.parquet"):
        if "_delta_log" not in data_file.parts:
            data_file.write_bytes(b"not parquet")
    monkeypatch.setattr(bronze, "_newest_by_scan", _no_scan)
    assert newest_archived_time(spark, table) == NEWEST


def _no_scan(spark: SparkSession, table_path: str) -> datetime | None:
    raise AssertionError(f"{table_path} was scanned")
