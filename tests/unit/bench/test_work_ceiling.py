"""The work-equivalent ceiling's work: validation, dedupe and cent sums per window, on hand-made records."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from bench import work_ceiling as work
from revenue_platform.orders_generator import (
    BAD_RECORD_KINDS,
    GeneratorSettings,
    expected_windows,
    generate_orders,
)
from spark_apps.contract.config import WindowConfig
from spark_apps.contract.records import OrderRules

RULES = OrderRules()
MAX_CENTS = int(RULES.max_order_amount * 100)
TUMBLING_15S = work.WindowGeometry(size_us=15_000_000, slide_us=15_000_000)
# Kafka timestamp of the hand-made records: an hour after their event times.
APPENDED_MS = int(datetime(2026, 11, 22, 10, 0, tzinfo=UTC).timestamp() * 1000)


def epoch_us(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()) * 1_000_000


class Raw(str):
    """JSON text written as is: money as a bare number with its exact digits, as producers write it."""


def order(**changes: Any) -> bytes:
    """A valid seed-format order, with fields changed (a Raw value is written verbatim) or dropped (None)."""
    fields: dict[str, Any] = {
        "orderId": 1,
        "locationId": "store_1001",
        "finalAmount": Raw("12.50"),
        "orderType": "GENERAL",
        "orderLineItems": [{"item": "Soap", "count": 1, "amount": 12.5}],
        "orderedDateTime": "2026-11-22T09:00:01",
    }
    fields.update(changes)
    raw = {name: value for name, value in fields.items() if isinstance(value, Raw)}
    placeholders = {name: f"@raw:{name}@" if name in raw else value for name, value in fields.items()}
    text = json.dumps({name: value for name, value in placeholders.items() if value is not None})
    for name, value in raw.items():
        text = text.replace(f'"@raw:{name}@"', value)
    return text.encode()


def check(value: bytes | None, appended_ms: int = APPENDED_MS) -> work.ValidOrder | str:
    return work.check_order(value, appended_ms, RULES, MAX_CENTS)


def test_a_valid_order_is_typed_with_integer_cents_and_utc_event_time() -> None:
    assert check(order()) == work.ValidOrder(
        1, "store_1001", "GENERAL", 1250, epoch_us("2026-11-22T09:00:01")
    )
    fraction = check(order(orderedDateTime="2026-11-22T09:00:01.25"))
    assert isinstance(fraction, work.ValidOrder)
    assert fraction.event_us == epoch_us("2026-11-22T09:00:01") + 250_000


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, "empty_value"),
        (b"", "empty_value"),
        (b'{"orderId": 1, "locationId": "\xff\xfe"}', "not_utf8"),
        (b'{"orderId": 1, "locationId": ', "invalid_json"),
        (b"[1, 2]", "invalid_json"),
        (order() + b" trailing", "invalid_json"),
        (order(locationId=None), "missing_field:locationId"),
        (order(locationId="  "), "missing_field:locationId"),
        (order(orderId=None, finalAmount=None), "missing_field:orderId"),
        (order(orderId="1"), "wrong_type:orderId"),
        (order(orderId=True), "wrong_type:orderId"),
        (order(orderId=2**63), "wrong_type:orderId"),
        (order(locationId=1001), "wrong_type:locationId"),
        (order(finalAmount=Raw("19.999")), "wrong_type:finalAmount"),
        (order(finalAmount="12.50"), "wrong_type:finalAmount"),
        (order(orderType=1), "wrong_type:orderType"),
        (order(orderedDateTime=20261122), "wrong_type:orderedDateTime"),
        (order().replace(b"12.50,", b"NaN,", 1), "non_finite_amount"),
        (order(orderType="WHOLESALE"), "unknown_order_type"),
        (order(finalAmount=Raw("-12.50")), "negative_amount"),
        (order(finalAmount=Raw("1000000.01")), "amount_too_large"),
        (order(orderedDateTime="05/12/2022 08:55"), "unparseable_timestamp"),
        (order(orderedDateTime="2026-11-22T09:00:01Z"), "unparseable_timestamp"),
        (order(orderedDateTime="2026-11-22 09:00:01"), "unparseable_timestamp"),
        (order(orderedDateTime="2026-02-30T09:00:01"), "unparseable_timestamp"),
        (order(orderedDateTime="2026-11-22T09:00:01.1234567"), "unparseable_timestamp"),
        (order(orderedDateTime="2099-01-01T00:00:00"), "event_time_in_future"),
    ],
)
def test_each_kind_of_invalid_record_has_the_apps_reason(value: bytes | None, reason: str) -> None:
    assert check(value) == reason


def test_event_time_may_lead_the_kafka_timestamp_by_the_allowed_skew_only() -> None:
    appended_ms = epoch_us("2026-11-22T09:00:01") // 1000
    skew_ms = RULES.max_future_skew_s * 1000
    assert isinstance(check(order(), appended_ms - skew_ms), work.ValidOrder)
    assert check(order(), appended_ms - skew_ms - 1) == "event_time_in_future"


def test_event_time_may_trail_the_kafka_timestamp_by_the_allowed_age_only() -> None:
    appended_ms = epoch_us("2026-11-22T09:00:01") // 1000
    age_ms = RULES.max_past_age_s * 1000
    assert isinstance(check(order(), appended_ms + age_ms), work.ValidOrder)
    assert check(order(), appended_ms + age_ms + 1) == "event_time_too_old"
    assert check(order(orderedDateTime="0001-01-01T00:00:00")) == "event_time_too_old"


@pytest.mark.parametrize(
    ("amount", "cents"),
    [(12, 1200), (Decimal("1.500"), 150), (Decimal("0.07"), 7), (Decimal("-3.1"), -310)],
)
def test_exact_money_in_cents(amount: object, cents: int) -> None:
    assert work.exact_cents(amount) == cents


@pytest.mark.parametrize(
    "amount",
    [Decimal("0.001"), Decimal("1.0000000000000000000000000001"), Decimal("1e16"), 10**16, True, 1.5, "1.50"],
)
def test_inexact_or_oversized_money_is_refused(amount: object) -> None:
    assert work.exact_cents(amount) is None


def test_tally_dedupes_sums_cents_per_window_and_splits_at_the_boundary() -> None:
    records = [
        order(orderId=1, finalAmount=Raw("10.00"), orderedDateTime="2026-11-22T09:00:00"),
        order(orderId=2, finalAmount=Raw("0.25"), orderedDateTime="2026-11-22T09:00:14.999999"),
        # A later copy of order 1 with another amount: the first copy wins.
        order(orderId=1, finalAmount=Raw("99.00"), orderedDateTime="2026-11-22T09:00:00"),
        order(orderId=3, finalAmount=Raw("1.00"), orderedDateTime="2026-11-22T09:00:15"),
        order(orderId=4, finalAmount=Raw("2.00"), orderType="RESTAURANT"),
        order(orderId=5, locationId="store_1002"),
        order(orderId=6, orderType="WHOLESALE"),
        b"",
    ]
    tally = work.tally_orders(((value, APPENDED_MS) for value in records), TUMBLING_15S, RULES)
    first_window = epoch_us("2026-11-22T09:00:00")
    second_window = epoch_us("2026-11-22T09:00:15")
    assert tally.windows == {
        ("store_1001", "GENERAL", first_window): (2, 1025),
        ("store_1001", "GENERAL", second_window): (1, 100),
        ("store_1001", "RESTAURANT", first_window): (1, 200),
        ("store_1002", "GENERAL", first_window): (1, 1250),
    }
    assert tally.summary() == {
        "records": 8,
        "valid": 6,
        "invalid": 2,
        "duplicates": 1,
        "orders_counted": 5,
        "invalid_by_reason": {"empty_value": 1, "unknown_order_type": 1},
        "windows": 4,
        "window_orders": 5,
        "total_cents": 2575,
    }


def test_an_invalid_copy_does_not_hide_the_valid_order_behind_it() -> None:
    records = [order(orderId=7, orderType="WHOLESALE"), order(orderId=7)]
    tally = work.tally_orders(((value, APPENDED_MS) for value in records), TUMBLING_15S, RULES)
    assert (tally.orders_counted, tally.duplicates, tally.invalid) == (1, 0, 1)


def test_window_geometry_from_the_config_tumbling_and_hopping() -> None:
    assert work.WindowGeometry.from_config(WindowConfig()) == TUMBLING_15S
    hopping = work.WindowGeometry.from_config(WindowConfig(size="15 seconds", slide="5 seconds"))
    assert hopping == work.WindowGeometry(15_000_000, 5_000_000)
    assert TUMBLING_15S.starts_us(29_999_999) == (15_000_000,)
    assert TUMBLING_15S.starts_us(-1) == (-15_000_000,)
    # Like Spark: every window aligned to the slide that holds the event, [start, start + size).
    assert hopping.starts_us(15_000_000) == (15_000_000, 10_000_000, 5_000_000)
    assert hopping.starts_us(16_000_000) == (15_000_000, 10_000_000, 5_000_000)


def test_the_generators_data_tallies_to_its_oracle() -> None:
    settings = GeneratorSettings(
        orders=300,
        stores=4,
        start=datetime(2026, 11, 22, 9),
        span_seconds=120,
        duplicate_every=7,
        bad_every=20,
    )
    records = list(generate_orders(settings))
    tally = work.tally_orders(((r.value, APPENDED_MS) for r in records), TUMBLING_15S, RULES)
    oracle = expected_windows(records, 15)
    assert tally.windows == {
        (location, order_type, epoch_us(start.isoformat())): (window.order_count, int(window.revenue * 100))
        for (location, order_type, start), window in oracle.items()
    }
    assert tally.duplicates == 300 // 7
    # Every malformed kind the generator makes is refused for the reason the app gives it.
    expected_reasons: dict[str, int] = {}
    for record in records:
        if record.bad_kind is not None:
            reason = BAD_RECORD_KINDS[record.bad_kind]
            expected_reasons[reason] = expected_reasons.get(reason, 0) + 1
    assert tally.invalid_by_reason == expected_reasons
