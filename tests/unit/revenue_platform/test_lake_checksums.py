"""Maintenance's commits on a table Spark writes get the checksum Spark would have derived for them, or
none at all: the derivation (`derive_checksum`), and on a real bronze table, Spark's own check of what
maintenance wrote, and Spark's next append costing what the one before it did."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from py4j.protocol import Py4JJavaError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from revenue_platform.lake_checksums import checksum_location, derive_checksum, write_checksums_since
from revenue_platform.lake_maintenance import maintain_table, remove_orphan_checksums
from spark_apps.storage.bronze import BronzeAppender, ensure_bronze_table, read_bronze
from spark_apps.validation.schemas import BRONZE_SCHEMA
from tests.spark_helpers import session_conf

BOUNDS = [0, 8192, 16384, 1048576]


def _spark_checksum(**overrides: Any) -> dict[str, Any]:
    """A checksum as Spark writes it for a table of three files: 1,000, 10,000 and 2,000,000 bytes."""
    checksum = {
        "txnId": "spark-txn",
        "tableSizeBytes": 2_011_000,
        "numFiles": 3,
        "numMetadata": 1,
        "numProtocol": 1,
        "setTransactions": [],
        "domainMetadata": [],
        "metadata": {"id": "table-id", "partitionColumns": ["ingest_date"]},
        "protocol": {"minReaderVersion": 1, "minWriterVersion": 2},
        "fileSizeHistogram": {
            "sortedBinBoundaries": BOUNDS,
            "fileCounts": [1, 1, 0, 1],
            "totalBytes": [1_000, 10_000, 0, 2_000_000],
        },
    }
    return {**checksum, **overrides}


def _add(size: int) -> dict[str, Any]:
    return {"add": {"path": f"f{size}.parquet", "size": size, "dataChange": False}}


def _remove(size: int) -> dict[str, Any]:
    return {"remove": {"path": f"f{size}.parquet", "size": size, "dataChange": False}}


COMMIT_INFO = {"commitInfo": {"operation": "OPTIMIZE", "engineInfo": "delta-rs"}}


def test_a_compaction_moves_its_files_between_the_bins_and_keeps_the_rest() -> None:
    previous = _spark_checksum()

    derived = derive_checksum(previous, [COMMIT_INFO, _remove(1_000), _remove(10_000), _add(11_000)])

    assert derived is not None
    assert (derived["numFiles"], derived["tableSizeBytes"]) == (2, 2_011_000)
    assert derived["fileSizeHistogram"] == {
        "sortedBinBoundaries": BOUNDS,
        "fileCounts": [0, 1, 0, 1],
        "totalBytes": [0, 11_000, 0, 2_000_000],
    }
    assert derived["txnId"] != previous["txnId"]
    for unchanged in ("metadata", "protocol", "setTransactions", "domainMetadata", "numMetadata"):
        assert derived[unchanged] == previous[unchanged]


def test_a_file_on_a_bin_boundary_falls_in_the_bin_that_starts_there() -> None:
    derived = derive_checksum(_spark_checksum(), [_add(16384)])

    assert derived is not None
    assert derived["fileSizeHistogram"]["fileCounts"] == [1, 1, 1, 1]


def test_a_commit_without_files_changes_only_the_transaction_id() -> None:
    previous = _spark_checksum(allFiles=[{"path": "f1000.parquet"}])

    derived = derive_checksum(previous, [{"commitInfo": {"operation": "VACUUM END"}}])

    assert derived is not None
    assert {k: v for k, v in derived.items() if k != "txnId"} == {
        k: v for k, v in previous.items() if k != "txnId"
    }


def test_the_file_list_is_left_out_once_files_change() -> None:
    derived = derive_checksum(_spark_checksum(allFiles=[{"path": "f1000.parquet"}]), [_add(5)])

    assert derived is not None
    assert "allFiles" not in derived


@pytest.mark.parametrize(
    ("previous", "actions"),
    [
        pytest.param(_spark_checksum(), [{"metaData": {"id": "x"}}], id="a metadata change"),
        pytest.param(_spark_checksum(), [{"protocol": {"minReaderVersion": 3}}], id="a protocol change"),
        pytest.param(_spark_checksum(), [{"txn": {"appId": "a", "version": 1}}], id="a transaction"),
        pytest.param(_spark_checksum(), [{"remove": {"path": "f1000.parquet"}}], id="a remove without size"),
        pytest.param(
            _spark_checksum(),
            [{"remove": {"path": "f1000.parquet", "size": 1000, "deletionVector": {"storageType": "u"}}}],
            id="a deletion vector",
        ),
        pytest.param(
            _spark_checksum(), [_remove(1_000), _remove(1_000)], id="more removed than the bin holds"
        ),
        pytest.param(
            _spark_checksum(inCommitTimestampOpt=1), [_add(5)], id="a field this code does not know"
        ),
        pytest.param({"txnId": "t"}, [_add(5)], id="a checksum without counts"),
        pytest.param(
            _spark_checksum(fileSizeHistogram={"sortedBinBoundaries": [0, 10], "fileCounts": [1]}),
            [_add(5)],
            id="a malformed histogram",
        ),
    ],
)
def test_anything_it_cannot_derive_exactly_gets_no_checksum(
    previous: dict[str, Any], actions: list[dict[str, Any]]
) -> None:
    assert derive_checksum(previous, actions) is None


# The files, on a delta-rs table that stands in for Spark's (a checksum as Spark's at its version).
def _table_with_a_spark_checksum(path: Path) -> int:
    """Three one-file appends to one day, and the checksum Spark would have written for the last."""
    for value in range(3):
        write_deltalake(
            str(path), pa.table({"day": ["2026-11-27"], "n": [value]}), mode="append", partition_by=["day"]
        )
    table = DeltaTable(str(path))
    sizes = pa.table(table.get_add_actions(flatten=True)).column("size_bytes").to_pylist()
    histogram = {"sortedBinBoundaries": BOUNDS, "fileCounts": [0] * 4, "totalBytes": [0] * 4}
    for size in sizes:
        index = max(i for i, bound in enumerate(BOUNDS) if bound <= size)
        histogram["fileCounts"][index] += 1
        histogram["totalBytes"][index] += size
    checksum = _spark_checksum(numFiles=len(sizes), tableSizeBytes=sum(sizes), fileSizeHistogram=histogram)
    Path(checksum_location(str(path), table.version())).write_text(json.dumps(checksum) + "\n")
    return table.version()


def test_a_compaction_gets_one_line_checksum_readable_by_all_and_a_later_append_none(tmp_path: Path) -> None:
    path = tmp_path / "bronze"
    version = _table_with_a_spark_checksum(path)
    DeltaTable(str(path)).optimize.compact()

    outcome = write_checksums_since(str(path), version)

    assert (outcome.written, outcome.stopped) == (1, None)
    written = Path(checksum_location(str(path), version + 1))
    [line] = written.read_text().splitlines()  # Spark parses the first line only
    assert json.loads(line)["numFiles"] == 1
    assert written.stat().st_mode & 0o777 == 0o644
    # A plain write (a live append's place): not maintenance's, so not derived; Spark writes its own.
    write_deltalake(
        str(path), pa.table({"day": ["2026-11-28"], "n": [9]}), mode="append", partition_by=["day"]
    )
    outcome = write_checksums_since(str(path), version + 1)
    assert (outcome.written, outcome.stopped) == (0, f"version {version + 2} is not maintenance's")
    assert not Path(checksum_location(str(path), version + 2)).exists()


def test_a_checksum_already_there_is_never_replaced_even_unreadable(tmp_path: Path) -> None:
    path = tmp_path / "bronze"
    version = _table_with_a_spark_checksum(path)
    DeltaTable(str(path)).optimize.compact()
    unreadable = Path(checksum_location(str(path), version + 1))
    unreadable.write_text("not json")

    outcome = write_checksums_since(str(path), version)

    assert outcome.written == 0
    assert (outcome.stopped or "").startswith("failed")
    assert unreadable.read_text() == "not json"


def test_a_derived_checksum_whose_histogram_disagrees_with_the_table_is_not_written(tmp_path: Path) -> None:
    path = tmp_path / "bronze"
    version = _table_with_a_spark_checksum(path)
    spark_written = Path(checksum_location(str(path), version))
    checksum = json.loads(spark_written.read_text())
    checksum["fileSizeHistogram"]["fileCounts"][3] += 1  # a file in the top bin the table does not have
    spark_written.write_text(json.dumps(checksum) + "\n")
    DeltaTable(str(path)).optimize.compact()

    outcome = write_checksums_since(str(path), version)

    assert (outcome.written, outcome.stopped) == (0, f"version {version + 1} disagrees with the table")


# On a real bronze table, with the app's Spark settings (the tests' session has them).
YESTERDAY, TODAY = "2026-11-27", "2026-11-28"
VERIFY_CHECKSUMS = "spark.databricks.delta.incremental.commit.verify"


def _bronze_rows(spark: SparkSession, batch_id: int, day: str) -> DataFrame:
    values = {field.name: F.lit(None).cast(field.dataType) for field in BRONZE_SCHEMA.fields}
    values["offset"] = (F.col("id") + F.lit(batch_id * 1_000)).cast("long")
    values["ingest_batch_id"] = F.lit(batch_id).cast("long")
    values["ingest_date"] = F.to_date(F.lit(day))
    return spark.range(20).repartition(2).select(*[values[n].alias(n) for n in BRONZE_SCHEMA.fieldNames()])


def _spark_jobs_of(spark: SparkSession, append: Callable[[], object]) -> int:
    """How many Spark jobs `append()` ran (its own and Delta's)."""
    name = f"append-{uuid.uuid4().hex}"
    context = spark.sparkContext
    context.setJobGroup(name, name)
    try:
        append()
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    return len(context.statusTracker().getJobIdsForGroup(name))


def _spark_checks_every_checksum(spark: SparkSession) -> AbstractContextManager[None]:
    """Delta rebuilds the table's state before and after each commit and fails the commit when a
    checksum disagrees with it."""
    return session_conf(spark, {VERIFY_CHECKSUMS: "true"})


def _maintained_bronze(spark: SparkSession, table: str) -> tuple[BronzeAppender, int, int]:
    """Bronze with six batches of yesterday and one of today, after maintenance compacted yesterday and
    deleted the files it replaced (retention 0: the VACUUM commits too). The appender, the versions
    before and after maintenance."""
    ensure_bronze_table(spark, table)
    appender = BronzeAppender(table)
    for batch_id in range(6):
        appender.append(_bronze_rows(spark, batch_id, YESTERDAY), batch_id, {})
    appender.append(_bronze_rows(spark, 6, TODAY), 6, {})
    before = DeltaTable(table).version()
    report = maintain_table(table, "bronze[t]", timedelta(0), lambda _: [("ingest_date", "<", TODAY)])
    after = DeltaTable(table).version()
    assert report.files_compacted == 12
    assert after - before == 3  # the compaction, the VACUUM's start and end
    assert report.checksums_written == 3
    assert not report.notes
    return appender, before, after


def test_spark_reads_maintenance_s_checksums_and_its_next_append_costs_what_one_before_did(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = str(tmp_path / "bronze")
    ensure_bronze_table(spark, table)
    warm = BronzeAppender(table)
    warm.append(_bronze_rows(spark, 0, TODAY), 0, {})
    jobs_before = _spark_jobs_of(spark, lambda: warm.append(_bronze_rows(spark, 1, TODAY), 1, {}))

    table = str(tmp_path / "maintained")
    appender, before, after = _maintained_bronze(spark, table)
    delta_log = spark._jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, table)  # type: ignore[union-attr]
    for version in range(before + 1, after + 1):  # each one Spark can parse
        assert delta_log.readChecksum(version, spark._jvm.scala.Option.empty()).isDefined(), version  # type: ignore[union-attr]

    jobs_after = _spark_jobs_of(spark, lambda: appender.append(_bronze_rows(spark, 7, TODAY), 7, {}))
    # Without the checksum, Spark rebuilt bronze's state first: 6-8 jobs against 2.
    assert jobs_after == jobs_before
    with _spark_checks_every_checksum(spark):
        appender.append(_bronze_rows(spark, 8, TODAY), 8, {})
    counts = read_bronze(spark, table).groupBy("ingest_batch_id").count().collect()
    assert {row["ingest_batch_id"]: row["count"] for row in counts} == {batch: 20 for batch in range(9)}


def test_spark_refuses_to_append_on_a_checksum_that_disagrees_with_the_table(
    spark: SparkSession, tmp_path: Path
) -> None:
    # What makes the check above worth something: a derived checksum off by one file fails Spark's.
    table = str(tmp_path / "bronze")
    appender, _, after = _maintained_bronze(spark, table)
    wrong = Path(checksum_location(table, after))  # the one Spark's next append starts from
    checksum = json.loads(wrong.read_text())
    checksum.update(numFiles=checksum["numFiles"] + 1, tableSizeBytes=checksum["tableSizeBytes"] + 1)
    wrong.write_text(json.dumps(checksum) + "\n")

    with _spark_checks_every_checksum(spark), pytest.raises(Py4JJavaError) as refused:
        appender.append(_bronze_rows(spark, 7, TODAY), 7, {})
    assert "DELTA_TXN_LOG_FAILED_INTEGRITY" in str(refused.value)


def test_the_hidden_checksums_spark_leaves_beside_log_entries_go_with_the_entries(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Spark's local file system writes a hidden `.<name>.crc` beside every file it writes, log
    entries and their `.crc` included; the log cleanup removes the entries, never those (nor does
    VACUUM, which leaves `_delta_log` alone). Maintenance removes them with the entries' checksums."""
    table = str(tmp_path / "bronze")
    _maintained_bronze(spark, table)  # Spark's commits 0-7, maintenance's (delta-rs) after them
    log = Path(table) / "_delta_log"
    assert {f".{v:020d}.{kind}.crc" for v in range(8) for kind in ("json", "crc")} <= set(os.listdir(log))

    # The log as the cleanup leaves it once the first commits have expired: a checkpoint, the entries
    # before it gone, their checksums still there.
    checkpoint = DeltaTable(table).version()
    DeltaTable(table).create_checkpoint()
    for version in range(checkpoint):
        (log / f"{version:020d}.json").unlink()
    BronzeAppender(table).append(_bronze_rows(spark, 7, TODAY), 7, {})  # Spark commits after it

    removed = remove_orphan_checksums(table)

    left = os.listdir(log)
    versions = [name.lstrip(".").split(".")[0] for name in left]
    # Nothing of the expired entries is left: not theirs, not their checksums.
    assert [v for v in versions if v.isdigit() and int(v) < checkpoint] == []
    # The hidden checksums of what stays stay: Spark's commit after the checkpoint, _last_checkpoint.
    hidden = [name for name in left if name.startswith(".")]
    assert {f".{checkpoint + 1:020d}.json.crc", f".{checkpoint + 1:020d}.crc.crc"} <= set(hidden)
    assert all(name[1:-4] in left for name in hidden)
    # Each expired entry's `<version>.crc`, and for each of Spark's eight commits its two hidden ones
    # (maintenance's own commits, by delta-rs, have none).
    assert checkpoint >= 8
    assert removed == checkpoint + 2 * 8
    counts = read_bronze(spark, table).groupBy("ingest_batch_id").count().collect()
    assert {row["ingest_batch_id"]: row["count"] for row in counts} == {batch: 20 for batch in range(8)}
