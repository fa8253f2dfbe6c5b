"""The operations view's chart and totals read the range they show, not gold's history, and the totals are
exact against the orders that made the windows.

Gold is a real Delta table in the app's hourly layout (`write_tables`), made of windows summed from
generated orders (`expected_windows`). Every hour the range does not need is damaged: a reader that
opened its files fails (`UnreadableDeltaFileError`), so an answer proves they were never read.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from fastapi.testclient import TestClient

from revenue_platform.orders_generator import (
    GeneratedRecord,
    GeneratorSettings,
    expected_windows,
    generate_orders,
)
from revenue_platform.registry import DeploymentRecord, DeploymentRegistry
from revenue_platform.serving import operations_gold
from revenue_platform.serving.auth import require_airflow_user
from revenue_platform.serving.operations_view import create_operations_app
from spark_apps.contract.gold_layout import GOLD_HOUR_COLUMN, window_hour
from spark_apps.contract.naming import DeploymentNames
from tests.quality_helpers import write_tables

WINDOW = timedelta(seconds=15)
FIRST_BURST = datetime(2026, 11, 22, 10, 0)
SECOND_BURST = FIRST_BURST + timedelta(minutes=40)  # 35 minutes after the first burst's last order
HISTORY_DAYS = 3
STORE = "store_1001"


def _orders() -> list[GeneratedRecord]:
    """Two demo-like bursts with duplicates and malformed records: 5 minutes, a 35-minute gap, 2 minutes."""
    first = GeneratorSettings(
        orders=400, stores=3, start=FIRST_BURST, span_seconds=300, seed=7, duplicate_every=25, bad_every=40
    )
    second = GeneratorSettings(
        orders=300,
        stores=3,
        start=SECOND_BURST,
        span_seconds=120,
        seed=8,
        duplicate_every=30,
        first_order_id=10_000,
    )
    return [*generate_orders(first), *generate_orders(second)]


def _gold_row(
    location_id: str, order_type: str, start: datetime, count: int, revenue: Decimal
) -> dict[str, Any]:
    return {
        "location_id": location_id,
        "order_type": order_type,
        "window_start": start.replace(tzinfo=UTC),
        "window_end": start.replace(tzinfo=UTC) + WINDOW,
        "order_count": count,
        "revenue": revenue,
        "address_line1": None,
        "address_line2": None,
        "city": f"City of {location_id}",
        "state": None,
        "zip": None,
        "contact_num": None,
        "batch_id": 1,
    }


def _history() -> list[dict[str, Any]]:
    """One window an hour for HISTORY_DAYS before the bursts' hour's previous hour, of a store long gone."""
    before = FIRST_BURST - timedelta(hours=1)
    return [
        _gold_row("store_old", "GENERAL", before - timedelta(hours=h, minutes=-7), 1, Decimal("1.00"))
        for h in range(1, 24 * HISTORY_DAYS + 1)
    ]


def _damage_hours_before(gold_table: str, first_kept: str) -> list[str]:
    damaged = []
    for partition in Path(gold_table).glob(f"{GOLD_HOUR_COLUMN}=*"):
        hour = partition.name.split("=", 1)[1]
        if hour >= first_kept:
            continue
        for data_file in partition.glob("*.parquet"):
            data_file.write_bytes(b"not parquet")
        damaged.append(hour)
    return damaged


def _expected(records: list[GeneratedRecord], location_id: str | None) -> dict[str, tuple[int, Decimal]]:
    """Orders and revenue per order type of the distinct valid orders (the first copy of each), by hand."""
    seen: set[int] = set()
    sums: dict[str, tuple[int, Decimal]] = {}
    for record in records:
        order = record.order
        if order is None or order["orderId"] in seen:
            continue
        seen.add(order["orderId"])
        if location_id is not None and order["locationId"] != location_id:
            continue
        count, revenue = sums.get(order["orderType"], (0, Decimal("0.00")))
        sums[order["orderType"]] = (count + 1, revenue + order["finalAmount"])
    return sums


@pytest.fixture
def lake(tmp_path: Path) -> str:
    root = str(tmp_path / "lake")
    registry = DeploymentRegistry(root)
    names = DeploymentNames(root, "blue")
    registry.register(
        DeploymentRecord("blue", lake_root=root, progress_dir=names.progress_dir, desired_state="running"),
        "tester",
    )
    registry.switch_live("blue", actor="tester", reason="first deployment")
    windows = expected_windows(_orders(), int(WINDOW.total_seconds()))
    gold = [
        _gold_row(loc, kind, start, w.order_count, w.revenue) for (loc, kind, start), w in windows.items()
    ]
    write_tables(root, "blue", gold + _history(), [])
    # The range (240 windows up to the second burst's last) starts at 09:42: hour 09's files are read,
    # every older hour is damaged.
    damaged = _damage_hours_before(
        names.gold_revenue_table, window_hour(FIRST_BURST.replace(tzinfo=UTC) - timedelta(hours=1))
    )
    assert len(damaged) >= 24 * HISTORY_DAYS - 1
    return root


def _get(lake: str, path: str, **params: Any) -> Any:
    app = create_operations_app(lake)
    app.dependency_overrides[require_airflow_user] = lambda: {"name": "tester"}
    with TestClient(app) as client:
        response = client.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def _totals_as_sent(totals: dict[str, Any]) -> dict[str, tuple[int, str]]:
    return {kind: (t["order_count"], t["revenue"]) for kind, t in totals["by_order_type"].items()}


def test_totals_are_exact_against_the_orders_and_read_only_the_range(lake: str) -> None:
    body = _get(lake, "/api/revenue", location_id=STORE)

    records = _orders()
    for sent, location_id in ((body["store_totals"], STORE), (body["all_stores_totals"], None)):
        expected = _expected(records, location_id)
        # Decimal strings, equal to the cent to the orders' own sum.
        assert _totals_as_sent(sent) == {
            kind: (count, str(revenue)) for kind, (count, revenue) in expected.items()
        }
        overall_revenue = sum((revenue for _, revenue in expected.values()), Decimal("0.00"))
        assert sent["overall"]["order_count"] == sum(count for count, _ in expected.values())
        assert sent["overall"]["revenue"] == str(overall_revenue)
    assert body["all_stores_totals"]["overall"]["order_count"] == 700, "each distinct order once"
    # What the chart draws is what the store's totals add up.
    assert sum(p["order_count"] for p in body["points"]) == body["store_totals"]["overall"]["order_count"]
    assert sum(Decimal(p["revenue"]) for p in body["points"]) == Decimal(
        body["store_totals"]["overall"]["revenue"]
    )


def test_the_range_ends_at_gold_s_newest_window_and_shows_the_gap(lake: str) -> None:
    body = _get(lake, "/api/revenue", location_id=STORE)

    newest = max(datetime.fromisoformat(p["window_start"]) for p in body["points"])
    assert datetime.fromisoformat(body["range_end"]) == newest + WINDOW
    assert datetime.fromisoformat(body["range_start"]) == newest + WINDOW - 240 * WINDOW
    assert (body["window_limit"], body["window_slide_s"]) == (240, 15.0)
    starts = sorted({datetime.fromisoformat(p["window_start"]) for p in body["points"]})
    x_of = {datetime.fromisoformat(p["window_start"]): p["x"] for p in body["points"]}
    # The largest step between two windows is the gap, and it takes its share of the axis in time.
    gap_after = max(range(len(starts) - 1), key=lambda i: starts[i + 1] - starts[i])
    gap = starts[gap_after + 1] - starts[gap_after]
    assert gap > timedelta(minutes=35)
    assert x_of[starts[gap_after + 1]] - x_of[starts[gap_after]] == pytest.approx(
        gap / (starts[-1] - starts[0])
    )
    assert body["axis_ticks"], "a time axis is labelled"
    assert all(0 <= tick["x"] <= 1 for tick in body["axis_ticks"])


def test_a_shorter_range_reads_fewer_hours_and_sums_only_its_windows(lake: str) -> None:
    # 40 windows (10 minutes) reach back into the second burst only: its hour is all that is read.
    names = DeploymentNames(lake, "blue")
    _damage_hours_before(names.gold_revenue_table, window_hour(SECOND_BURST.replace(tzinfo=UTC)))

    body = _get(lake, "/api/revenue", location_id=STORE, limit=40)

    assert datetime.fromisoformat(body["range_start"]) > SECOND_BURST.replace(tzinfo=UTC) - timedelta(
        minutes=9
    )
    assert body["all_stores_totals"]["overall"]["order_count"] == 300
    assert {p["window_start"] >= body["range_start"] for p in body["points"]} == {True}
    stores = _get(lake, "/api/stores", limit=40)["stores"]
    assert stores == [{"location_id": f"store_{n}", "city": f"City of store_{n}"} for n in (1001, 1002, 1003)]


def test_the_store_picker_lists_the_range_s_stores_not_history_s(lake: str) -> None:
    stores = _get(lake, "/api/stores")

    assert stores["deployment_id"] == "blue"
    assert [s["location_id"] for s in stores["stores"]] == ["store_1001", "store_1002", "store_1003"]


def test_without_file_statistics_the_newest_hour_says_where_gold_ends(
    lake: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table whose log has no statistics: the newest hour is read for its newest window, no other."""
    real = operations_gold._add_actions

    def without_statistics(table: Any) -> pa.Table:
        actions = real(table)
        return actions.select(
            [name for name in actions.column_names if not name.startswith(("min.", "max."))]
        )

    with_statistics = _get(lake, "/api/revenue", location_id=STORE)
    monkeypatch.setattr(operations_gold, "_add_actions", without_statistics)
    body = _get(lake, "/api/revenue", location_id=STORE)

    assert (body["range_start"], body["range_end"]) == (
        with_statistics["range_start"],
        with_statistics["range_end"],
    )
    assert body["all_stores_totals"] == with_statistics["all_stores_totals"]


def test_an_unregistered_deployment_is_a_404_naming_it(lake: str) -> None:
    app = create_operations_app(lake)
    app.dependency_overrides[require_airflow_user] = lambda: {"name": "tester"}
    with TestClient(app) as client:
        response = client.get("/api/revenue", params={"location_id": STORE, "deployment_id": "nobody"})
    assert response.status_code == 404
    assert "'nobody' is not registered" in response.json()["detail"]
