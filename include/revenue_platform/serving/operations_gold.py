"""What the operations view reads of a deployment's gold: the chart's range, never gold's history.

A refresh of the page reads, per deployment:

* where gold ends (`newest_window_start`): from the Delta log's file statistics (no data file read);
  a table without them reads its newest hour (`window_hour`, gold's partition column), or, in the
  layout before hours, the one column of its window starts;
* the chosen store's windows of the range (`store_windows`): the range's hours only (partition
  pruning), at most `ChartRange.windows` windows per order type;
* the totals of every store over the range (`order_type_sums`) and the stores in it
  (`stores_in_range`): summed and grouped by delta-rs's engine over the range's hours, so what comes
  back is one row per order type or store, not the rows it read.

So what a refresh costs grows with the range shown (`MAX_CHART_WINDOWS` windows at most) and the
stores in it, not with how long the deployment has run. Filters are SQL text made by code: fixed
column names and values rendered by `delta_reads.sql_literal`, never text a user typed.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final

from spark_apps.contract.delta_reads import Condition, read_delta, sql_literal, unreadable_file_error
from spark_apps.contract.gold_layout import GOLD_HOUR_COLUMN, window_hour
from spark_apps.contract.records import GOLD_WINDOW_COLUMNS

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable

    from revenue_platform.serving.operations_chart import ChartRange

# delta_reads' session: gold's files read in order on one core (the view shares the API server).
_SESSION: Final = {"datafusion.execution.target_partitions": "1"}
# How delta-rs words a data file it could not read (`delta_reads.read_delta` reports it the same way).
_DATA_FILE_ERRORS: Final = ("Parquet error", "Parquet argument error", "Object Store error")
_COLUMNS: Final = frozenset({*GOLD_WINDOW_COLUMNS, GOLD_HOUR_COLUMN, "city"})


def _partitioned(table: DeltaTable) -> bool:
    return GOLD_HOUR_COLUMN in table.metadata().partition_columns


def _add_actions(table: DeltaTable) -> pa.Table:
    import pyarrow as pa

    return pa.table(table.get_add_actions(flatten=True))


def _utc(moment: datetime | None) -> datetime | None:
    return None if moment is None else moment.astimezone(UTC)


def _query(table: DeltaTable, sql: str) -> pa.Table:
    """`sql` over the table's current snapshot (`snapshot` in the text), run as `delta_reads.read_delta`
    runs its own."""
    import pyarrow as pa
    from deltalake import QueryBuilder

    from spark_apps.contract.delta_reads import without_views

    try:
        rows = QueryBuilder(_SESSION).register("snapshot", table).execute(sql).read_all()
    except Exception as error:  # delta-rs raises a bare Exception for whatever its engine met
        if not any(words in str(error) for words in _DATA_FILE_ERRORS):
            raise
        raise unreadable_file_error(table, str(error)) from error
    return without_views(pa.table(rows))


def _where(conditions: list[Condition]) -> str:
    """Conditions on gold's own columns as SQL, each value a literal rendered from its Python type."""
    parts = []
    for column, operator, value in conditions:
        if column not in _COLUMNS or operator not in ("=", "<", "<=", ">", ">="):
            raise ValueError(f"no gold filter {column!r} {operator!r}")
        parts.append(f'"{column}" {operator} {sql_literal(value)}')
    return " WHERE " + " AND ".join(parts) if parts else ""


def newest_window_start(table: DeltaTable) -> datetime | None:
    """The start of gold's newest window; None when gold has no window yet."""
    actions = _add_actions(table)
    if actions.num_rows == 0:
        return None
    statistic = "max.window_start"
    if statistic in actions.column_names and actions.column(statistic).null_count == 0:
        import pyarrow.compute as pc

        return _utc(pc.max(actions.column(statistic)).as_py())
    newest = 'SELECT MAX("window_start") AS newest FROM snapshot'
    if not _partitioned(table):
        return _utc(_query(table, newest).column("newest")[0].as_py())
    # Hours sort as text; the newest hour holding a window start holds the newest one.
    hours = sorted(
        {h for h in actions.column(f"partition.{GOLD_HOUR_COLUMN}").to_pylist() if h}, reverse=True
    )
    for hour in hours:
        found = _query(table, newest + _where([(GOLD_HOUR_COLUMN, "=", hour)])).column("newest")[0].as_py()
        if found is not None:
            return _utc(found)
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
    """(order_type, orders, revenue, windows) of every store's windows starting in `shown`, summed by the
    engine: exact (revenue stays a decimal), one row per order type."""
    sql = (
        'SELECT "order_type", SUM("order_count") AS orders, SUM("revenue") AS revenue, COUNT(*) AS windows '
        f'FROM snapshot{_where(range_conditions(table, shown))} GROUP BY "order_type"'
    )
    return [
        (row["order_type"], int(row["orders"] or 0), row["revenue"] or Decimal("0.00"), int(row["windows"]))
        for row in _query(table, sql).to_pylist()
    ]


def stores_in_range(table: DeltaTable, shown: ChartRange) -> list[tuple[str, str | None]]:
    """(location_id, city of its newest window) of every store with a window starting in `shown`, by id."""
    sql = (
        'SELECT "location_id", first_value("city" ORDER BY "window_start" DESC) AS city '
        f'FROM snapshot{_where(range_conditions(table, shown))} GROUP BY "location_id"'
    )
    return sorted((row["location_id"], row["city"]) for row in _query(table, sql).to_pylist())
