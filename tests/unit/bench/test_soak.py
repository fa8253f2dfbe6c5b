"""The soak's reading of the app's side files and of gold, through the platform's names and reader."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

from bench.soak import cents_off, gold, progress
from revenue_platform.gold_table import gold_arrow_schema
from spark_apps.contract.naming import REVENUE_QUERY_ROLE, DeploymentNames, local_path


def test_progress_reads_the_query_s_progress_file_by_its_name(tmp_path: Path) -> None:
    names = DeploymentNames(f"file:{tmp_path}", "soakabc")
    assert progress(names) == "batch -"
    revenue = local_path(names.progress_file(REVENUE_QUERY_ROLE))
    revenue.parent.mkdir(parents=True)
    revenue.write_text(json.dumps({"batch_id": 7}))
    assert progress(names) == "batch 7"


def test_gold_is_empty_before_the_app_wrote_it_and_keyed_by_window_after(tmp_path: Path) -> None:
    table = str(tmp_path / "gold")
    assert gold(table) == {}
    columns = ["location_id", "order_type", "window_start", "revenue"]
    start = datetime(2026, 11, 22, 9, 0, 15, tzinfo=UTC)
    rows = pa.table(
        {
            "location_id": ["store_1"],
            "order_type": ["general"],
            "window_start": [start],
            "revenue": [Decimal("12.50")],
        },
        schema=gold_arrow_schema(columns),
    )
    write_deltalake(table, rows)
    assert gold(table) == {("store_1", "general", start.replace(tzinfo=None)): Decimal("12.50")}


def test_cents_off_tells_lost_from_doubled_revenue() -> None:
    expected = {"a": Decimal("1.00"), "b": Decimal("2.00")}
    assert cents_off(expected, {"a": Decimal("0.50"), "b": Decimal("2.25")}) == (50, 25)
