"""Read the gold and bronze Delta tables with delta-rs into pandas, and parse bronze orders without Spark.

The tables are read where the lake is, a local folder or its object store (`lake_storage`).

The reconciliation is only worth something if the bronze side is computed independently of the
Spark transformations it checks, so order values are parsed here with Python's `json` (numbers as
`Decimal`, never float) and `datetime`, not taken from Spark's parsed columns. Only the app's
validity verdict (`dlq_reason` is null) is taken from bronze.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pandas as pd

from revenue_platform.gold_table import open_gold
from revenue_platform.lake_storage import open_lake_table
from revenue_platform.quality.errors import QualityInputMissing
from spark_apps.contract.delta_reads import AnyOf, Condition, read_delta
from spark_apps.contract.gold_layout import GOLD_HOUR_COLUMN, window_hour
from spark_apps.contract.records import ARRIVAL_ORDER

# Bronze columns the checks need; `key` and the raw Spark-parsed order columns are not read.
BRONZE_COLUMNS = [
    "value",
    "topic",
    "partition",
    "offset",
    "timestamp",
    "dlq_reason",
    "ingest_batch_id",
    "ingest_date",
]
# Columns of `parse_bronze_orders`' result.
PARSED_ORDER_COLUMNS = [
    "order_id",
    "location_id",
    "order_type",
    "final_amount",
    "ordered_at",
    "parse_error",
]


@dataclass(frozen=True)
class GoldTable:
    """The gold table's rows and its Delta schema (column name -> Delta type such as `decimal(18,2)`)."""

    rows: pd.DataFrame
    schema: dict[str, str]


def _open(path: str, what: str) -> Any:
    table = open_lake_table(path)
    if table is None:
        raise _missing(what, path)
    return table


def _missing(what: str, path: str) -> QualityInputMissing:
    return QualityInputMissing(
        f"{what} table not found at {path}: check deployment_id and lake_root, "
        "or wait until the streaming app has written its first batch"
    )


def _delta_type_name(data_type: Any) -> str:
    # Primitive types carry their name in `.type` ("decimal(18,2)", "timestamp"); nested ones do not.
    return str(getattr(data_type, "type", data_type))


def load_gold(path: str, windows_from: datetime, windows_to: datetime) -> GoldTable:
    """The gold rows of windows starting in [`windows_from`, `windows_to`) and those without a start
    (the checks' own finding), plus gold's schema: the contract's view, without the layout's partition
    column (`spark_apps.contract.gold_layout`), which is how gold is stored.

    Only the hours holding those windows are read (partition pruning on `window_hour`; a few rows of
    the first and last hour outside the range come along), so what a check loads is bounded by its
    interval, on day 30 as on day 1: the whole table was loaded before (issue 57). A gold table in the
    layout before hours is filtered by the window start instead.
    """
    table = open_gold(path)
    if table is None:
        raise _missing("gold revenue", path)
    contract = [field for field in table.schema().fields if field.name != GOLD_HOUR_COLUMN]
    fields = [field.name for field in contract]
    schema = {field.name: _delta_type_name(field.type) for field in contract}
    if GOLD_HOUR_COLUMN in table.metadata().partition_columns:
        # A window's hour is its start's hour.
        where = _between_or_null(GOLD_HOUR_COLUMN, window_hour(windows_from), "<=", window_hour(windows_to))
    else:
        where = _between_or_null("window_start", windows_from, "<", windows_to)
    return GoldTable(rows=read_delta(table, fields, where).to_pandas(), schema=schema)


def newest_window_end_at_or_before(path: str, bound: datetime) -> datetime | None:
    """The end of gold's newest window that ends at or before `bound` (None: no such window). The hours
    at or before `bound`'s are read newest first until one holds such a window: all windows have one
    size, so an hour's windows end before a newer hour's do, and every window that started a window
    size before `bound` has ended: at most the hours a window size spans, plus two, are read, however
    long the history. The freshness check asks for it when its interval holds no closed window.
    """
    table = open_gold(path)
    if table is None:
        raise _missing("gold revenue", path)
    ended = ("window_end", "<=", bound)
    if GOLD_HOUR_COLUMN not in table.metadata().partition_columns:
        return _newest_end(read_delta(table, ["window_end"], [ended]))
    last_hour = window_hour(bound)
    hours = sorted(
        {hour for hour in _partition_values(table, GOLD_HOUR_COLUMN) if hour and hour <= last_hour},
        reverse=True,
    )
    for hour in hours:
        newest = _newest_end(read_delta(table, ["window_end"], [(GOLD_HOUR_COLUMN, "=", hour), ended]))
        if newest is not None:
            return newest
    return None


def _between_or_null(column: str, first: Any, last_operator: str, last: Any) -> list[Condition | AnyOf]:
    """`first <= column <last_operator> last`, or `column` null (as two ORs: `read_delta` ANDs a list)."""
    null: Condition = (column, "is null", None)
    return [AnyOf(((column, ">=", first), null)), AnyOf(((column, last_operator, last), null))]


def _partition_values(table: Any, column: str) -> set[str | None]:
    """The values of partition column `column` among the snapshot's files (from the log, no data read)."""
    import pyarrow as pa

    actions = pa.table(table.get_add_actions(flatten=True))
    return set(actions.column(f"partition.{column}").to_pylist())


def _newest_end(ends: Any) -> datetime | None:
    import pyarrow.compute as pc

    newest = pc.max(ends.column("window_end")).as_py()
    return None if newest is None else newest.astimezone(UTC)


def load_bronze(path: str, since: datetime) -> pd.DataFrame:
    """Bronze records whose ingest date (Kafka timestamp's date) is on or after `since`'s date."""
    table = _open(path, "bronze orders")
    present = {field.name for field in table.schema().fields}
    if "ingest_date" not in present:  # no ingest date: no record is known to be recent enough
        return pd.DataFrame(columns=BRONZE_COLUMNS)
    # A partition column (the app's layout) prunes whole folders; any other column filters rows.
    since_date = [("ingest_date", ">=", since.astimezone(UTC).date())]
    frame: pd.DataFrame = read_delta(
        table, [c for c in BRONZE_COLUMNS if c in present], since_date
    ).to_pandas()
    for missing in (c for c in BRONZE_COLUMNS if c not in present):
        frame[missing] = None  # a table written before the column existed
    return frame.reset_index(drop=True)


def _parse_ordered_at(text: str) -> datetime:
    # The producers' format is a zone-less ISO date-time read as UTC; a zone suffix is invalid upstream.
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is not None:
        raise ValueError(f"orderedDateTime {text!r} carries a zone")
    return parsed.replace(tzinfo=UTC)


# How deep Spark's JSON parser (Jackson: StreamReadConstraints.maxNestingDepth) lets a value nest; a
# deeper one is invalid_json, so a bronze-valid order nests at most this deep.
SPARK_JSON_MAX_DEPTH = 1000


@contextmanager
def _room_to_nest(depth: int) -> Generator[None]:
    """Let `json.loads` recurse `depth` levels deeper than the caller is: Python's json parser
    recurses once per level and stops at the interpreter's recursion limit (1000), so an order
    Spark accepted with an unknown field nested ~940 deep raised RecursionError here and failed
    every quality run over its hour."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(limit + depth)
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)


def parse_order_value(value: bytes | None) -> dict[str, Any]:
    """The fields revenue depends on, from one raw order value; `parse_error` says why it failed."""
    empty: dict[str, Any] = dict.fromkeys(PARSED_ORDER_COLUMNS)
    try:
        if not value:
            raise ValueError("empty value")
        # parse_float=Decimal keeps 19.99 exact; an integer literal stays int and converts exactly.
        with _room_to_nest(SPARK_JSON_MAX_DEPTH):
            order = json.loads(bytes(value).decode("utf-8"), parse_float=Decimal)
        amount = order["finalAmount"]
        if isinstance(amount, bool) or not isinstance(amount, int | Decimal):
            raise TypeError(f"finalAmount {amount!r} is not a number")
        if Decimal(amount) != Decimal(amount).quantize(Decimal("0.01")):
            raise ValueError(f"finalAmount {amount!r} has more than 2 decimal places")
        return {
            "order_id": int(order["orderId"]),
            "location_id": str(order["locationId"]),
            "order_type": str(order["orderType"]),
            "final_amount": Decimal(amount).quantize(Decimal("0.01")),
            "ordered_at": _parse_ordered_at(order["orderedDateTime"]),
            "parse_error": None,
        }
    except (ValueError, TypeError, KeyError, AttributeError, UnicodeDecodeError, RecursionError) as error:
        return {**empty, "parse_error": f"{type(error).__name__}: {error}"}


def parse_bronze_orders(bronze: pd.DataFrame) -> pd.DataFrame:
    """Valid bronze records (dlq_reason null) with independently parsed order fields, in arrival order.

    Arrival order is the order of the platform's one dedupe rule (`spark_apps.contract.records.ARRIVAL_ORDER`:
    ingest batch, then Kafka timestamp, partition, offset; `frames.repeat_flags` applies the rule).
    Rows the independent parser rejects keep `parse_error`.
    """
    valid = bronze[bronze["dlq_reason"].isna()]
    valid = valid.sort_values(list(ARRIVAL_ORDER), kind="stable", na_position="last").reset_index(drop=True)
    parsed = pd.DataFrame(
        [parse_order_value(value) for value in valid["value"]], columns=PARSED_ORDER_COLUMNS
    )
    parsed["ordered_at"] = pd.to_datetime(parsed["ordered_at"], utc=True)
    parsed["order_id"] = parsed["order_id"].astype("Int64")
    lineage = valid[["topic", "partition", "offset", "timestamp"]].reset_index(drop=True)
    return pd.concat([lineage, parsed], axis=1)


def bronze_since(
    interval_start: datetime, size_seconds: int, watermark_seconds: int, lookback: int, horizon: int
) -> datetime:
    """Earliest ingest time worth reading: the first checked window's start, minus the lookback and the
    dedupe horizon (the copy before each read copy is read too)."""
    return interval_start - timedelta(seconds=watermark_seconds + size_seconds + lookback + horizon)
