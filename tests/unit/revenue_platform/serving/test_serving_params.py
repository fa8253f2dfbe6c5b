"""Pure rules of the revenue query API: order types, time ranges, pages, money, and totals over Arrow."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pyarrow as pa
import pytest

from revenue_platform.gold_table import gold_arrow_schema
from revenue_platform.serving.gold import GoldSnapshot
from revenue_platform.serving.params import (
    BadRequestError,
    ServingLimits,
    format_money,
    parse_order_type,
    parse_page,
    parse_time_range,
    parse_timestamp,
)
from revenue_platform.serving.queries import order_counts, revenues
from spark_apps.contract.records import GOLD_COLUMNS, GOLD_DELTA_TYPES, SERVED_GOLD_COLUMNS
from spark_apps.validation.schemas import ENRICHED_REVENUE_SCHEMA, GOLD_SCHEMA

LIMITS = ServingLimits(max_range=timedelta(hours=6), default_page_size=10, max_page_size=50)


@pytest.mark.parametrize(
    ("path_name", "gold"), [("general_orders", "GENERAL"), ("restaurant_orders", "RESTAURANT")]
)
def test_seed_order_type_names_map_to_gold_values(path_name: str, gold: str) -> None:
    assert parse_order_type(path_name) == gold


@pytest.mark.parametrize("path_name", ["GENERAL", "general", "online_orders", ""])
def test_unknown_order_type_is_404_naming_the_valid_ones(path_name: str) -> None:
    with pytest.raises(BadRequestError) as caught:
        parse_order_type(path_name)
    assert caught.value.status_code == 404
    assert "general_orders or restaurant_orders" in caught.value.message


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("2026-11-22T09:00:00Z", datetime(2026, 11, 22, 9, tzinfo=UTC)),
        ("2026-11-22T09:00:00", datetime(2026, 11, 22, 9, tzinfo=UTC)),  # no zone means UTC
        ("2026-11-22T10:30:00+01:00", datetime(2026, 11, 22, 9, 30, tzinfo=UTC)),
        ("2026-11-22", datetime(2026, 11, 22, tzinfo=UTC)),
    ],
)
def test_timestamps_are_read_as_utc(raw: str, expected: datetime) -> None:
    assert parse_timestamp(raw, "from_time") == expected


@pytest.mark.parametrize("raw", ["yesterday", "2026-13-01T00:00:00", "2026-11-22T25:00:00", "1700000000"])
def test_malformed_timestamp_is_400_with_an_example(raw: str) -> None:
    with pytest.raises(BadRequestError) as caught:
        parse_timestamp(raw, "from_time")
    assert caught.value.status_code == 400
    assert "from_time" in caught.value.message
    assert "2026-11-22T09:00:00Z" in caught.value.message


def test_plus_sign_decoded_as_space_gets_a_hint() -> None:
    with pytest.raises(BadRequestError, match="%2B01:00"):
        parse_timestamp("2026-11-22T10:30:00 01:00", "to_time")


@pytest.mark.parametrize("missing", [None, "", "  "])
def test_missing_timestamp_is_400(missing: str | None) -> None:
    with pytest.raises(BadRequestError, match="to_time is required"):
        parse_timestamp(missing, "to_time")


def test_time_range_is_half_open_and_ordered() -> None:
    got = parse_time_range("2026-11-22T09:00:00Z", "2026-11-22T10:00:00Z", LIMITS)
    assert (got.start, got.end) == (
        datetime(2026, 11, 22, 9, tzinfo=UTC),
        datetime(2026, 11, 22, 10, tzinfo=UTC),
    )


@pytest.mark.parametrize(
    ("start", "end"),
    [("2026-11-22T10:00:00Z", "2026-11-22T09:00:00Z"), ("2026-11-22T09:00:00Z", "2026-11-22T09:00:00Z")],
)
def test_from_time_not_before_to_time_is_400(start: str, end: str) -> None:
    with pytest.raises(BadRequestError, match="must be before to_time"):
        parse_time_range(start, end, LIMITS)


def test_range_longer_than_the_limit_is_400() -> None:
    assert parse_time_range("2026-11-22T00:00:00Z", "2026-11-22T06:00:00Z", LIMITS)  # exactly the limit
    with pytest.raises(BadRequestError, match="more than the allowed 6:00:00"):
        parse_time_range("2026-11-22T00:00:00Z", "2026-11-22T06:00:01Z", LIMITS)


def test_page_defaults_and_bounds() -> None:
    assert parse_page(None, None, LIMITS).limit == 10
    assert parse_page(50, 7, LIMITS).offset == 7
    for bad_limit in (0, -1, 51):
        with pytest.raises(BadRequestError, match="limit must be between 1 and 50"):
            parse_page(bad_limit, 0, LIMITS)
    with pytest.raises(BadRequestError, match="offset must be 0 or more"):
        parse_page(10, -1, LIMITS)


def test_money_is_a_two_place_decimal_string_and_floats_are_refused() -> None:
    assert format_money(Decimal("108")) == "108.00"
    assert format_money(Decimal("12345678901234567.89")) == "12345678901234567.89"
    assert format_money(None) == "0.00"
    with pytest.raises(TypeError):
        format_money(0.1)  # type: ignore[arg-type]


def test_spark_and_arrow_schemas_are_the_gold_contract() -> None:
    # Spark's JSON type names are Delta's (long, timestamp, decimal(38,2)).
    assert {f.name: f.dataType.jsonValue() for f in GOLD_SCHEMA.fields} == GOLD_DELTA_TYPES
    assert tuple(GOLD_SCHEMA.fieldNames()) == GOLD_COLUMNS
    # Readers are served the enriched windows; the app's batch_id bookkeeping is not served.
    assert tuple(ENRICHED_REVENUE_SCHEMA.fieldNames()) == SERVED_GOLD_COLUMNS
    assert gold_arrow_schema().names == list(SERVED_GOLD_COLUMNS)
    assert gold_arrow_schema(GOLD_COLUMNS).field("batch_id").type == pa.int64()


def _gold(rows: list[dict[str, object]]) -> GoldSnapshot:
    table = pa.Table.from_pylist(rows, schema=gold_arrow_schema())
    return GoldSnapshot("blue", "/lake/gold/revenue_windows/blue", 3, table)


def _row(
    location: str, order_type: str, minute: int, count: int, revenue: str, city: str | None
) -> dict[str, object]:
    start = datetime(2026, 11, 22, 9, minute, tzinfo=UTC)
    store = {
        "address_line1": f"{location} street",
        "address_line2": "",
        "city": city,
        "state": "S",
        "zip": "1",
    }
    return {
        "location_id": location,
        "order_type": order_type,
        "window_start": start,
        "window_end": start + timedelta(minutes=1),
        "order_count": count,
        "revenue": Decimal(revenue),
        **(store if city else {}),
        "contact_num": "555" if city else None,
    }


def test_totals_sum_windows_exactly_and_take_the_newest_address() -> None:
    gold = _gold(
        [
            _row("store_1", "GENERAL", 0, 2, "0.10", "Old Town"),
            _row("store_1", "GENERAL", 5, 1, "0.20", "New Town"),  # newest window: its address wins
            _row("store_1", "RESTAURANT", 1, 3, "99999999999999.99", "Old Town"),
            _row("store_2", "GENERAL", 2, 1, "1.01", None),  # unknown store: no address
        ]
    )
    counts = {(c.location_id, c.order_type): c.order_count for c in order_counts(gold)}
    assert counts == {("store_1", "GENERAL"): 3, ("store_1", "RESTAURANT"): 3, ("store_2", "GENERAL"): 1}
    by_key = {(r.location_id, r.order_type): r for r in revenues(gold)}
    general = by_key["store_1", "GENERAL"]
    assert general.model_dump(mode="json")["revenue"] == "0.30"
    assert general.store is not None
    assert general.store.address.city == "New Town"
    assert by_key["store_1", "RESTAURANT"].model_dump(mode="json")["revenue"] == "99999999999999.99"
    assert by_key["store_1", "RESTAURANT"].store == general.store
    assert by_key["store_2", "GENERAL"].store is None
    only = revenues(gold, "GENERAL", "store_2")
    assert [(r.location_id, r.order_count) for r in only] == [("store_2", 1)]


def test_totals_of_an_empty_gold_table_are_empty() -> None:
    assert order_counts(_gold([])) == []
    assert revenues(_gold([])) == []
