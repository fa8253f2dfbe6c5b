"""The streaming app's work done by a plain Python loop: the work-equivalent ceiling of the benchmark.

The raw read ceiling says how fast the broker hands out the records; this says how fast one Python
process does what the app must do with them: parse each value as JSON with exact decimals, run the
validator's required-field checks (see ``DlqReason`` and ``parse_and_validate_orders`` in
spark_apps/validation/orders.py, ``OrderRules`` in spark_apps/contract/records.py), keep the first
copy of each orderId, and sum integer cents per (location, order type, event-time window). Nothing
here touches Kafka or the clock, so the rules are unit-tested; bench/consumers.py feeds it from a consumer.

Comparable work, not a second validator. Where it differs from the app (none of these occur in the
benchmark's generated data): orderLineItems are not type-checked; a JSON number with an exponent
(``2.7e1``) is accepted as exact when it has at most two decimals; duplicate keys are not refused
(the last wins); NaN or Infinity outside finalAmount is not refused; and "first copy" is the first
in the order this loop sees the records, not the app's arrival order (ingest batch, timestamp,
partition, offset); and the size bounds (record bytes, locationId length, line-item count) are not
checked. The generator's copies of an order are byte-identical, so that order does not change any sum.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, Final, NamedTuple

from spark_apps.contract.config import WindowConfig
from spark_apps.contract.config_rules import interval_seconds
from spark_apps.contract.records import ORDER_TYPES, REQUIRED_ORDER_FIELDS, DlqReason, OrderRules

# One decoder for all records: json.loads(..., parse_float=...) would build a new one per call.
_decode_json = json.JSONDecoder(parse_float=Decimal).decode
# The app's ORDERED_AT_PATTERN (yyyy-MM-dd'T'HH:mm:ss[.SSSSSS], no zone). The shape is checked
# first because datetime.fromisoformat alone also accepts zones, spaces and the basic format.
_ORDERED_AT_SHAPE: Final = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?")
_EPOCH: Final = datetime(1970, 1, 1)
_MICROSECOND: Final = timedelta(microseconds=1)
_BIGINT_MIN: Final = -(2**63)
_BIGINT_MAX: Final = 2**63 - 1
# DECIMAL(18,2), the app's money type, holds amounts below 10^16.
_MONEY_LIMIT: Final = Decimal(10) ** 16
_CENT: Final = Decimal("0.01")
_CENTS_PER_UNIT: Final = 100

WindowKey = tuple[str, str, int]
"""(location id, order type, window start in epoch microseconds)."""


@dataclass(frozen=True)
class WindowGeometry:
    """Event-time windows as Spark's window() makes them: starts aligned to multiples of the slide."""

    size_us: int
    slide_us: int

    @classmethod
    def from_config(cls, window: WindowConfig) -> WindowGeometry:
        size_us = interval_seconds(window.size) * 1_000_000
        slide_us = interval_seconds(window.slide) * 1_000_000 if window.slide else size_us
        return cls(size_us, slide_us)

    def starts_us(self, event_us: int) -> tuple[int, ...]:
        """Start of every window holding `event_us` (one when tumbling), latest first."""
        latest = event_us - event_us % self.slide_us
        if self.slide_us == self.size_us:
            return (latest,)
        starts = []
        start = latest
        while start + self.size_us > event_us:
            starts.append(start)
            start -= self.slide_us
        return tuple(starts)


class ValidOrder(NamedTuple):
    """The typed fields of an order that passed every check."""

    order_id: int
    location_id: str
    order_type: str
    cents: int
    event_us: int
    """orderedDateTime read as UTC, in epoch microseconds."""


def event_time_us(text: str) -> int | None:
    """orderedDateTime as epoch microseconds (read as UTC), None unless it is yyyy-MM-ddTHH:mm:ss[.ffffff]."""
    if not _ORDERED_AT_SHAPE.fullmatch(text):
        return None
    try:
        ordered_at = datetime.fromisoformat(text)
    except ValueError:  # month 13, 25 o'clock, Feb 30 ...
        return None
    return (ordered_at - _EPOCH) // _MICROSECOND


def exact_cents(amount: object) -> int | None:
    """An amount as integer cents when it is an exact money value DECIMAL(18,2) holds, else None.

    Like the app: a JSON integer, or a decimal with at most two fractional digits once trailing
    zeros are dropped (1.500 is 150 cents; 19.999 is refused), below 10^16 in magnitude.
    """
    if type(amount) is int:  # not bool, which is an int subclass
        return amount * _CENTS_PER_UNIT if -_MONEY_LIMIT < amount < _MONEY_LIMIT else None
    if type(amount) is Decimal and amount.is_finite() and -_MONEY_LIMIT < amount < _MONEY_LIMIT:
        # Rounding to cents and comparing is exact (amount * 100 would round at 28 digits).
        in_cents = amount.quantize(_CENT)
        if in_cents == amount:
            return int(in_cents * _CENTS_PER_UNIT)
    return None


def check_order(
    value: bytes | None, kafka_timestamp_ms: int, rules: OrderRules, max_cents: int
) -> ValidOrder | str:
    """The order in one Kafka value, or the first reason it is invalid (checked in DlqReason's order:
    decoding, then required fields and their types, then the values).

    `max_cents` is `rules.max_order_amount` in cents, computed once by the caller.
    """
    order = decode_order(value)
    if isinstance(order, str):
        return order
    typed = typed_fields(order)
    if isinstance(typed, str):
        return typed
    return checked_values(typed, kafka_timestamp_ms, rules, max_cents)


def decode_order(value: bytes | None) -> dict[str, Any] | str:
    """The JSON object in a Kafka value (amounts as exact Decimals), or why there is none."""
    if not value:
        return DlqReason.EMPTY_VALUE
    try:
        text = value.decode()
    except UnicodeDecodeError:
        return DlqReason.NOT_UTF8
    try:
        order = _decode_json(text)
    except (ValueError, RecursionError):
        return DlqReason.INVALID_JSON
    if type(order) is not dict:
        return DlqReason.INVALID_JSON
    return order


class TypedFields(NamedTuple):
    """An order's required fields once each is present and of its type."""

    order_id: int
    location_id: str
    cents: int
    """0 when the amount is NaN or +-Infinity (`non_finite`)."""
    non_finite: bool
    order_type: str
    ordered_at: str


def typed_fields(order: dict[str, Any]) -> TypedFields | str:
    """The required fields of `order`, or the first that is missing or of the wrong type."""
    fields = [order.get(name) for name in REQUIRED_ORDER_FIELDS]
    order_id, location_id, amount, order_type, ordered_at = fields
    for name, found in zip(REQUIRED_ORDER_FIELDS, fields, strict=True):
        if found is None:
            return DlqReason.missing_field(name)
    # Spark's trim() strips spaces only; a blank location id cannot key a window.
    if type(location_id) is str and not location_id.strip(" "):
        return DlqReason.missing_field("locationId")
    if type(order_id) is not int or not _BIGINT_MIN <= order_id <= _BIGINT_MAX:
        return DlqReason.wrong_type("orderId")
    if type(location_id) is not str:
        return DlqReason.wrong_type("locationId")
    # With parse_float=Decimal only NaN and +-Infinity decode to floats; like the app, their own
    # reason comes after the type checks of the other fields.
    non_finite = type(amount) is float
    cents = 0 if non_finite else exact_cents(amount)
    if cents is None:
        return DlqReason.wrong_type("finalAmount")
    if type(order_type) is not str:
        return DlqReason.wrong_type("orderType")
    if type(ordered_at) is not str:
        return DlqReason.wrong_type("orderedDateTime")
    return TypedFields(order_id, location_id, cents, non_finite, order_type, ordered_at)


def checked_values(
    fields: TypedFields, kafka_timestamp_ms: int, rules: OrderRules, max_cents: int
) -> ValidOrder | str:
    """The valid order, or the first of its values the rules refuse."""
    if fields.non_finite:
        return DlqReason.NON_FINITE_AMOUNT
    if fields.order_type not in ORDER_TYPES:
        return DlqReason.UNKNOWN_ORDER_TYPE
    if fields.cents < 0:
        return DlqReason.NEGATIVE_AMOUNT
    if fields.cents > max_cents:
        return DlqReason.AMOUNT_TOO_LARGE
    event_us = event_time_us(fields.ordered_at)
    if event_us is None:
        return DlqReason.UNPARSEABLE_TIMESTAMP
    if event_us > (kafka_timestamp_ms + rules.max_future_skew_s * 1000) * 1000:
        return DlqReason.EVENT_TIME_IN_FUTURE
    if event_us < (kafka_timestamp_ms - rules.max_past_age_s * 1000) * 1000:
        return DlqReason.EVENT_TIME_TOO_OLD
    return ValidOrder(fields.order_id, fields.location_id, fields.order_type, fields.cents, event_us)


@dataclass(frozen=True)
class OrderTally:
    """What the work produced: record counts and, per window, (orders, cents)."""

    valid: int
    """Valid records, later copies of an orderId included."""
    duplicates: int
    """Valid records whose orderId was already counted (not summed)."""
    invalid_by_reason: dict[str, int]
    windows: dict[WindowKey, tuple[int, int]] = field(repr=False)
    """(location id, order type, window start in epoch microseconds) -> (orders, cents)."""

    @property
    def records(self) -> int:
        return self.valid + self.invalid

    @property
    def invalid(self) -> int:
        return sum(self.invalid_by_reason.values())

    @property
    def orders_counted(self) -> int:
        """Distinct valid orders."""
        return self.valid - self.duplicates

    @property
    def window_orders(self) -> int:
        """Orders summed over windows: gold's Σ order_count (orders_counted when windows tumble)."""
        return sum(orders for orders, _ in self.windows.values())

    @property
    def total_cents(self) -> int:
        """Cents summed over windows: gold's Σ revenue in cents."""
        return sum(cents for _, cents in self.windows.values())

    def summary(self) -> dict[str, object]:
        """The counts as a JSON-able dict (the windows themselves are too many to keep)."""
        return {
            "records": self.records,
            "valid": self.valid,
            "invalid": self.invalid,
            "duplicates": self.duplicates,
            "orders_counted": self.orders_counted,
            "invalid_by_reason": dict(sorted(self.invalid_by_reason.items())),
            "windows": len(self.windows),
            "window_orders": self.window_orders,
            "total_cents": self.total_cents,
        }


def tally_orders(
    records: Iterable[tuple[bytes | None, int]], geometry: WindowGeometry, rules: OrderRules
) -> OrderTally:
    """Validate, dedupe (first copy of an orderId wins) and sum cents per window.

    `records` are (Kafka value, Kafka timestamp ms) in the order they were read.
    """
    max_cents = int(rules.max_order_amount * _CENTS_PER_UNIT)
    seen_order_ids: set[int] = set()
    totals: dict[WindowKey, list[int]] = {}
    invalid_by_reason: dict[str, int] = {}
    valid = duplicates = 0
    for value, timestamp_ms in records:
        order = check_order(value, timestamp_ms, rules, max_cents)
        if isinstance(order, str):
            invalid_by_reason[order] = invalid_by_reason.get(order, 0) + 1
            continue
        valid += 1
        if order.order_id in seen_order_ids:
            duplicates += 1
            continue
        seen_order_ids.add(order.order_id)
        for start_us in geometry.starts_us(order.event_us):
            key = (order.location_id, order.order_type, start_us)
            window = totals.get(key)
            if window is None:
                totals[key] = [1, order.cents]
            else:
                window[0] += 1
                window[1] += order.cents
    windows = {key: (orders, cents) for key, (orders, cents) in totals.items()}
    return OrderTally(valid, duplicates, invalid_by_reason, windows)
