"""The Python side's one Delta reader: filters pushed into delta-rs's SQL, values never as SQL text."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from spark_apps.contract.delta_reads import (
    AnyOf,
    UnreadableDeltaFileError,
    open_delta,
    read_delta,
    sql_literal,
    without_views,
)

T0 = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
SCHEMA = pa.schema(
    [
        ("deployment_id", pa.string()),
        ("from_value", pa.string()),
        ("at", pa.timestamp("us", tz="UTC")),
        ("epoch", pa.int64()),
        ("live", pa.bool_()),
        ("keys", pa.list_(pa.string())),
    ]
)
ROWS = [
    {"deployment_id": "blue", "from_value": None, "at": T0, "epoch": 1, "live": True, "keys": ["a"]},
    {
        "deployment_id": "green",
        "from_value": "blue",
        "at": T0 + timedelta(seconds=1),
        "epoch": 2,
        "live": False,
    },
    {
        "deployment_id": "o'neil; drop",
        "from_value": None,
        "at": T0 + timedelta(hours=1),
        "epoch": 3,
        "live": False,
    },
]


@pytest.fixture
def table(tmp_path: Path) -> DeltaTable:
    write_deltalake(str(tmp_path / "t"), pa.Table.from_pylist(ROWS, schema=SCHEMA))
    opened = open_delta(str(tmp_path / "t"))
    assert opened is not None
    return opened


def _ids(data: pa.Table) -> list[str]:
    return [str(v) for v in data.column("deployment_id").to_pylist()]


def test_a_table_not_written_yet_opens_as_none(tmp_path: Path) -> None:
    assert open_delta(str(tmp_path / "never")) is None


def test_rows_and_columns_come_back_as_stored_with_views_made_plain(table: DeltaTable) -> None:
    everything = read_delta(table)
    assert everything.to_pylist() == [{**row, "keys": row.get("keys")} for row in ROWS]
    assert everything.schema == SCHEMA
    assert read_delta(table, ["epoch", "deployment_id"]).column_names == ["epoch", "deployment_id"]


@pytest.mark.parametrize(
    ("where", "ids"),
    [
        ([("deployment_id", "=", "green")], ["green"]),
        ([("deployment_id", "=", "o'neil; drop")], ["o'neil; drop"]),
        ([("deployment_id", "=", "x' OR '1'='1")], []),
        ([("deployment_id", "in", ["blue", "x' OR TRUE --"])], ["blue"]),
        ([("deployment_id", "in", [])], []),
        ([("deployment_id", "not in", [])], ["blue", "green", "o'neil; drop"]),
        ([AnyOf((("deployment_id", "in", ["blue"]), ("from_value", "in", ["blue"])))], ["blue", "green"]),
        ([("at", ">", T0), ("at", "<", T0 + timedelta(minutes=1))], ["green"]),
        ([("epoch", ">=", 2), ("live", "=", False)], ["green", "o'neil; drop"]),
        ([("from_value", "is null", None)], ["blue", "o'neil; drop"]),
        ([AnyOf((("from_value", "is null", None), ("epoch", "=", 2)))], ["blue", "green", "o'neil; drop"]),
    ],
)
def test_filters_run_in_the_query_with_values_rendered_by_code(
    table: DeltaTable, where: list[object], ids: list[str]
) -> None:
    assert _ids(read_delta(table, ["deployment_id"], where)) == ids  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("column", "operator", "value", "error"),
    [
        ('deployment_id" OR 1=1 --', "=", "x", ValueError),
        ("deployment_id", "LIKE", "%", ValueError),
        ("at", "<", datetime(2026, 11, 22, 9, 0), ValueError),
        ("epoch", "=", 1.5, TypeError),
        ("from_value", "is null", "blue", ValueError),
    ],
)
def test_what_code_cannot_render_safely_is_refused(
    table: DeltaTable, column: str, operator: str, value: object, error: type[Exception]
) -> None:
    with pytest.raises(error):
        read_delta(table, None, [(column, operator, value)])


def test_a_string_literal_holds_no_character_of_its_value() -> None:
    assert sql_literal("a'b") == "CAST(X'612762' AS VARCHAR)"
    assert sql_literal(T0) == "arrow_cast(1795338000000000, 'Timestamp(Microsecond, Some(\"UTC\"))')"
    assert sql_literal(T0.date()) == "CAST('2026-11-22' AS DATE)"


def test_string_views_become_without_views_also_inside_lists() -> None:
    views = pa.table(
        {
            "s": pa.array(["a"], pa.string_view()),
            "l": pa.array([["b"]], pa.list_(pa.string_view())),
            "b": pa.array([b"c"], pa.binary_view()),
            "n": pa.array([1], pa.int64()),
        }
    )
    assert without_views(views).schema == pa.schema(
        [("s", pa.string()), ("l", pa.list_(pa.string())), ("b", pa.binary()), ("n", pa.int64())]
    )


def _damage(path: Path, how: str) -> None:
    if how == "truncated":
        with path.open("r+b") as data:
            data.truncate(path.stat().st_size // 2)
    elif how == "deleted":
        path.unlink()
    else:  # a page overwritten, footer intact: delta-rs's error names no file
        with path.open("r+b") as data:
            data.seek(8)
            data.write(b"\xff" * 200)


@pytest.mark.parametrize("how", ["truncated", "deleted", "damaged inside"])
def test_a_damaged_data_file_is_named_with_its_table_and_the_way_back(tmp_path: Path, how: str) -> None:
    path = str(tmp_path / "gold")
    first = pa.table({"window_start": list(range(500)), "revenue": [str(i) for i in range(500)]})
    write_deltalake(path, first)
    write_deltalake(path, first, mode="append")
    table = DeltaTable(path)
    [added] = [uri for uri in table.file_uris() if uri not in DeltaTable(path, version=0).file_uris()]
    _damage(Path(added.removeprefix("file://")), how)

    with pytest.raises(UnreadableDeltaFileError) as unreadable:
        read_delta(DeltaTable(path))
    message = str(unreadable.value)
    assert f"the Delta table {table.table_uri} cannot be read at version 1" in message
    assert Path(added).name in message
    assert "RESTORE TABLE delta." in message
    assert "reprocess_revenue" in message
    # The way back it names works: the version before the damaged file was written reads again.
    DeltaTable(path).restore(0)
    assert read_delta(DeltaTable(path)).num_rows == 500
