"""Bronze gets each micro-batch once: a batch run again (after a crash past its append) is skipped,
by the appender that wrote it and by a new one (a restarted driver) alike, on a real Delta table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_apps.storage import bronze
from spark_apps.storage.bronze import (
    APPENDS_NEVER_CHECKPOINT,
    BronzeAppender,
    BronzeLogCheckpoints,
    ensure_bronze_table,
    newest_bronze_batch,
    read_bronze,
    recorded_batches,
    recorded_bronze_batch_metadata,
)
from spark_apps.validation.schemas import BRONZE_SCHEMA


def _batch_rows(spark: SparkSession, batch_id: int, records: int) -> DataFrame:
    """`records` bronze rows of ingest batch `batch_id` (their offsets tell the batches apart)."""
    values = {field.name: F.lit(None).cast(field.dataType) for field in BRONZE_SCHEMA.fields}
    values["offset"] = (F.col("id") + F.lit(batch_id * 1_000)).cast("long")
    values["ingest_batch_id"] = F.lit(batch_id).cast("long")
    values["ingest_date"] = F.to_date(F.lit("2026-11-27"))
    return spark.range(records).select(*[values[name].alias(name) for name in BRONZE_SCHEMA.fieldNames()])


def _batches_in_bronze(spark: SparkSession, table: str) -> dict[int, int]:
    rows = read_bronze(spark, table).groupBy("ingest_batch_id").count().collect()
    return {int(row["ingest_batch_id"]): int(row["count"]) for row in rows}


def test_a_batch_run_again_is_appended_once_by_the_same_or_a_restarted_driver(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = str(tmp_path / "bronze")
    ensure_bronze_table(spark, table)
    assert newest_bronze_batch(spark, table) is None  # created, no batch yet

    driver = BronzeAppender(table)
    assert driver.append(_batch_rows(spark, 0, 3), 0, {"watermark_us": 10})
    assert driver.append(_batch_rows(spark, 1, 4), 1, {"watermark_us": 20})
    # The same driver after a failed batch 1 (it forgets, reads bronze's commits, skips what they hold).
    driver.forget()
    assert not driver.append(_batch_rows(spark, 1, 4), 1, {"watermark_us": 20})
    # A restarted driver redoing batch 1, then going on with batch 2.
    restarted = BronzeAppender(table)
    assert not restarted.append(_batch_rows(spark, 1, 4), 1, {"watermark_us": 20})
    assert restarted.append(_batch_rows(spark, 2, 5), 2, {"watermark_us": 30})

    assert _batches_in_bronze(spark, table) == {0: 3, 1: 4, 2: 5}
    assert newest_bronze_batch(spark, table) == 2
    # What a restart resumes from: the batch before it, with the metadata its append recorded.
    assert recorded_bronze_batch_metadata(spark, table, 2) == {"batch_id": 1, "watermark_us": 20}
    assert recorded_bronze_batch_metadata(spark, table, 0) is None


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The tables whose latest commits were read (the real reads, counted)."""
    tables: list[str] = []
    real_read = bronze._recent_bronze_batches

    def counted_read(spark: SparkSession, table_path: str) -> list[dict[str, object]]:
        tables.append(table_path)
        return real_read(spark, table_path)

    monkeypatch.setattr(bronze, "_recent_bronze_batches", counted_read)
    return tables


def test_a_restart_reads_bronzes_commits_once_for_the_watermark_and_the_append(
    spark: SparkSession, tmp_path: Path, reads: list[str]
) -> None:
    table = str(tmp_path / "bronze")
    ensure_bronze_table(spark, table)
    before_the_crash = BronzeAppender(table)
    before_the_crash.append(_batch_rows(spark, 0, 2), 0, {"watermark_us": 10})
    before_the_crash.append(_batch_rows(spark, 1, 3), 1, {"watermark_us": 20})  # then the driver dies
    reads.clear()

    restarted = BronzeAppender(table)
    # Spark redoes batch 1 (its offsets were not committed): the state resumes after batch 0.
    assert restarted.recorded_before(spark, 1) == {"batch_id": 0, "watermark_us": 10}
    assert not restarted.append(_batch_rows(spark, 1, 3), 1, {"watermark_us": 20})
    assert restarted.append(_batch_rows(spark, 2, 4), 2, {"watermark_us": 30})
    assert reads == [table]
    assert _batches_in_bronze(spark, table) == {0: 2, 1: 3, 2: 4}


def test_a_driver_that_created_bronze_appends_its_first_batch_without_reading_bronzes_commits(
    spark: SparkSession, tmp_path: Path, reads: list[str]
) -> None:
    table = str(tmp_path / "bronze")
    assert ensure_bronze_table(spark, table)  # created here
    appender = BronzeAppender(table)
    appender.holds_no_batch()
    assert appender.append(_batch_rows(spark, 0, 2), 0)
    assert reads == []
    # The next driver finds the table: it does not know what bronze holds, and reads it.
    assert not ensure_bronze_table(spark, table)
    restarted = BronzeAppender(table)
    assert not restarted.append(_batch_rows(spark, 0, 2), 0)
    assert reads == [table]
    assert _batches_in_bronze(spark, table) == {0: 2}


def _checkpointed_versions(table: Path) -> list[int]:
    return sorted(
        int(path.name.split(".")[0]) for path in (table / "_delta_log").glob("*.checkpoint*.parquet")
    )


def test_bronzes_appends_never_checkpoint_its_log_the_drivers_checkpoints_do_beside_them(
    spark: SparkSession, tmp_path: Path
) -> None:
    from delta.tables import DeltaTable

    table = tmp_path / "bronze"
    ensure_bronze_table(spark, str(table))
    properties = DeltaTable.forPath(spark, str(table)).detail().first()["properties"]
    assert properties["delta.checkpointInterval"] == str(APPENDS_NEVER_CHECKPOINT) == "2147483647"
    plain = BronzeAppender(str(table))
    for batch_id in range(11):
        plain.append(_batch_rows(spark, batch_id, 1), batch_id)
    assert _checkpointed_versions(table) == []  # Delta's default (10) would have written one at 10

    checkpoints = BronzeLogCheckpoints(str(table), every=3)
    driver = BronzeAppender(str(table), checkpoints)
    for batch_id in range(11, 18):
        assert driver.append(_batch_rows(spark, batch_id, 2), batch_id)
        checkpoints.wait(60)  # the test waits for each; a batch does not
    # The driver's first append, then every third: the versions of appends 1, 4 and 7.
    first = checkpoints.written[0]
    assert checkpoints.written == [first, first + 3, first + 6]
    assert _checkpointed_versions(table) == checkpoints.written
    # Spark reads the table from delta-rs's checkpoint, and appends after it.
    assert _batches_in_bronze(spark, str(table)) == {
        **{b: 1 for b in range(11)},
        **{b: 2 for b in range(11, 18)},
    }
    assert driver.append(_batch_rows(spark, 18, 1), 18)
    assert newest_bronze_batch(spark, str(table)) == 18


def test_a_failed_log_checkpoint_fails_no_append_and_the_next_append_tries_again(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deltalake import DeltaTable

    table = tmp_path / "bronze"
    ensure_bronze_table(spark, str(table))
    checkpoints = BronzeLogCheckpoints(str(table), every=100)
    driver = BronzeAppender(str(table), checkpoints)
    real = DeltaTable.create_checkpoint

    def unreachable(self: DeltaTable) -> None:
        raise OSError("the store is unreachable")

    monkeypatch.setattr(DeltaTable, "create_checkpoint", unreachable)
    assert driver.append(_batch_rows(spark, 0, 1), 0)
    checkpoints.wait(60)
    assert checkpoints.written == []
    assert _checkpointed_versions(table) == []
    monkeypatch.setattr(DeltaTable, "create_checkpoint", real)
    assert driver.append(_batch_rows(spark, 1, 1), 1)  # the next append, not the 100th, tries again
    checkpoints.wait(60)
    assert _checkpointed_versions(table) == checkpoints.written != []
    assert _batches_in_bronze(spark, str(table)) == {0: 1, 1: 1}


def test_the_batches_are_read_from_commits_that_name_one() -> None:
    texts = [
        json.dumps({"batch_id": 7, "watermark_us": 1}),
        None,  # a commit written without metadata (table creation, a schema change)
        "not json",
        json.dumps({"batch_id": "7"}),  # not a batch id
        json.dumps([1, 2]),
        json.dumps({"batch_id": 6}),
    ]
    assert recorded_batches(texts) == [{"batch_id": 7, "watermark_us": 1}, {"batch_id": 6}]
