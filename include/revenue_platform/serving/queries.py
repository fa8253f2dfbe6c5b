"""The seed's interactive queries as Arrow compute over a gold snapshot (no Spark, no Python loops over rows).

* totals (`/v1/orders/count`, `/v1/orders/revenue`): per (location, order type), order_count and
  revenue summed over every window of the live deployment's gold — the seed's running totals;
  the store shown is the one the location's most recent window was enriched with.
* windows (`/v1/orders/windows/...`): one row per gold window whose `window_start` lies in
  [from_time, to_time), ordered by (window_start, location_id, order_type) so pages are stable.

Revenue stays `decimal128` in Arrow and `Decimal` in Python: sums are exact to the cent.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from revenue_platform.serving.models import (
    Address,
    OrderCountPerStore,
    OrderCountPerWindow,
    RevenuePerStore,
    RevenuePerWindow,
    Store,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from revenue_platform.serving.gold import GoldSnapshot
    from revenue_platform.serving.params import Page, TimeRange

STORE_COLUMNS: tuple[str, ...] = ("address_line1", "address_line2", "city", "state", "zip", "contact_num")
_TOTAL_ORDER = [("location_id", "ascending"), ("order_type", "ascending")]
_WINDOW_ORDER = [("window_start", "ascending"), ("location_id", "ascending"), ("order_type", "ascending")]


def totals_per_store(gold: pa.Table) -> pa.Table:
    """location_id, order_type, order_count, revenue (sums) and the latest window's store columns."""
    import pyarrow.compute as pc

    sums = gold.group_by(["location_id", "order_type"]).aggregate(
        [("order_count", "sum"), ("revenue", "sum")]
    )
    sums = sums.rename_columns({"order_count_sum": "order_count", "revenue_sum": "revenue"})
    # The most recent window per location carries the address the store had last; use_threads=False
    # keeps the sort order, so "first" is the newest window (ties broken by order type).
    newest_first = gold.sort_by([("window_start", "descending"), ("order_type", "ascending")])
    keep_nulls = pc.ScalarAggregateOptions(skip_nulls=False)
    stores = newest_first.group_by("location_id", use_threads=False).aggregate(
        [(column, "first", keep_nulls) for column in STORE_COLUMNS]
    )
    stores = stores.rename_columns({f"{column}_first": column for column in STORE_COLUMNS})
    return sums.join(stores, keys="location_id", join_type="left outer").sort_by(_TOTAL_ORDER)


def _store(row: dict[str, Any]) -> Store | None:
    if all(row.get(column) is None for column in STORE_COLUMNS):
        return None  # the store was unknown to the app when the window was computed
    return Store(
        location_id=row["location_id"],
        address=Address(**{column: row.get(column) for column in STORE_COLUMNS[:-1]}),
        contact_num=row.get("contact_num"),
    )


def _select(table: pa.Table, order_type: str | None, location_id: str | None) -> pa.Table:
    import pyarrow.compute as pc

    if order_type is not None:
        table = table.filter(pc.equal(table["order_type"], order_type))
    if location_id is not None:
        table = table.filter(pc.equal(table["location_id"], location_id))
    return table


def has_location(snapshot: GoldSnapshot, location_id: str) -> bool:
    """True when the location has any window (of any order type) in the snapshot."""
    rows: int = _select(snapshot.totals, None, location_id).num_rows
    return rows > 0


def order_counts(
    snapshot: GoldSnapshot, order_type: str | None = None, location_id: str | None = None
) -> list[OrderCountPerStore]:
    rows = _select(snapshot.totals, order_type, location_id).to_pylist()
    return [
        OrderCountPerStore(
            location_id=r["location_id"], order_type=r["order_type"], order_count=r["order_count"]
        )
        for r in rows
    ]


def revenues(
    snapshot: GoldSnapshot, order_type: str | None = None, location_id: str | None = None
) -> list[RevenuePerStore]:
    rows = _select(snapshot.totals, order_type, location_id).to_pylist()
    return [
        RevenuePerStore(
            location_id=r["location_id"],
            order_type=r["order_type"],
            order_count=r["order_count"],
            revenue=r["revenue"] if r["revenue"] is not None else Decimal(0),
            store=_store(r),
        )
        for r in rows
    ]


@dataclass(frozen=True)
class WindowSlice:
    """One page of windows and how many there are over all pages."""

    rows: list[dict[str, Any]]
    total: int


def windows(snapshot: GoldSnapshot, order_type: str | None, time_range: TimeRange, page: Page) -> WindowSlice:
    """Gold rows with window_start in [start, end), stably ordered, sliced to the page."""
    import pyarrow as pa
    import pyarrow.compute as pc

    table = _select(snapshot.table, order_type, None)
    start_type = table.schema.field("window_start").type
    in_range = pc.and_(
        pc.greater_equal(table["window_start"], pa.scalar(time_range.start, start_type)),
        pc.less(table["window_start"], pa.scalar(time_range.end, start_type)),
    )
    selected = table.filter(in_range).sort_by(_WINDOW_ORDER)
    return WindowSlice(selected.slice(page.offset, page.limit).to_pylist(), selected.num_rows)


def count_windows(rows: list[dict[str, Any]]) -> list[OrderCountPerWindow]:
    # The rows' names are the model's; the columns it does not have (revenue) are ignored.
    return [OrderCountPerWindow.model_validate(r) for r in rows]


def revenue_windows(rows: list[dict[str, Any]]) -> list[RevenuePerWindow]:
    return [
        RevenuePerWindow(
            location_id=r["location_id"],
            order_type=r["order_type"],
            window_start=r["window_start"],
            window_end=r["window_end"],
            order_count=r["order_count"],
            revenue=r["revenue"] if r["revenue"] is not None else Decimal(0),
            store=_store(r),
        )
        for r in rows
    ]
