"""Reading a Delta table without Spark, the same way on a local disk and on an object store.

Every Python reader of the lake (the registry, serving, quality, blue-green, the driver's lease and
topic checks) reads here: `open_delta` for the table (None when nothing was written there yet) and
`read_delta` for its rows, through delta-rs's own query engine (DataFusion SQL). Not through
`DeltaTable.to_pyarrow_table()`: on an `s3://` table that reads through delta-rs's Python filesystem
handler, whose threads abort the process at exit in about half the runs (docs/object-store.md).
A filter becomes SQL text made by code only: column names must be plain identifiers, and each value
is rendered from its Python type (a string as the hex of its UTF-8 bytes, an instant as its epoch
microseconds), so no value a user typed is ever parsed as SQL. A data file that cannot be read
(truncated, overwritten or deleted behind Delta's back) is reported as UnreadableDeltaFileError,
naming the table, the file and the way back, not as delta-rs's bare `Exception`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from spark_apps.contract.object_store import delta_rs_uri

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable

Condition = tuple[str, str, Any]
"""(column, operator, value): `=`, `!=`, `<`, `<=`, `>`, `>=`, `in` / `not in` with a sequence, or
`is null` with None."""

_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_COMPARISONS: Final = frozenset({"=", "!=", "<", "<=", ">", ">="})
_MEMBERSHIP: Final = {"in": "IN", "not in": "NOT IN"}
# Control-plane tables are small: one partition reads them in file order, on one core.
_SESSION: Final = {"datafusion.execution.target_partitions": "1"}
# How delta-rs's engine words a data file it could not read (it raises a bare Exception); the file is
# named when its footer or the file itself was missing, not when a page inside it was damaged.
_DATA_FILE_ERROR: Final = re.compile(r"Parquet error|Parquet argument error|Object Store error")
_NAMED_FILE: Final = re.compile(r"for file (\S+?): ")
# Enough to act on; finding them means reading each local data file whole.
_MAX_FILES_NAMED: Final = 3


class UnreadableDeltaFileError(RuntimeError):
    """A data file of a Delta table's current version cannot be read: truncated, damaged or missing."""


@dataclass(frozen=True)
class AnyOf:
    """Rows matching at least one of `conditions` (the others in a `where` must hold too)."""

    conditions: tuple[Condition, ...]


def open_delta(path: str, storage_options: Mapping[str, str] | None = None) -> DeltaTable | None:
    """The Delta table at `path` (a folder, or an `s3a://` / `s3://` URL with the store's
    `storage_options`); None if no table was written there yet."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return DeltaTable(delta_rs_uri(path), storage_options=dict(storage_options or {}) or None)
    except TableNotFoundError:
        return None


def read_delta(
    table: DeltaTable, columns: Sequence[str] | None = None, where: Sequence[Condition | AnyOf] = ()
) -> pa.Table:
    """The rows of `table`'s current snapshot matching every condition of `where`, `columns` only
    (None: all), strings and bytes as plain Arrow strings and binaries."""
    import pyarrow as pa
    from deltalake import QueryBuilder

    selected = "*" if columns is None else ", ".join(_identifier(column) for column in columns)
    sql = f"SELECT {selected} FROM snapshot"
    if where:
        sql += " WHERE " + " AND ".join(_condition(c) for c in where)
    try:
        rows = QueryBuilder(_SESSION).register("snapshot", table).execute(sql).read_all()
    except Exception as error:  # delta-rs raises a bare Exception for whatever its engine met
        if not _DATA_FILE_ERROR.search(str(error)):
            raise
        raise unreadable_file_error(table, str(error)) from error
    return without_views(pa.table(rows))  # arro3 -> pyarrow through the Arrow C data interface


def unreadable_file_error(table: DeltaTable, detail: str) -> UnreadableDeltaFileError:
    """What to tell about `table` whose read failed with delta-rs's `detail` on a data file: which
    table and file, and how to get back to a readable version."""
    named = _NAMED_FILE.search(detail)
    files = [named.group(1)] if named else _unreadable_local_files(table)
    which = ", ".join(files) if files else "one of its data files"
    uri = table.table_uri
    return UnreadableDeltaFileError(
        f"the Delta table {uri} cannot be read at version {table.version()}: {which} is truncated, "
        f"damaged or missing ({detail}). Delta never rewrites a data file, so it was changed behind "
        "Delta's back (a full disk, a partial copy, a hand edit or deletion). Bring the table back to "
        "the last version that does not hold that file with Delta's RESTORE (DeltaTable(uri, "
        "version=<n>).file_uris() lists a version's files, .history() the versions): "
        f"DeltaTable({uri!r}).restore(<version>), or Spark SQL RESTORE TABLE delta.`{uri}` TO VERSION "
        "AS OF <version>. A deployment's gold can instead be rebuilt from its bronze by the "
        "reprocess_revenue DAG over the hours it covers."
    )


def _unreadable_local_files(table: DeltaTable) -> list[str]:
    """Data files of `table` (a local one) that pyarrow cannot read whole; [] on an object store."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    found: list[str] = []
    for uri in table.file_uris():
        if "://" in uri and not uri.startswith("file://"):
            return []
        try:
            pq.read_table(uri.removeprefix("file://"))
        except (OSError, pa.ArrowException):
            found.append(uri)
            if len(found) == _MAX_FILES_NAMED:
                break
    return found


def without_views(data: pa.Table) -> pa.Table:
    """`data` with every string- or binary-view column (DataFusion's and delta-rs MERGE's choice) as a
    plain string or binary column, also inside lists: the same values, in the types pyarrow's kernels
    and pandas all accept."""
    import pyarrow as pa

    def plain(data_type: pa.DataType) -> pa.DataType:
        if data_type == pa.string_view():
            return pa.string()
        if data_type == pa.binary_view():
            return pa.binary()
        if pa.types.is_list(data_type):
            return pa.list_(plain(data_type.value_type))
        return data_type

    schema = pa.schema([field.with_type(plain(field.type)) for field in data.schema])
    return data.cast(schema) if schema != data.schema else data


def _identifier(column: str) -> str:
    if not _IDENTIFIER.fullmatch(column):
        raise ValueError(f"{column!r} is not a column name")
    return f'"{column}"'


def _condition(condition: Condition | AnyOf) -> str:
    if isinstance(condition, AnyOf):
        if not condition.conditions:
            raise ValueError("AnyOf needs at least one condition")
        return "(" + " OR ".join(_condition(c) for c in condition.conditions) + ")"
    column, operator, value = condition
    if operator in _COMPARISONS:
        return f"{_identifier(column)} {operator} {sql_literal(value)}"
    if operator in _MEMBERSHIP and isinstance(value, (list, tuple, set, frozenset)):
        if not value:  # `x IN ()` is no SQL; an empty set matches nothing, its complement everything
            return "FALSE" if operator == "in" else "TRUE"
        values = ", ".join(sql_literal(v) for v in sorted(value))
        return f"{_identifier(column)} {_MEMBERSHIP[operator]} ({values})"
    if operator == "is null" and value is None:
        return f"{_identifier(column)} IS NULL"
    raise ValueError(f"unsupported filter {column!r} {operator!r} {value!r}")


def sql_literal(value: object) -> str:
    """A SQL literal of `value` written by code from its type, whatever the value holds."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, str):
        return f"CAST(X'{value.encode().hex()}' AS VARCHAR)"
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError(f"{value!r} has no time zone: compare instants, e.g. datetime(..., tzinfo=UTC)")
        micros = (value - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
        return f"arrow_cast({micros}, 'Timestamp(Microsecond, Some(\"UTC\"))')"
    if isinstance(value, date):
        return f"CAST('{value.isoformat()}' AS DATE)"  # digits and dashes only
    raise TypeError(f"no SQL literal for a {type(value).__name__} ({value!r})")
