"""The revenue query API as users reach it: mounted by the real plugin on the real Airflow API server.

Gold tables are written by the streaming app's own writer (`spark_apps.storage.gold.merge_gold`, real
Spark + Delta) into a per-test lake; the live pointer is the real registry. Expected values are
computed here from the orders with Decimal, independently of gold and of the API, and compared
as strings, to the cent. Tokens come from the simple auth manager's `POST /auth/token`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from revenue_platform.registry import DeploymentRecord, DeploymentRegistry
from revenue_platform.serving.gold import clear_gold_cache
from spark_apps.contract.json_files import write_json_atomically
from spark_apps.contract.naming import DeploymentNames, local_path
from spark_apps.engine.observability import summarize_progress
from spark_apps.validation.schemas import ENRICHED_REVENUE_DDL

if TYPE_CHECKING:
    from fastapi.testclient import TestClient
    from pyspark.sql import SparkSession


pytestmark = pytest.mark.integration

WINDOW = timedelta(seconds=15)
T0 = datetime(2026, 11, 22, 9, 0, 0)  # naive = UTC (the test session's TZ is UTC)
ADDRESSES = {
    "store_1234": ("1234 Street 1", "", "City1", "State1", "12345", "1234567890"),
    "store_4567": ("4567 Street 2", "Suite 9", "City2", "State2", "45678", "4567890123"),
}
MOVED_4567 = ("7 New Road", "", "City3", "State3", "77777", "4567890123")


@dataclass(frozen=True)
class Order:
    location_id: str
    order_type: str
    ordered_at: datetime
    amount: Decimal


def _orders(scale: Decimal) -> list[Order]:
    """A small day of orders; `scale` makes a second deployment's answers differ."""
    raw = [
        ("store_1234", "GENERAL", 0, "27.00"),
        ("store_1234", "GENERAL", 3, "0.10"),
        ("store_1234", "GENERAL", 17, "0.20"),
        ("store_1234", "RESTAURANT", 5, "15.00"),
        ("store_1234", "RESTAURANT", 31, "9999999999999.99"),
        ("store_4567", "GENERAL", 2, "19.99"),
        ("store_4567", "GENERAL", 46, "0.01"),
        ("store_4567", "RESTAURANT", 16, "33.33"),
        ("store_9999", "GENERAL", 60, "5.55"),  # a store the app never saw: no address
    ]
    return [
        Order(loc, kind, T0 + timedelta(seconds=s), Decimal(amount) * scale) for loc, kind, s, amount in raw
    ]


def _window_start(moment: datetime) -> datetime:
    return T0 + WINDOW * ((moment - T0) // WINDOW)


def _gold_rows(orders: list[Order]) -> list[tuple[Any, ...]]:
    """Windowed gold rows as the streaming app writes them (counts, sums, address at window time)."""
    windows: dict[tuple[str, str, datetime], list[Order]] = defaultdict(list)
    for order in orders:
        windows[order.location_id, order.order_type, _window_start(order.ordered_at)].append(order)
    rows = []
    for (location, order_type, start), members in sorted(windows.items()):
        address: tuple[str | None, ...] = ADDRESSES.get(location, (None,) * 6)
        if location == "store_4567" and start >= T0 + timedelta(seconds=45):
            address = MOVED_4567  # the store moved: later windows carry the new address
        total = sum((m.amount for m in members), Decimal(0))
        rows.append((location, order_type, start, start + WINDOW, len(members), total, *address))
    return rows


def _expected_totals(orders: list[Order]) -> dict[tuple[str, str], tuple[int, str]]:
    counts: dict[tuple[str, str], int] = defaultdict(int)
    sums: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    for order in orders:
        counts[order.location_id, order.order_type] += 1
        sums[order.location_id, order.order_type] += order.amount
    return {key: (counts[key], f"{sums[key]:.2f}") for key in counts}


@dataclass
class Lake:
    root: Path
    registry: DeploymentRegistry

    def register(self, deployment_id: str) -> None:
        self.registry.register(
            DeploymentRecord(
                deployment_id=deployment_id, colour=deployment_id, app_version=f"{deployment_id}-1"
            ),
            actor="test",
        )

    def write_gold(self, spark: SparkSession, deployment_id: str, orders: list[Order]) -> None:
        from pyspark.sql import functions as F

        from spark_apps.storage.gold import ensure_gold_table, merge_gold

        frame = spark.createDataFrame(_gold_rows(orders), ENRICHED_REVENUE_DDL)
        gold = DeploymentNames(str(self.root), deployment_id).gold_revenue_table
        ensure_gold_table(spark, gold)
        merge_gold(frame.withColumn("batch_id", F.lit(0).cast("long")), gold)


BLUE_ORDERS, GREEN_ORDERS = _orders(Decimal(1)), _orders(Decimal(3))


@pytest.fixture(scope="module")
def spark_lake(tmp_path_factory: pytest.TempPathFactory, spark: SparkSession) -> Lake:
    """blue and green registered, each with gold written by the streaming app's MERGE (once per module)."""
    root = tmp_path_factory.mktemp("spark-gold") / "lake"
    lake = Lake(root, DeploymentRegistry(str(root)))
    for deployment_id, orders in (("blue", BLUE_ORDERS), ("green", GREEN_ORDERS)):
        lake.register(deployment_id)
        lake.write_gold(spark, deployment_id, orders)
    return lake


@pytest.fixture
def live_blue(spark_lake: Lake, monkeypatch: pytest.MonkeyPatch) -> Lake:
    """The Spark-written lake served, with blue live (whatever an earlier test switched to)."""
    monkeypatch.setenv("PLATFORM_LAKE_ROOT", str(spark_lake.root))
    spark_lake.registry.switch_live("blue", actor="test", reason="test starts from blue")
    return spark_lake


@pytest.fixture
def lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Lake:
    monkeypatch.setenv("PLATFORM_LAKE_ROOT", str(tmp_path / "lake"))
    clear_gold_cache()
    return Lake(tmp_path / "lake", DeploymentRegistry(str(tmp_path / "lake")))


def _get(client: TestClient, auth: dict[str, str], path: str, **params: Any) -> Any:
    response = client.get(f"/revenue{path}", headers=auth, params=params)
    assert response.status_code == 200, response.text
    return response.json()


ALL_ROUTES = [
    "/v1/orders/count/general_orders",
    "/v1/orders/count",
    "/v1/orders/revenue/restaurant_orders?location_id=store_1234",
    "/v1/orders/revenue",
    "/v1/orders/windows/count/general_orders?from_time=2026-11-22T09:00:00Z&to_time=2026-11-22T10:00:00Z",
    "/v1/orders/windows/count?from_time=2026-11-22T09:00:00Z&to_time=2026-11-22T10:00:00Z",
    "/v1/orders/windows/revenue/general_orders?from_time=2026-11-22T09:00:00Z&to_time=2026-11-22T10:00:00Z",
    "/v1/metadata/all",
]


@pytest.mark.parametrize("route", ALL_ROUTES)
def test_every_route_refuses_anonymous_and_forged_tokens(
    airflow_api: TestClient, lake: Lake, route: str
) -> None:
    anonymous = airflow_api.get(f"/revenue{route}")
    assert anonymous.status_code == 401
    assert anonymous.json() == {"detail": "Not authenticated"}
    forged = airflow_api.get(f"/revenue{route}", headers={"Authorization": "Bearer not.a.jwt"})
    assert forged.status_code in (401, 403)
    # Auth runs before the handler: not even the "nothing is live" answer leaks.
    assert "live" not in forged.text


def test_ui_cookie_token_is_accepted(airflow_api: TestClient, auth: dict[str, str], lake: Lake) -> None:
    token = auth["Authorization"].removeprefix("Bearer ")
    airflow_api.cookies.set("_token", token)  # what the browser sends after logging in to the UI
    try:
        response = airflow_api.get("/revenue/v1/metadata/all")
    finally:
        airflow_api.cookies.clear()
    assert response.status_code == 200, response.text


def test_openapi_schema_is_served_and_money_is_a_string(airflow_api: TestClient) -> None:
    response = airflow_api.get("/revenue/openapi.json")
    assert response.status_code == 200
    schema = response.json()
    assert {path for path in schema["paths"]} >= {
        route.split("?")[0]
        .replace("general_orders", "{order_type}")
        .replace("restaurant_orders", "{order_type}")
        for route in ALL_ROUTES
    }
    revenue = schema["components"]["schemas"]["RevenuePerStore"]["properties"]["revenue"]
    assert revenue["type"] == "string"
    assert "AirflowJWT" in schema["components"]["securitySchemes"]


def test_no_live_deployment_is_503_saying_what_to_run(
    airflow_api: TestClient, auth: dict[str, str], lake: Lake
) -> None:
    lake.register("blue")  # registered, never made live
    response = airflow_api.get("/revenue/v1/orders/count", headers=auth)
    assert response.status_code == 503
    assert "deploy_streaming_app" in response.json()["detail"]
    assert "make demo" in response.json()["detail"]
    metadata = _get(airflow_api, auth, "/v1/metadata/all")
    assert metadata["live_deployment_id"] is None
    assert [d["deployment_id"] for d in metadata["deployments"]] == ["blue"]


def test_live_deployment_without_output_answers_empty(
    airflow_api: TestClient, auth: dict[str, str], lake: Lake
) -> None:
    lake.register("blue")
    lake.registry.switch_live("blue", actor="test", reason="first release")
    assert _get(airflow_api, auth, "/v1/orders/count") == []
    assert _get(airflow_api, auth, "/v1/orders/revenue") == []
    page = _get(
        airflow_api,
        auth,
        "/v1/orders/windows/count",
        from_time="2026-11-22T09:00:00Z",
        to_time="2026-11-22T10:00:00Z",
    )
    assert (page["items"], page["total"], page["table_version"], page["next_offset"]) == ([], 0, None, None)
    unknown = airflow_api.get("/revenue/v1/orders/count/general_orders?location_id=store_1234", headers=auth)
    assert unknown.status_code == 404


def test_totals_to_the_cent_and_the_live_switch_changes_the_answers(
    airflow_api: TestClient, auth: dict[str, str], live_blue: Lake
) -> None:
    blue_orders, green_orders = BLUE_ORDERS, GREEN_ORDERS

    def answers() -> dict[tuple[str, str], tuple[int, str]]:
        counts = {
            (c["location_id"], c["order_type"]): c["order_count"]
            for c in _get(airflow_api, auth, "/v1/orders/count")
        }
        revenue = _get(airflow_api, auth, "/v1/orders/revenue")
        assert {(r["location_id"], r["order_type"]): r["order_count"] for r in revenue} == counts
        return {(r["location_id"], r["order_type"]): (r["order_count"], r["revenue"]) for r in revenue}

    blue_expected = _expected_totals(blue_orders)
    assert answers() == blue_expected
    assert blue_expected["store_1234", "RESTAURANT"] == (2, "10000000000014.99")  # no float on the way

    # The seed's per-type queries, for one store and for all stores.
    one = _get(airflow_api, auth, "/v1/orders/count/general_orders", location_id="store_1234")
    assert one == [{"location_id": "store_1234", "order_type": "GENERAL", "order_count": 3}]
    every = _get(airflow_api, auth, "/v1/orders/count/restaurant_orders")
    assert [(c["location_id"], c["order_count"]) for c in every] == [("store_1234", 2), ("store_4567", 1)]
    none_of_that_type = _get(
        airflow_api, auth, "/v1/orders/count/restaurant_orders", location_id="store_9999"
    )
    assert none_of_that_type == [{"location_id": "store_9999", "order_type": "RESTAURANT", "order_count": 0}]

    # TotalRevenueWithAddress: the address of the store's newest window (store_4567 moved).
    [with_address] = _get(airflow_api, auth, "/v1/orders/revenue/general_orders", location_id="store_4567")
    assert with_address == {
        "location_id": "store_4567",
        "order_type": "GENERAL",
        "order_count": 2,
        "revenue": "20.00",
        "store": {
            "location_id": "store_4567",
            "address": {
                "address_line1": "7 New Road",
                "address_line2": "",
                "city": "City3",
                "state": "State3",
                "zip": "77777",
            },
            "contact_num": "4567890123",
        },
    }
    [unknown_store] = _get(airflow_api, auth, "/v1/orders/revenue/general_orders", location_id="store_9999")
    assert (unknown_store["revenue"], unknown_store["store"]) == ("5.55", None)

    # The live switch is the only thing that changes: same URLs, green's gold.
    assert live_blue.registry.switch_live("green", actor="test", reason="blue-green release") == "blue"
    green_expected = _expected_totals(green_orders)
    assert green_expected != blue_expected
    assert answers() == green_expected
    assert (
        _get(airflow_api, auth, "/v1/orders/count/general_orders", location_id="store_1234")[0]["order_count"]
        == 3
    )
    [green_4567] = _get(airflow_api, auth, "/v1/orders/revenue/general_orders", location_id="store_4567")
    assert green_4567["revenue"] == "60.00"


def test_a_new_gold_version_is_seen_by_the_next_request(
    airflow_api: TestClient, auth: dict[str, str], lake: Lake
) -> None:
    """Snapshots are cached per Delta version: a new micro-batch must not be hidden by the cache."""
    lake.register("blue")
    lake.registry.switch_live("blue", actor="test", reason="first release")
    table = DeploymentNames(str(lake.root), "blue").gold_revenue_table
    rows = _gold_rows(BLUE_ORDERS)
    _append_gold(table, rows[:1])
    first = _get(airflow_api, auth, "/v1/orders/revenue")
    assert _get(airflow_api, auth, "/v1/orders/revenue") == first  # served from the cache
    _append_gold(table, rows[1:])
    assert _get(airflow_api, auth, "/v1/orders/revenue") != first
    totals = {
        (r["location_id"], r["order_type"]): (r["order_count"], r["revenue"])
        for r in _get(airflow_api, auth, "/v1/orders/revenue")
    }
    assert totals == _expected_totals(BLUE_ORDERS)


def _append_gold(table_path: str, rows: list[tuple[Any, ...]]) -> None:
    """Append gold rows with deltalake (fast; used where the writer does not matter)."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from revenue_platform.gold_table import gold_arrow_schema

    schema = gold_arrow_schema()
    records = []
    for row in rows:
        record = dict(zip(schema.names, row, strict=True))
        record["window_start"] = record["window_start"].replace(tzinfo=UTC)
        record["window_end"] = record["window_end"].replace(tzinfo=UTC)
        records.append(record)
    write_deltalake(table_path, pa.Table.from_pylist(records, schema=schema), mode="append")


def test_windows_are_half_open_paginated_and_priced_to_the_cent(
    airflow_api: TestClient, auth: dict[str, str], live_blue: Lake
) -> None:
    orders = BLUE_ORDERS

    expected = sorted(
        (
            (start, loc, kind, count, f"{total:.2f}")
            for loc, kind, start, _end, count, total, *_ in _gold_rows(orders)
            if kind == "GENERAL" and T0 <= start < T0 + timedelta(seconds=45)
        ),
    )
    params = {"from_time": "2026-11-22T09:00:00Z", "to_time": "2026-11-22T09:00:45"}  # 09:00:45 excluded
    first = _get(airflow_api, auth, "/v1/orders/windows/revenue/general_orders", limit=2, **params)
    assert (first["total"], first["limit"], first["offset"], first["next_offset"]) == (len(expected), 2, 0, 2)
    assert first["deployment_id"] == "blue"
    second = _get(airflow_api, auth, "/v1/orders/windows/revenue/general_orders", limit=2, offset=2, **params)
    assert second["next_offset"] is None
    got = [
        (
            datetime.fromisoformat(i["window_start"]).replace(tzinfo=None),
            i["location_id"],
            i["order_type"],
            i["order_count"],
            i["revenue"],
        )
        for i in first["items"] + second["items"]
    ]
    assert got == expected
    assert first["items"][0]["window_start"] == "2026-11-22T09:00:00Z"
    assert datetime.fromisoformat(first["items"][0]["window_end"]) == datetime(
        2026, 11, 22, 9, 0, 15, tzinfo=UTC
    )
    assert first["items"][0]["store"]["address"]["city"] == "City1"

    counts = _get(
        airflow_api,
        auth,
        "/v1/orders/windows/count",
        from_time="2026-11-22T09:00:00Z",
        to_time="2026-11-22T09:01:00Z",
        limit=100,
    )
    all_windows = [r for r in _gold_rows(orders) if r[2] < T0 + timedelta(minutes=1)]
    assert counts["total"] == len(all_windows)
    assert sum(i["order_count"] for i in counts["items"]) == sum(r[4] for r in all_windows)
    assert "revenue" not in counts["items"][0]
    typed = _get(airflow_api, auth, "/v1/orders/windows/count/restaurant_orders", **params)
    assert {i["order_type"] for i in typed["items"]} == {"RESTAURANT"}
    both = _get(airflow_api, auth, "/v1/orders/windows/revenue", **params)
    assert {i["order_type"] for i in both["items"]} == {"GENERAL", "RESTAURANT"}


BAD_REQUESTS = [
    ("/v1/orders/count/online_orders", 404, "unknown order type 'online_orders'"),
    ("/v1/orders/revenue/GENERAL", 404, "use general_orders or restaurant_orders"),
    (
        "/v1/orders/windows/count/pizza?from_time=2026-11-22T09:00:00Z&to_time=2026-11-22T10:00:00Z",
        404,
        "unknown order type",
    ),
    ("/v1/orders/count/general_orders?location_id=store_0000", 404, "location_id 'store_0000' has no orders"),
    ("/v1/orders/revenue/general_orders?location_id=store_0000", 404, "has no orders in the live deployment"),
    (
        "/v1/orders/windows/count?from_time=2026-11-22T10:00:00Z&to_time=2026-11-22T09:00:00Z",
        400,
        "must be before to_time",
    ),
    (
        "/v1/orders/windows/count/general_orders?from_time=yesterday&to_time=2026-11-22T09:00:00Z",
        400,
        "from_time='yesterday' is not an ISO date-time",
    ),
    (
        "/v1/orders/windows/revenue/general_orders?from_time=2026-11-22T09:00:00Z&to_time=2026-11-22T10:00:00+01:00",
        400,
        "%2B01:00",
    ),
    ("/v1/orders/windows/count?to_time=2026-11-22T09:00:00Z", 400, "from_time is required"),
    (
        "/v1/orders/windows/count?from_time=2026-10-01T00:00:00Z&to_time=2026-11-22T00:00:00Z",
        400,
        "more than the allowed 31 days",
    ),
    (
        "/v1/orders/windows/count?from_time=2026-11-22T09:00:00Z&to_time=2026-11-22T10:00:00Z&limit=1001",
        400,
        "limit must be between 1 and 1000",
    ),
    (
        "/v1/orders/windows/count?from_time=2026-11-22T09:00:00Z&to_time=2026-11-22T10:00:00Z&offset=-5",
        400,
        "offset must be 0 or more",
    ),
    (
        "/v1/orders/windows/count?from_time=2026-11-22T09:00:00Z&to_time=2026-11-22T10:00:00Z&limit=ten",
        422,
        "valid integer",
    ),
]


@pytest.fixture(scope="module")
def live_lake_for_bad_requests(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One live deployment with a little gold, shared by the bad-request cases (written without Spark:
    these cases must fail before gold matters; the Spark-written tables are covered above)."""
    root = tmp_path_factory.mktemp("bad-requests") / "lake"
    registry = DeploymentRegistry(str(root))
    registry.register(DeploymentRecord(deployment_id="blue", colour="blue"), actor="test")
    registry.switch_live("blue", actor="test", reason="test")
    _append_gold(DeploymentNames(str(root), "blue").gold_revenue_table, _gold_rows(BLUE_ORDERS)[:1])
    return root


@pytest.mark.parametrize(("url", "status", "message"), BAD_REQUESTS, ids=[b[0] for b in BAD_REQUESTS])
def test_every_bad_request_gets_its_4xx_with_a_message(
    airflow_api: TestClient,
    auth: dict[str, str],
    live_lake_for_bad_requests: Path,
    monkeypatch: pytest.MonkeyPatch,
    url: str,
    status: int,
    message: str,
) -> None:
    monkeypatch.setenv("PLATFORM_LAKE_ROOT", str(live_lake_for_bad_requests))
    response = airflow_api.get(f"/revenue{url}", headers=auth)
    assert response.status_code == status, response.text
    assert message in response.text


# Times that parse as text but not as a UTC moment, or not at all: each was a 500 (OverflowError from
# the UTC conversion) or must stay a 400 that names the parameter, whatever the route.
UNPARSEABLE_TIMES = [
    ("from_time", "0001-01-01T00:00:00+01:00"),  # in UTC: year 0
    ("from_time", "0001-01-01T00:59:59.999999+01:00"),
    ("to_time", "9999-12-31T23:59:59-01:00"),  # in UTC: year 10000
    ("to_time", "9999-12-31T23:00:00-23:59"),
    ("from_time", "99999999999999999999"),
    ("to_time", "9" * 4000),
    ("from_time", "2026-11-22T09:00:00\x00"),
    ("to_time", "\x00"),
    ("from_time", "2026-11-22T09:00:00+99:00"),
    ("from_time", "-2026-11-22T09:00:00Z"),
]
WINDOW_ROUTES = [
    "/v1/orders/windows/count",
    "/v1/orders/windows/count/general_orders",
    "/v1/orders/windows/revenue",
    "/v1/orders/windows/revenue/restaurant_orders",
]


@pytest.mark.parametrize(
    ("name", "value"), UNPARSEABLE_TIMES, ids=[repr(v)[:40] for _, v in UNPARSEABLE_TIMES]
)
def test_every_unusable_time_is_a_400_naming_the_parameter(
    airflow_api: TestClient,
    auth: dict[str, str],
    live_lake_for_bad_requests: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    value: str,
) -> None:
    monkeypatch.setenv("PLATFORM_LAKE_ROOT", str(live_lake_for_bad_requests))
    params = {"from_time": "2026-11-22T09:00:00Z", "to_time": "2026-11-22T10:00:00Z", name: value}
    for route in WINDOW_ROUTES:
        response = airflow_api.get(f"/revenue{route}", headers=auth, params=params)
        assert response.status_code == 400, (route, response.text)
        assert response.json()["detail"].startswith(f"{name}="), response.text


EDGE_OF_TIME = [
    # Representable in UTC, at the ends of what Python and Arrow hold: answered, empty.
    {"from_time": "0001-01-01T00:00:00Z", "to_time": "0001-01-02T00:00:00Z"},
    {"from_time": "0001-01-01T01:00:00+01:00", "to_time": "0001-01-01T02:00:00+01:00"},
    {"from_time": "9999-12-31T00:00:00Z", "to_time": "9999-12-31T23:59:59.999999Z"},
    {"from_time": "9999-12-31T00:00:00-00:30", "to_time": "9999-12-31T23:00:00-00:30"},
]


@pytest.mark.parametrize("params", EDGE_OF_TIME, ids=[p["from_time"] for p in EDGE_OF_TIME])
def test_ranges_at_the_ends_of_time_are_answered(
    airflow_api: TestClient,
    auth: dict[str, str],
    live_lake_for_bad_requests: Path,
    monkeypatch: pytest.MonkeyPatch,
    params: dict[str, str],
) -> None:
    monkeypatch.setenv("PLATFORM_LAKE_ROOT", str(live_lake_for_bad_requests))
    for route in WINDOW_ROUTES:
        page = _get(airflow_api, auth, route, **params)
        assert (page["items"], page["total"]) == ([], 0)


@pytest.mark.parametrize("limit", [str(10**30), str(2**63), "-" + "9" * 40])
def test_a_huge_limit_is_a_400_naming_it(
    airflow_api: TestClient,
    auth: dict[str, str],
    live_lake_for_bad_requests: Path,
    monkeypatch: pytest.MonkeyPatch,
    limit: str,
) -> None:
    monkeypatch.setenv("PLATFORM_LAKE_ROOT", str(live_lake_for_bad_requests))
    params = {"from_time": "2026-11-22T09:00:00Z", "to_time": "2026-11-22T10:00:00Z", "limit": limit}
    for route in WINDOW_ROUTES:
        response = airflow_api.get(f"/revenue{route}", headers=auth, params=params)
        assert response.status_code == 400, (route, response.text)
        assert response.json()["detail"].startswith("limit must be between 1 and 1000"), response.text


@pytest.mark.parametrize("offset", [str(10**30), str(2**63)])
def test_an_offset_past_the_end_is_an_empty_page(
    airflow_api: TestClient,
    auth: dict[str, str],
    live_lake_for_bad_requests: Path,
    monkeypatch: pytest.MonkeyPatch,
    offset: str,
) -> None:
    monkeypatch.setenv("PLATFORM_LAKE_ROOT", str(live_lake_for_bad_requests))
    for route in WINDOW_ROUTES:
        page = _get(
            airflow_api,
            auth,
            route,
            from_time="2026-11-22T09:00:00Z",
            to_time="2026-11-22T10:00:00Z",
            offset=offset,
        )
        assert (page["items"], page["next_offset"]) == ([], None)


def test_metadata_lists_deployments_live_pointer_and_lag(
    airflow_api: TestClient, auth: dict[str, str], lake: Lake
) -> None:
    lake.register("blue")
    lake.register("green")
    lake.registry.switch_live("green", actor="test", reason="release")
    names = DeploymentNames(str(lake.root), "green")
    progress = summarize_progress(
        {
            "name": names.query_name("revenue"),
            "batchId": 7,
            "timestamp": "2026-11-22T09:05:00.000Z",
            "sources": [{"metrics": {"maxOffsetsBehindLatest": "42"}, "endOffset": {"orders": {"0": 100}}}],
            "eventTime": {"watermark": "2026-11-22T09:04:00.000Z"},
        },
        {},
    )
    write_json_atomically(Path(names.progress_dir) / f"{names.query_name('revenue')}.json", progress)
    # The driver's heartbeat, newer than the last batch: an idle app is alive, not 21 minutes old.
    write_json_atomically(
        Path(names.driver_status_file),
        {"deployment_id": "green", "heartbeat_at": "2026-11-22T09:26:58+00:00"},
    )

    metadata = _get(airflow_api, auth, "/v1/metadata/all")
    assert metadata["live_deployment_id"] == "green"
    by_id = {d["deployment_id"]: d for d in metadata["deployments"]}
    assert set(by_id) == {"blue", "green"}
    assert (by_id["green"]["is_live"], by_id["blue"]["is_live"]) == (True, False)
    assert (by_id["green"]["colour"], by_id["green"]["app_version"]) == ("green", "green-1")
    assert by_id["green"]["gold_table"] == names.gold_revenue_table
    assert by_id["green"]["lag"]["offsets_behind_latest"] == 42
    assert by_id["green"]["lag"]["last_batch_at"] == "2026-11-22T09:05:00.000Z"
    assert by_id["green"]["lag"]["watermark"] == "2026-11-22T09:04:00.000Z"
    assert by_id["green"]["lag"]["heartbeat_at"] == "2026-11-22T09:26:58+00:00"
    assert by_id["green"]["lag"]["driver_status_file"] == names.driver_status_file
    assert by_id["blue"]["lag"] is None  # blue never published progress


def _token_for(role: str) -> dict[str, str]:
    """Headers with a real token, signed by the API server's auth manager, for a user with `role`
    (the local stack has only an admin login)."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    user = SimpleAuthManagerUser(username=f"a-{role.lower()}", role=role)
    return {"Authorization": f"Bearer {get_auth_manager().generate_jwt(user)}"}


def _strings(document: Any) -> list[str]:
    if isinstance(document, dict):
        return [s for value in document.values() for s in _strings(value)]
    if isinstance(document, list):
        return [s for value in document for s in _strings(value)]
    return [document] if isinstance(document, str) else []


def _publish_progress(names: DeploymentNames) -> None:
    progress = summarize_progress(
        {
            "name": names.query_name("revenue"),
            "batchId": 1,
            "timestamp": "2026-11-22T09:05:00.000Z",
            "sources": [{"metrics": {"maxOffsetsBehindLatest": "0"}, "endOffset": {"orders": {"0": 1}}}],
            "eventTime": {"watermark": "2026-11-22T09:04:00.000Z"},
        },
        {},
    )
    write_json_atomically(Path(names.progress_dir) / f"{names.query_name('revenue')}.json", progress)
    write_json_atomically(
        Path(names.driver_status_file), {"deployment_id": "blue", "heartbeat_at": "2026-11-22T09:06:00+00:00"}
    )


@pytest.mark.parametrize("role", ["VIEWER", "USER", "OP"])
def test_metadata_shows_no_server_path_to_anyone_but_an_admin(
    airflow_api: TestClient, auth: dict[str, str], lake: Lake, role: str
) -> None:
    lake.register("blue")
    lake.registry.switch_live("blue", actor="test", reason="release")
    names = DeploymentNames(str(lake.root), "blue")
    _publish_progress(names)

    metadata = _get(airflow_api, _token_for(role), "/v1/metadata/all")
    (blue,) = metadata["deployments"]
    assert blue["lag"]["offsets_behind_latest"] == 0  # the lag is shown, only the paths are not
    assert (blue["gold_table"], blue["lag"]["progress_file"], blue["lag"]["driver_status_file"]) == (
        None,
        None,
        None,
    )
    leaked = [s for s in _strings(metadata) if "/" in s or str(lake.root) in s]
    assert leaked == []

    # An admin (the auth fixture's login) sees where the files are.
    admin = _get(airflow_api, auth, "/v1/metadata/all")["deployments"][0]
    assert admin["gold_table"] == names.gold_revenue_table
    assert admin["lag"]["progress_file"] == str(local_path(names.progress_file("revenue")))


def test_no_answer_names_a_server_path(airflow_api: TestClient, lake: Lake) -> None:
    viewer = _token_for("VIEWER")
    lake.register("blue")  # registered, never made live: every gold route answers 503
    for route in ALL_ROUTES:
        response = airflow_api.get(f"/revenue{route}", headers=viewer)
        assert str(lake.root) not in response.text, (route, response.text)
