"""A store id from the reprocess form cannot widen gold's repair: real Spark and Delta.

`replace_gold_windows` deletes the gold windows of the repaired range that the recomputation
lacks. Its delete condition used to be SQL text with the form's store ids spliced in (quotes
doubled, backslashes not), and one crafted id deleted every gold row. The condition is now a
Column expression; these tests pin that a hostile id matches nothing and a real repair still
touches exactly its stores' windows in its range.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_apps.storage.gold import gold_frame, replace_gold_windows
from spark_apps.validation.schemas import REVENUE_WINDOW_SCHEMA

pytestmark = pytest.mark.integration

START = datetime(2026, 11, 22, 9, 0, 0)
STORES = [f"store_{n}" for n in range(1, 9)]
ORDER_TYPES = ("GENERAL", "RESTAURANT")
WINDOWS = 60  # 15 minutes of 15-second windows
HOSTILE = "x\\') OR true --"


def _rows(stores: list[str], first: int, count: int, bump: int = 0) -> list[tuple]:
    return [
        (
            store,
            order_type,
            START + timedelta(seconds=15 * w),
            START + timedelta(seconds=15 * (w + 1)),
            w + 1 + bump,
            Decimal(f"{w + 1 + bump}.25"),
        )
        for store in stores
        for order_type in ORDER_TYPES
        for w in range(first, first + count)
    ]


def _gold(spark: SparkSession, path: str) -> dict[tuple, tuple]:
    return {
        (r.location_id, r.order_type, r.window_start): (r.order_count, r.revenue)
        for r in gold_frame(spark, path).collect()
    }


@pytest.fixture
def gold_table(spark: SparkSession, tmp_path: Path) -> str:
    path = str(tmp_path / "gold")
    spark.createDataFrame(_rows(STORES, 0, WINDOWS), REVENUE_WINDOW_SCHEMA).write.format("delta").save(path)
    return path


def test_a_hostile_store_id_deletes_nothing(spark: SparkSession, gold_table: str) -> None:
    before = _gold(spark, gold_table)
    assert len(before) == len(STORES) * len(ORDER_TYPES) * WINDOWS
    # A one-minute repair of store_1 whose recomputation equals gold: nothing may change, and the
    # hostile id (the reproduction) must not turn the delete into "every row".
    recomputed = spark.createDataFrame(_rows(["store_1"], 0, 4), REVENUE_WINDOW_SCHEMA)

    replace_gold_windows(recomputed, gold_table, START, START + timedelta(minutes=1), ["store_1", HOSTILE])

    assert _gold(spark, gold_table) == before


def test_a_repair_changes_only_its_stores_inside_its_range(spark: SparkSession, gold_table: str) -> None:
    before = _gold(spark, gold_table)
    # store_2's first minute recomputed with different totals and one window missing.
    recomputed = spark.createDataFrame(_rows(["store_2"], 0, 3, bump=100), REVENUE_WINDOW_SCHEMA)

    replace_gold_windows(recomputed, gold_table, START, START + timedelta(minutes=1), ["store_2", HOSTILE])

    after = _gold(spark, gold_table)
    fixed = _gold_of(_rows(["store_2"], 0, 3, bump=100))
    dropped = {k for k in before if k[0] == "store_2" and k[2] == START + timedelta(seconds=45)}
    assert len(dropped) == 2, "the window the recomputation lacks, for both order types"
    expected = {k: v for k, v in before.items() if k not in dropped} | fixed
    assert after == expected


def _gold_of(rows: list[tuple]) -> dict[tuple, tuple]:
    return {(r[0], r[1], r[2]): (r[4], r[5]) for r in rows}
