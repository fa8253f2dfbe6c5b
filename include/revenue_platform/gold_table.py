"""Reading a deployment's gold table without Spark: the Arrow view of the gold contract.

The control plane (serving, the operations view, quality, blue-green diffs, the demo, the
benchmark) reads gold with deltalake, never with Spark. It reads it here: `open_gold` for the
table itself (version, history), `read_gold` for its rows, and `gold_arrow_schema` for the Arrow
types of the contract in `spark_apps.contract.records`. A table the app has not written yet is not an
error here; each caller decides what "no gold yet" means for it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from spark_apps.contract.records import (
    GOLD_COLUMNS,
    GOLD_DELTA_TYPES,
    LONG,
    SERVED_GOLD_COLUMNS,
    STRING,
    TIMESTAMP,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable

_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")
# A Delta filter in deltalake's DNF form: (column, operator, value).
Filter = tuple[str, str, Any]


def arrow_type(delta_type: str) -> pa.DataType:
    """Arrow's type for a Delta type name of the gold contract; ValueError for any other."""
    import pyarrow as pa

    if delta_type == STRING:
        return pa.string()
    if delta_type == TIMESTAMP:
        # Delta timestamps are instants; readers get them as microseconds in UTC.
        return pa.timestamp("us", tz="UTC")
    if delta_type == LONG:
        return pa.int64()
    decimal = _DECIMAL.fullmatch(delta_type)
    if decimal is None:
        raise ValueError(f"no Arrow type for the Delta type {delta_type!r}")
    return pa.decimal128(int(decimal[1]), int(decimal[2]))


def gold_arrow_schema(columns: Sequence[str] = SERVED_GOLD_COLUMNS) -> pa.Schema:
    """Arrow schema of the given gold columns (default: what readers serve), in that order."""
    import pyarrow as pa

    return pa.schema([(name, arrow_type(GOLD_DELTA_TYPES[name])) for name in columns])


def open_gold(table_path: str, storage_options: dict[str, str] | None = None) -> DeltaTable | None:
    """The gold Delta table at `table_path`; None if the app has not written it yet."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return DeltaTable(table_path, storage_options=storage_options)
    except TableNotFoundError:
        return None


def read_gold(
    table_path: str,
    columns: Sequence[str] | None = None,
    filters: list[Filter] | None = None,
    storage_options: dict[str, str] | None = None,
) -> pa.Table:
    """The gold rows matching `filters`, as stored: `columns` only (None: every column the table has).

    No rows (in the contract's Arrow schema) if the app has not written the table yet.
    """
    import pyarrow.parquet as pq

    table = open_gold(table_path, storage_options)
    if table is None:
        return gold_arrow_schema(GOLD_COLUMNS if columns is None else columns).empty_table()
    # Files a delta-rs MERGE rewrote (the streaming app's driver writes gold so) store strings as
    # Arrow string views, which pyarrow's dataset filters cannot compare with a string literal
    # ("no kernel matching (string, string_view)"). So: read, make the strings plain, then filter.
    needed = None if columns is None else list(dict.fromkeys([*columns, *(f[0] for f in filters or [])]))
    data = plain_strings(table.to_pyarrow_table(columns=needed))
    if filters:
        data = data.filter(pq.filters_to_expression(filters))
    return data if columns is None else data.select(list(columns))


def plain_strings(data: pa.Table) -> pa.Table:
    """`data` with every string-view column cast to a plain string column (same values)."""
    import pyarrow as pa

    fields = [
        pa.field(field.name, pa.string(), field.nullable) if field.type == pa.string_view() else field
        for field in data.schema
    ]
    return data.cast(pa.schema(fields)) if fields != list(data.schema) else data
