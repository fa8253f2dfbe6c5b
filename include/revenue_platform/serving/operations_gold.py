"""What the operations view reads of a deployment's gold: the chart's range, never gold's history.

A refresh of the page reads, per deployment:

* where gold ends (`newest_window_start`): from the Delta log's file statistics (no data file read);
  a table without them reads the window starts of its newest hour (`window_hour`, gold's partition
  column), or, in the layout before hours, its one column of window starts;
* the chosen store's windows of the range (`store_windows`): at most `ChartRange.windows` windows per
  order type;
* the totals of every store over the range (`order_type_sums`) and the stores in it
  (`stores_in_range`): three columns of the range's rows, summed or grouped in Arrow.

Every read goes through `delta_reads.read_delta` (values rendered by code, never parsed as SQL) with
the range's hours as a filter, which keeps delta-rs from opening any other hour's files. So what a
refresh costs grows with the range shown (`MAX_CHART_WINDOWS` window starts at most) and the stores in
it, not with how long the deployment has run.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from spark_apps.contract.delta_reads import Condition, read_delta
from spark_apps.contract.gold_layout import GOLD_HOUR_COLUMN, window_hour
from spark_apps.contract.records import GOLD_WINDOW_COLUMNS

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable

    from revenue_platform.serving.operations_chart import ChartRange


def _partitioned(table: DeltaTable) -> bool:
    return GOLD_HOUR_COLUMN in table.metadata().partition_columns


def _add_actions(table: DeltaTable) -> pa.Table:
    import pyarrow as pa

    return pa.table(table.get_add_actions(flatten=True))


def _newest(column: pa.ChunkedArray) -> datetime | None:
    import pyarrow.compute as pc

    newest = pc.max(column).as_py()
    return None if newest is None else newest.astimezone(UTC)


def newest_window_start(table: DeltaTable) -> datetime | None:
    """The start of gold's newest window; None when gold has no window yet."""
    actions = _add_actions(table)
    if actions.num_rows == 0:
        return None
    statistic = "max.window_start"
    if statistic in actions.column_names and actions.column(statistic).null_count == 0:
        return _newest(actions.column(statistic))
    if not _partitioned(table):
        return _newest(read_delta(table, ["window_start"]).column("window_start"))
    # Hours sort as text; the newest hour holding a window start holds the newest one.
    hours = sorted(
        {h for h in actions.column(f"partition.{GOLD_HOUR_COLUMN}").to_pylist() if h}, reverse=True
    )
    for hour in hours:
        newest = _newest(
            read_delta(table, ["window_start"], [(GOLD_HOUR_COLUMN, "=", hour)]).column("window_start")
        )
        if newest is not None:
            return newest
    return None


def range_conditions(table: DeltaTable, shown: ChartRange) -> list[Condition]:
    """Rows of windows starting in `shown`; on gold's hourly layout also its hours, which is what keeps
    delta-rs from opening any other hour's files."""
    conditions: list[Condition] = [("window_start", ">=", shown.start), ("window_start", "<", shown.end)]
    if _partitioned(table):
        conditions += [
            (GOLD_HOUR_COLUMN, ">=", window_hour(shown.start)),
            (GOLD_HOUR_COLUMN, "<=", window_hour(shown.last_start)),
        ]
    return conditions


def store_windows(table: DeltaTable, shown: ChartRange, location_id: str) -> list[dict[str, Any]]:
    """The store's windows (every order type) starting in `shown`, as gold holds them."""
    where = [*range_conditions(table, shown), ("location_id", "=", location_id)]
    rows: list[dict[str, Any]] = read_delta(table, GOLD_WINDOW_COLUMNS, where).to_pylist()
    return rows


def order_type_sums(table: DeltaTable, shown: ChartRange) -> list[tuple[str, int, Decimal, int]]:
    """(order_type, orders, revenue, windows) of every store's windows starting in `shown`: exact (revenue
    is summed as a decimal), one row per order type."""
    rows = read_delta(table, ["order_type", "order_count", "revenue"], range_conditions(table, shown))
    sums = rows.group_by("order_type").aggregate(
        [("order_count", "sum"), ("revenue", "sum"), ("order_count", "count")]
    )
    return [
        (row["order_type"], int(row["order_count_sum"]), row["revenue_sum"], int(row["order_count_count"]))
        for row in sums.to_pylist()
    ]


def stores_in_range(table: DeltaTable, shown: ChartRange) -> list[tuple[str, str | None]]:
    """(location_id, city of its newest window) of every store with a window starting in `shown`, by id."""
    import pyarrow.compute as pc

    rows = read_delta(table, ["location_id", "city", "window_start"], range_conditions(table, shown))
    # use_threads=False keeps the sort order, so "first" is the newest window's city (null included).
    newest_first = rows.sort_by([("window_start", "descending")])
    stores = newest_first.group_by("location_id", use_threads=False).aggregate(
        [("city", "first", pc.ScalarAggregateOptions(skip_nulls=False))]
    )
    return sorted((row["location_id"], row["city_first"]) for row in stores.to_pylist())
