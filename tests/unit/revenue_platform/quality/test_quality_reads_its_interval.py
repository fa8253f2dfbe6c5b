"""A quality check reads the gold of its interval, not gold's whole history (issue 57).

Each test damages the data files of hours the check must not need: a reader that opened them fails
(`UnreadableDeltaFileError`), so passing proves the files were never read, not only that their rows
were filtered out afterwards. The reader before this change loaded every row of gold and fails here.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
from deltalake import write_deltalake

from revenue_platform.quality import frames as F
from revenue_platform.quality.config import QualityConfig
from revenue_platform.quality.loaders import load_gold, newest_window_end_at_or_before
from revenue_platform.quality.runner import gold_rows_from, run_revenue_checks
from spark_apps.contract.gold_layout import GOLD_HOUR_COLUMN, window_hour
from spark_apps.contract.naming import DeploymentNames
from tests.quality_helpers import (
    GOLD_ARROW_SCHEMA,
    INTERVAL_END,
    INTERVAL_START,
    WINDOW,
    bronze_rows,
    gold_rows,
    scenario_orders,
    write_tables,
)

HISTORY_DAYS = 3


def _window(start: datetime, count: int = 1) -> dict[str, Any]:
    return {
        "location_id": "store-old",
        "order_type": "GENERAL",
        "window_start": start,
        "window_end": start + WINDOW,
        "order_count": count,
        "revenue": Decimal("1.00") * count,
        "address_line1": None,
        "address_line2": None,
        "city": None,
        "state": None,
        "zip": None,
        "contact_num": None,
        "batch_id": 0,
    }


def _history(hours: int, before: datetime) -> list[dict[str, Any]]:
    """One window in each of the `hours` hours before `before`'s hour."""
    first = before.replace(minute=0, second=0, microsecond=0)
    return [_window(first - timedelta(hours=h, minutes=-7)) for h in range(1, hours + 1)]


def _damage_hours(gold_table: str, keep: set[str]) -> list[str]:
    """Truncate the data files of every hour partition not in `keep`; the damaged hours."""
    damaged = []
    for partition in Path(gold_table).glob(f"{GOLD_HOUR_COLUMN}=*"):
        hour = partition.name.split("=", 1)[1]
        if hour in keep:
            continue
        for data_file in partition.glob("*.parquet"):
            data_file.write_bytes(b"not parquet")
        damaged.append(hour)
    return damaged


def test_a_check_reads_only_the_hours_of_its_interval(tmp_path: Path) -> None:
    orders = scenario_orders()
    interval = gold_rows(orders)
    names = write_tables(
        tmp_path, "blue", interval + _history(24 * HISTORY_DAYS, INTERVAL_START), bronze_rows(orders)
    )
    first, last = gold_rows_from(INTERVAL_START, INTERVAL_END, QualityConfig())
    hour = timedelta(hours=1)
    needed = {window_hour(first + h * hour) for h in range(int((last - first) / hour) + 1)} | {
        window_hour(last)
    }
    damaged = _damage_hours(names.gold_revenue_table, keep=needed)
    assert len(damaged) >= 24 * HISTORY_DAYS - 1

    gold = load_gold(names.gold_revenue_table, first, last)

    hours = {
        window_hour(start.to_pydatetime()) for start in pd.to_datetime(gold.rows["window_start"], utc=True)
    }
    assert hours <= needed
    assert len(gold.rows[gold.rows["location_id"] != "store-old"]) == len(interval)
    # The whole check too: its reconciliation passes on the interval's rows alone.
    report = run_revenue_checks("blue", str(tmp_path), INTERVAL_START, INTERVAL_END, store_results=False)
    assert report.success, report.failure_summary()


def test_freshness_finds_the_newest_closed_window_in_older_hours_reading_no_older_one(tmp_path: Path) -> None:
    """An interval with no window of its own (the app stopped 5 hours before its end): the lag is
    measured from the newest window gold has, read from its hour, every older hour left unread."""
    newest_start = INTERVAL_END - timedelta(hours=5, minutes=20)
    older = [_window(newest_start - timedelta(hours=h)) for h in range(1, 30)]
    names = write_tables(tmp_path, "blue", [_window(newest_start), *older], [])
    _damage_hours(names.gold_revenue_table, keep={window_hour(newest_start)})
    gold_path = names.gold_revenue_table

    assert newest_window_end_at_or_before(gold_path, INTERVAL_END) == newest_start + WINDOW
    first, last = gold_rows_from(INTERVAL_START, INTERVAL_END, QualityConfig())
    rows = load_gold(gold_path, first, last).rows
    assert rows.empty
    frame = F.freshness_frame(
        rows,
        INTERVAL_END,
        QualityConfig(),
        None,
        lambda bound: newest_window_end_at_or_before(gold_path, bound),
    )
    # No orders given: the reference is the interval's end.
    assert frame["lag_seconds"].tolist() == [(INTERVAL_END - (newest_start + WINDOW)).total_seconds()]


def test_the_newest_closed_window_may_be_an_hour_further_back_than_the_bounds_hour(tmp_path: Path) -> None:
    """The bound's own hour holds only windows still open at the bound: the one before is read too."""
    bound = datetime(2026, 11, 22, 10, 0, 5, tzinfo=UTC)
    still_open = _window(datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC))  # ends after the bound
    closed = _window(datetime(2026, 11, 22, 9, 59, 45, tzinfo=UTC))  # ends 10:00:00 when WINDOW is 15 s
    names = write_tables(tmp_path, "blue", [still_open, closed], [])

    assert newest_window_end_at_or_before(names.gold_revenue_table, bound) == closed["window_end"]
    assert (
        newest_window_end_at_or_before(names.gold_revenue_table, closed["window_end"] - timedelta(seconds=1))
        is None
    )


@pytest.mark.parametrize("layout", ["hourly", "flat"])
def test_rows_without_a_window_start_are_always_read(tmp_path: Path, layout: str) -> None:
    """A row without a start is the checks' own finding, whatever the interval: never pruned away."""
    row = _window(INTERVAL_START)
    names = DeploymentNames(str(tmp_path), "blue")
    if layout == "hourly":
        write_tables(tmp_path, "blue", [row, {**row, "window_start": None}], [])
    else:
        far = _window(INTERVAL_START - timedelta(days=2))
        write_deltalake(
            names.gold_revenue_table,
            pa.Table.from_pylist([row, far, {**row, "window_start": None}], schema=GOLD_ARROW_SCHEMA),
        )
    rows = load_gold(names.gold_revenue_table, INTERVAL_START - timedelta(minutes=1), INTERVAL_END).rows
    assert sorted(rows["window_start"].isna().tolist()) == [False, True]
