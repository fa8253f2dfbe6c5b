"""Reading gold without Spark: a table not written yet, column selection, filters."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from revenue_platform.gold_table import arrow_type, gold_arrow_schema, open_gold, read_gold
from spark_apps.contract.records import GOLD_COLUMNS, GOLD_WINDOW_COLUMNS

START = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)


def _row(location_id: str, revenue: str) -> dict[str, object]:
    return {
        "location_id": location_id,
        "order_type": "GENERAL",
        "window_start": START,
        "window_end": START,
        "order_count": 1,
        "revenue": Decimal(revenue),
        "batch_id": 0,
    }


def test_a_table_not_written_yet_reads_as_no_rows_in_the_contract(tmp_path: Path) -> None:
    missing = str(tmp_path / "gold" / "blue")
    assert open_gold(missing) is None
    assert read_gold(missing).schema == gold_arrow_schema(GOLD_COLUMNS)
    assert read_gold(missing, GOLD_WINDOW_COLUMNS).num_rows == 0


def test_rows_are_read_as_stored_with_the_columns_and_filters_asked_for(tmp_path: Path) -> None:
    path = str(tmp_path / "gold" / "blue")
    schema = gold_arrow_schema(GOLD_COLUMNS)
    write_deltalake(
        path, pa.Table.from_pylist([_row("store_1", "1.50"), _row("store_2", "2.00")], schema=schema)
    )

    table = read_gold(path, ["location_id", "revenue"], [("location_id", "=", "store_2")])

    assert table.to_pylist() == [{"location_id": "store_2", "revenue": Decimal("2.00")}]
    assert read_gold(path).num_rows == 2


def test_a_delta_type_outside_the_contract_is_refused() -> None:
    assert arrow_type("decimal(18,2)") == pa.decimal128(18, 2)
    with pytest.raises(ValueError, match="no Arrow type"):
        arrow_type("double")
