"""Gold laid out for time (issue 57): a batch into a gold table holding days of windows rewrites only
the files of the hours its windows are in, whichever writer commits it (the driver's delta-rs MERGE
or Spark's), counted from the Delta log's own actions.

Before the hourly layout every batch rewrote the one file that had collected every window since the
app started: a batch after three days copied all 34,560 rows of this test's history.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from revenue_platform.gold_table import read_gold
from spark_apps.contract.gold_layout import GOLD_HOUR_COLUMN, window_hour
from spark_apps.contract.records import GOLD_COLUMNS
from spark_apps.storage.gold import ensure_gold_table, merge_gold
from spark_apps.storage.gold_from_driver import merge_gold_from_driver
from spark_apps.storage.tables import ensure_delta_table
from spark_apps.validation.schemas import GOLD_SCHEMA

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 20, 0, 0, 0, tzinfo=UTC)
WINDOW = timedelta(seconds=15)
WINDOWS_PER_HOUR = 240
HOURS = 72  # three days of history
STORES = ("store_1",)
TYPES = ("GENERAL", "RESTAURANT")
ROWS_PER_HOUR = WINDOWS_PER_HOUR * len(STORES) * len(TYPES)
ADDRESS = ("1 Main St", "", "Springfield", "IL", "62701", "5550100")


def _window_rows(starts: list[datetime], batch: int, count: int = 1) -> list[tuple[Any, ...]]:
    return [
        (store, kind, start, start + WINDOW, count, Decimal("2.50") * count, *ADDRESS, batch)
        for start in starts
        for store in STORES
        for kind in TYPES
    ]


def _seed_live_history(table: str) -> int:
    """Three days of gold as a live app writes it: one batch per hour with that hour's windows, each
    also updating the previous hour's last window (a late order). Returns the last batch id."""
    for hour in range(HOURS):
        first = T0 + timedelta(hours=hour)
        starts = [first + WINDOW * index for index in range(WINDOWS_PER_HOUR)]
        late = [first - WINDOW] if hour else []
        merge_gold_from_driver(_window_rows(late, hour, count=2) + _window_rows(starts, hour), table)
    return HOURS - 1


def _commit_actions(table: str) -> dict[str, list[dict[str, Any]]]:
    """The add and remove actions of the table's latest commit, from its Delta log."""
    log = Path(table) / "_delta_log"
    latest = max(log.glob("*.json"), key=lambda path: int(path.stem))
    actions: dict[str, list[dict[str, Any]]] = {"add": [], "remove": []}
    for line in latest.read_text().splitlines():
        action = json.loads(line)
        for kind in actions:
            if kind in action:
                actions[kind].append(action[kind])
    return actions


def _expect_only_the_hour_rewritten(table: str, hour: str, batch_rows: int) -> None:
    actions = _commit_actions(table)
    rows_written = sum(json.loads(added["stats"])["numRecords"] for added in actions["add"])
    # Its own hour at most (the copied rows and the batch's updates), never the days before it.
    assert rows_written <= ROWS_PER_HOUR + batch_rows, (
        f"the batch wrote {rows_written} rows; its hour holds {ROWS_PER_HOUR}"
    )
    removed_hours = {removed["partitionValues"].get(GOLD_HOUR_COLUMN) for removed in actions["remove"]}
    assert removed_hours == {hour}, (
        f"the batch rewrote files of {sorted(map(str, removed_hours))}, not only {hour}"
    )


def test_a_batch_into_days_of_gold_rewrites_only_its_hour_from_either_writer(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = str(tmp_path / "gold")
    ensure_gold_table(spark, table)
    last_batch = _seed_live_history(table)
    newest = T0 + timedelta(hours=HOURS) - WINDOW
    newest_hour = window_hour(newest)

    # A live batch from the driver: the newest window again (absolute totals) and one in the same hour.
    live = _window_rows([newest], last_batch + 1, count=3)
    merge_gold_from_driver(live, table)
    _expect_only_the_hour_rewritten(table, newest_hour, len(live))

    # The same from Spark's MERGE (a table the driver cannot write keeps it), bounded by the batch's windows.
    spark_batch = _window_rows([newest], last_batch + 2, count=4)
    merge_gold(spark.createDataFrame(spark_batch, GOLD_SCHEMA), table, newest, newest)
    _expect_only_the_hour_rewritten(table, newest_hour, len(spark_batch))

    gold = read_gold(table)
    assert gold.column_names == list(GOLD_COLUMNS), "readers get gold's contract, not its layout column"
    assert gold.num_rows == HOURS * ROWS_PER_HOUR
    revenue = {(row["location_id"], row["order_type"], row["window_start"]): row for row in gold.to_pylist()}
    assert revenue["store_1", "GENERAL", newest]["order_count"] == 4
    assert revenue["store_1", "GENERAL", newest]["revenue"] == Decimal("10.00")
    late = T0 + timedelta(hours=1) - WINDOW  # the first hour's last window, updated by hour 1's batch
    assert revenue["store_1", "RESTAURANT", late]["order_count"] == 2
    # Every row sits in its own hour's partition, whichever writer put it there.
    hours = (
        spark.read.format("delta")
        .load(table)
        .selectExpr(
            f"count_if({GOLD_HOUR_COLUMN} != date_format(window_start, \"yyyy-MM-dd'T'HH\")) AS misplaced"
        )
    )
    assert hours.first()["misplaced"] == 0


def test_a_gold_table_from_before_the_layout_keeps_its_writers(spark: SparkSession, tmp_path: Path) -> None:
    """A deployment's gold created unpartitioned keeps working with both writers, unchanged."""
    table = str(tmp_path / "gold")
    ensure_delta_table(spark, table, GOLD_SCHEMA)
    first = _window_rows([T0, T0 + WINDOW], 1)
    merge_gold_from_driver(first, table)
    merge_gold(
        spark.createDataFrame(_window_rows([T0 + WINDOW], 2, count=5), GOLD_SCHEMA), table, T0, T0 + WINDOW
    )

    gold = read_gold(table)
    assert gold.column_names == list(GOLD_COLUMNS)
    counts = {(row["order_type"], row["window_start"]): row["order_count"] for row in gold.to_pylist()}
    assert counts == {
        ("GENERAL", T0): 1,
        ("RESTAURANT", T0): 1,
        ("GENERAL", T0 + WINDOW): 5,
        ("RESTAURANT", T0 + WINDOW): 5,
    }
    assert GOLD_HOUR_COLUMN not in spark.read.format("delta").load(table).columns
