"""The engine's gold MERGE from the driver (delta-rs) against a gold table Spark created.

Gold is shared with Spark's writers (reprocessing, repairs) and readers, so the driver's commits
must read back through Spark's Delta exactly as Spark's own MERGE would have written them, and
Spark's MERGE must keep working on a table the driver wrote.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from revenue_platform.gold_table import read_gold
from spark_apps.contract.fencing import GOLD_COMMIT_APP_ID, CommitStamp, LeaseRejectedError
from spark_apps.contract.records import STORE_ADDRESS_COLUMNS
from spark_apps.storage.gold import ensure_gold_table, merge_gold
from spark_apps.storage.gold_from_driver import gold_writable_from_driver, merge_gold_from_driver
from spark_apps.storage.tables import local_table_path
from spark_apps.validation.schemas import GOLD_SCHEMA

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 24, 9, 0, 0, tzinfo=UTC)
W = timedelta(seconds=15)
ADDRESS = ("1 Main St", "", "Springfield", "IL", "62701", "5550100")
NO_ADDRESS = (None,) * len(STORE_ADDRESS_COLUMNS)
# The largest total gold's DECIMAL(38,2) holds: nothing may round it.
LARGEST = Decimal("999999999999999999999999999999999999.99")


def _row(location: str, start: datetime, count: int, revenue: str | Decimal, batch: int) -> tuple[Any, ...]:
    address = NO_ADDRESS if location == "store_unknown" else ADDRESS
    return (location, "GENERAL", start, start + W, count, Decimal(revenue), *address, batch)


def _gold(spark: SparkSession, table: str) -> dict[tuple[str, str, datetime], tuple[Any, ...]]:
    rows = spark.read.format("delta").load(table).collect()
    keyed: dict[tuple[str, str, datetime], tuple[Any, ...]] = {}
    for row in rows:
        # The session's time zone is UTC: Spark hands back naive UTC datetimes.
        start = row["window_start"].replace(tzinfo=UTC)
        key = (row["location_id"], row["order_type"], start)
        assert key not in keyed, f"two gold rows for {key}"
        keyed[key] = (
            row["location_id"],
            row["order_type"],
            start,
            row["window_end"].replace(tzinfo=UTC),
            row["order_count"],
            row["revenue"],
            *(row[c] for c in STORE_ADDRESS_COLUMNS),
            row["batch_id"],
        )
    return keyed


def _spark_merge(spark: SparkSession, table: str, rows: list[tuple[Any, ...]]) -> None:
    merge_gold(spark.createDataFrame(rows, GOLD_SCHEMA), table)


def test_driver_and_spark_merges_interleave_on_one_gold_table(spark: SparkSession, tmp_path: Path) -> None:
    table = str(tmp_path / "gold")
    ensure_gold_table(spark, table)
    assert gold_writable_from_driver(table)

    _spark_merge(spark, table, [_row("store_a", T0, 2, "10.50", 0), _row("store_a", T0 + W, 1, "0.01", 0)])
    # The driver updates one window (absolute totals), inserts two, one of them for a store with
    # no address, and the largest total gold can hold.
    merge_gold_from_driver(
        [
            _row("store_a", T0 + W, 3, "7.77", 1),
            _row("store_unknown", T0, 1, "0.10", 1),
            _row("store_a", T0 + 2 * W, 9, LARGEST, 1),
        ],
        table,
    )
    # The same MERGE again (a batch run again after a crash) changes nothing.
    merge_gold_from_driver([_row("store_a", T0 + W, 3, "7.77", 1)], table)
    # Spark's MERGE (a repair or a reprocess) on the table the driver wrote.
    _spark_merge(spark, table, [_row("store_a", T0, 4, "21.00", 2)])

    assert _gold(spark, table) == {
        ("store_a", "GENERAL", T0): _row("store_a", T0, 4, "21.00", 2),
        ("store_a", "GENERAL", T0 + W): _row("store_a", T0 + W, 3, "7.77", 1),
        ("store_unknown", "GENERAL", T0): _row("store_unknown", T0, 1, "0.10", 1),
        ("store_a", "GENERAL", T0 + 2 * W): _row("store_a", T0 + 2 * W, 9, LARGEST, 1),
    }
    # The API's reader (pyarrow, a string filter) on files delta-rs rewrote (strings as views).
    served = read_gold(table, ["window_start", "order_count"], [("location_id", "=", "store_a")])
    assert sorted(served.column("order_count").to_pylist()) == [3, 4, 9]


def test_a_fenced_driver_merges_nothing(spark: SparkSession, tmp_path: Path) -> None:
    table = str(tmp_path / "gold")
    ensure_gold_table(spark, table)

    def superseded() -> None:
        raise LeaseRejectedError("a newer driver holds the lease")

    with pytest.raises(LeaseRejectedError):
        merge_gold_from_driver([_row("store_a", T0, 1, "1.00", 0)], table, before_commit=superseded)
    assert _gold(spark, table) == {}


def test_gold_outside_this_filesystem_or_in_an_upgraded_protocol_stays_with_spark(
    spark: SparkSession, tmp_path: Path
) -> None:
    from delta.tables import DeltaTable

    assert not gold_writable_from_driver("s3a://lake/gold/revenue_windows/blue")
    assert local_table_path("file:/data/lake/gold") == "/data/lake/gold"
    assert local_table_path("lake/gold") == "lake/gold"

    table = str(tmp_path / "gold")
    ensure_gold_table(spark, table)
    DeltaTable.forPath(spark, table).upgradeTableProtocol(1, 4)  # e.g. change data feed turned on
    assert not gold_writable_from_driver(table)


def test_a_driver_that_stalled_after_its_lease_check_cannot_commit_after_its_successor(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The stalled old driver (epoch 5) passed its lease check, then its successor (epoch 6) committed
    count 9; the old one wakes and MERGEs its count 7. The table refuses it: gold keeps 9."""
    import threading

    table = str(tmp_path / "gold")
    ensure_gold_table(spark, table)
    merge_gold_from_driver([_row("store_a", T0, 5, "5.00", 3)], table, stamp=CommitStamp(5, 3))
    checked, successor_done = threading.Event(), threading.Event()
    refusals: list[BaseException] = []

    def stall_after_the_lease_check() -> None:
        checked.set()
        assert successor_done.wait(60)

    def old_driver() -> None:
        try:
            merge_gold_from_driver(
                [_row("store_a", T0, 7, "7.00", 4)],
                table,
                stall_after_the_lease_check,
                stamp=CommitStamp(5, 4),
            )
        except LeaseRejectedError as error:
            refusals.append(error)

    stalled = threading.Thread(target=old_driver)
    stalled.start()
    assert checked.wait(60)
    merge_gold_from_driver([_row("store_a", T0, 9, "9.00", 4)], table, stamp=CommitStamp(6, 4))
    successor_done.set()
    stalled.join(60)

    assert [str(r) for r in refusals] == [
        "gold was already committed by lease epoch 6, newer than this driver's 5: its successor owns the "
        "deployment, and this batch's totals (batch 4) are not written"
    ]
    assert _gold(spark, table)["store_a", "GENERAL", T0][4:6] == (9, Decimal("9.00"))


def test_a_stale_epoch_is_refused_by_the_driver_merge_and_skipped_by_sparks(
    spark: SparkSession, tmp_path: Path
) -> None:
    """delta-rs refuses a commit whose table records a newer epoch; Spark's MERGE (the object-store
    path) is skipped by Delta's idempotent DML and the lease is checked again after it."""
    from deltalake import DeltaTable

    table = str(tmp_path / "gold")
    ensure_gold_table(spark, table)
    merge_gold_from_driver([_row("store_a", T0, 9, "9.00", 4)], table, stamp=CommitStamp(6, 4))
    assert DeltaTable(table).transaction_version(GOLD_COMMIT_APP_ID) == CommitStamp(6, 4).version

    with pytest.raises(LeaseRejectedError, match="lease epoch 6, newer than this driver's 5"):
        merge_gold_from_driver([_row("store_a", T0, 7, "7.00", 5)], table, stamp=CommitStamp(5, 5))

    lease_checks: list[str] = []
    merge_gold(
        spark.createDataFrame([_row("store_a", T0, 7, "7.00", 5)], GOLD_SCHEMA),
        table,
        before_commit=lambda: lease_checks.append("checked"),
        stamp=CommitStamp(5, 5),
    )
    assert lease_checks == ["checked", "checked"], "the lease is checked again after a stamped MERGE"
    assert _gold(spark, table)["store_a", "GENERAL", T0][4:6] == (9, Decimal("9.00"))
    assert spark.conf.get("spark.databricks.delta.write.txnAppId", None) is None, "the stamp is not left set"

    # The successor's next batches still land, through either path.
    merge_gold(
        spark.createDataFrame([_row("store_a", T0, 10, "10.00", 5)], GOLD_SCHEMA),
        table,
        stamp=CommitStamp(6, 5),
    )
    merge_gold_from_driver([_row("store_a", T0, 11, "11.00", 6)], table, stamp=CommitStamp(6, 6))
    assert _gold(spark, table)["store_a", "GENERAL", T0][4:6] == (11, Decimal("11.00"))
    assert DeltaTable(table).transaction_version(GOLD_COMMIT_APP_ID) == CommitStamp(6, 6).version
