"""Reading a deployment's gold table without Spark: the Arrow view of the gold contract.

The control plane (serving, the operations view, quality, blue-green diffs, the demo, the
benchmark) reads gold with deltalake, never with Spark. It reads it here: `open_gold` for the
table itself (version, history), `read_gold` for its rows, and `gold_arrow_schema` for the Arrow
types of the contract in `spark_apps.contract.records`, on a local lake or on its object store alike
(`lake_storage`). A table the app has not written yet is not an error here; each caller decides what
"no gold yet" means for it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from revenue_platform.lake_storage import open_lake_table
from spark_apps.contract.delta_reads import Condition, read_delta
from spark_apps.contract.gold_layout import GOLD_HOUR_COLUMN
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
Filter = Condition
"""A filter on gold: (column, operator, value), pushed into the read (`delta_reads.Condition`)."""


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
    """The gold Delta table at `table_path` (local or on the lake's object store); None if the app has
    not written it yet."""
    return open_lake_table(table_path, storage_options)


def read_gold(
    table_path: str,
    columns: Sequence[str] | None = None,
    filters: list[Filter] | None = None,
    storage_options: dict[str, str] | None = None,
) -> pa.Table:
    """The gold rows matching every one of `filters`, as stored: `columns` only (None: every column the
    table has but the layout's `window_hour`), strings as plain strings.

    No rows (in the contract's Arrow schema) if the app has not written the table yet.
    """
    table = open_gold(table_path, storage_options)
    if table is None:
        return gold_arrow_schema(GOLD_COLUMNS if columns is None else columns).empty_table()
    if columns is None:
        # The layout's partition column is how gold is stored, not what it says (`gold_layout`).
        columns = [field.name for field in table.schema().fields if field.name != GOLD_HOUR_COLUMN]
    return read_delta(table, columns, filters or ())
