"""Deterministic retail orders and stores in the seed's JSON format, plus an independent oracle.

The same generator feeds the demo, the tests and the benchmarks. It can mix in the
trouble a real feed has (malformed records, redelivered duplicates, events later than
the watermark) and computes, in plain Python with Decimal, the windowed totals a
correct pipeline must produce: tests compare Spark's output against this, not against
numbers typed into the test.
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from spark_apps.contract.records import GENERAL, ORDER_TYPES

GENERAL_ITEMS = {
    "Bananas": Decimal("1.00"),
    "Iphone Charger": Decimal("25.00"),
    "Milk": Decimal("3.49"),
    "Bread": Decimal("2.99"),
    "Batteries": Decimal("7.25"),
}
RESTAURANT_ITEMS = {
    "Pizza": Decimal("6.00"),
    "Coffee": Decimal("3.00"),
    "Burger": Decimal("9.50"),
    "Salad": Decimal("7.75"),
}
# Each malformed kind maps to the DLQ reason the streaming app must report for it.
BAD_RECORD_KINDS = {
    "empty": "empty_value",
    "not_json": "invalid_json",
    "not_utf8": "not_utf8",
    "missing_location": "missing_field:locationId",
    "unknown_type": "unknown_order_type",
    "negative_amount": "negative_amount",
    "bad_timestamp": "unparseable_timestamp",
    # Well-formed but implausible: they must not move the watermark or dominate a window.
    "future_event_time": "event_time_in_future",
    "amount_too_large": "amount_too_large",
    "absurd_event_time": "event_time_in_future",
}
# Kafka keys: the store id (the producers' convention), none at all, or every other record keyed by
# another store (so copies of one order can land on different partitions).
KEY_MODES = ("store", "none", "mismatched")
# The largest amount the default validation rules accept (validation.max_order_amount).
LARGEST_ACCEPTED_AMOUNT = Decimal("1000000.00")


@dataclass(frozen=True)
class GeneratorSettings:
    """What to generate; equal settings always give byte-identical records."""

    orders: int = 1000
    """Number of distinct valid orders."""
    stores: int = 5
    """Number of stores (store_1001, store_1002, ...)."""
    start: datetime = datetime(2026, 11, 22, 9, 0, 0)
    """Event time of the first order (a zone-less local time, read as UTC by the pipeline)."""
    span_seconds: int = 120
    """Event times are spread in order over this many seconds after `start`."""
    seed: int = 42
    """Random seed."""
    duplicate_every: int = 0
    """Re-send every Nth valid order a second time (0: never)."""
    bad_every: int = 0
    """Insert a malformed record after every Nth valid order, cycling through BAD_RECORD_KINDS (0: never)."""
    late_every: int = 0
    """Give every Nth order an event time one hour before `start` (0: never)."""
    first_order_id: int = 1
    conflicting_every: int = 0
    """Re-send every Nth valid order as a conflicting copy: another amount and an event time 5 s
    earlier (re-stamped). The first copy is the one that counts (0: never)."""
    near_limit_every: int = 0
    """Give every Nth valid order the largest accepted amount (0: never)."""
    key_mode: str = "store"
    """One of KEY_MODES."""

    def __post_init__(self) -> None:
        if self.key_mode not in KEY_MODES:
            raise ValueError(f"key_mode {self.key_mode!r} must be one of {KEY_MODES}")


@dataclass(frozen=True)
class GeneratedRecord:
    """One Kafka record to produce, and what it means."""

    key: bytes | None
    value: bytes | None
    order: dict[str, Any] | None = None
    """The order when the record is valid (for the oracle), else None."""
    bad_kind: str | None = None
    is_duplicate: bool = False
    is_late: bool = False
    timestamp_ms: int | None = None
    """The record's Kafka timestamp on a CreateTime topic (None: the producer's clock). The platform's
    topics use LogAppendTime, where the broker stamps records and ignores this."""


@dataclass
class ExpectedWindow:
    order_count: int = 0
    revenue: Decimal = field(default_factory=lambda: Decimal("0.00"))


def store_ids(count: int) -> list[str]:
    return [f"store_{1001 + index}" for index in range(count)]


def store_record(location_id: str, index: int) -> dict[str, Any]:
    """A store value in the seed's format."""
    return {
        "locationId": location_id,
        "address": {
            "addressLine1": f"{1234 + index} Street {index + 1}",
            "addressLine2": "",
            "city": f"City{index + 1}",
            "state": f"State{index + 1}",
            "zip": f"{12345 + index:05d}",
        },
        "contactNum": f"{1234567890 + index}",
    }


def generate_stores(count: int) -> list[GeneratedRecord]:
    """Store records keyed by locationId, for the compacted `stores` topic."""
    return [
        GeneratedRecord(key=location.encode(), value=json.dumps(store_record(location, index)).encode())
        for index, location in enumerate(store_ids(count))
    ]


def _order(rng: random.Random, order_id: int, location_id: str, ordered_at: datetime) -> dict[str, Any]:
    order_type = rng.choice(ORDER_TYPES)
    catalog = GENERAL_ITEMS if order_type == GENERAL else RESTAURANT_ITEMS
    lines: list[dict[str, Any]] = []
    for item in rng.sample(sorted(catalog), k=rng.randint(1, 3)):
        count = rng.randint(1, 4)
        lines.append({"item": item, "count": count, "amount": catalog[item] * count})
    total = sum((Decimal(line["amount"]) for line in lines), Decimal("0.00"))
    return {
        "orderId": order_id,
        "locationId": location_id,
        "finalAmount": total,
        "orderType": order_type,
        "orderLineItems": lines,
        "orderedDateTime": ordered_at.strftime("%Y-%m-%dT%H:%M:%S"),
    }


def order_json(order: dict[str, Any]) -> bytes:
    """Seed-format JSON; money is written as a JSON number with exactly two decimals (never a float)."""

    def encode(value: Any) -> Any:
        if isinstance(value, Decimal):
            return _RawNumber(f"{value:.2f}")
        if isinstance(value, dict):
            return {k: encode(v) for k, v in value.items()}
        if isinstance(value, list):
            return [encode(v) for v in value]
        return value

    return _dumps_with_raw_numbers(encode(order)).encode()


class _RawNumber(str):
    """A JSON number kept as its exact decimal text."""


def _dumps_with_raw_numbers(value: Any) -> str:
    if isinstance(value, _RawNumber):
        return str(value)
    if isinstance(value, dict):
        return (
            "{" + ", ".join(f"{json.dumps(k)}: {_dumps_with_raw_numbers(v)}" for k, v in value.items()) + "}"
        )
    if isinstance(value, list):
        return "[" + ", ".join(_dumps_with_raw_numbers(v) for v in value) + "]"
    return json.dumps(value)


def _bad_record(
    kind: str, rng: random.Random, location_id: str, order_id: int, start: datetime
) -> GeneratedRecord:
    key = location_id.encode()
    good = _order(rng, order_id, location_id, start)
    if kind == "empty":
        value = b""
    elif kind == "not_json":
        value = b'{"orderId": 1, "locationId": '
    elif kind == "not_utf8":
        value = b'{"orderId": 1, "locationId": "\xff\xfe"}'
    elif kind == "missing_location":
        del good["locationId"]
        value = order_json(good)
    elif kind == "unknown_type":
        good["orderType"] = "WHOLESALE"
        value = order_json(good)
    elif kind == "negative_amount":
        good["finalAmount"] = -good["finalAmount"]
        value = order_json(good)
    elif kind == "bad_timestamp":
        good["orderedDateTime"] = "05/12/2022 08:55"
        value = order_json(good)
    elif kind == "future_event_time":
        good["orderedDateTime"] = "2099-01-01T00:00:00"
        value = order_json(good)
    elif kind == "absurd_event_time":
        good["orderedDateTime"] = "9999-12-31T23:59:59"
        value = order_json(good)
    elif kind == "amount_too_large":
        good["finalAmount"] = Decimal("10000000.00")  # above the default cap of 1,000,000.00
        value = order_json(good)
    else:
        raise ValueError(f"unknown bad record kind {kind!r}; choose from {sorted(BAD_RECORD_KINDS)}")
    return GeneratedRecord(key=key, value=value, bad_kind=kind)


def generate_orders(settings: GeneratorSettings) -> Iterator[GeneratedRecord]:
    """Orders in event-time order, with the configured duplicates, malformed and late records mixed in."""
    rng = random.Random(settings.seed)
    locations = store_ids(settings.stores)
    bad_kinds = sorted(BAD_RECORD_KINDS)
    step = settings.span_seconds / max(settings.orders, 1)
    for index in range(settings.orders):
        number = index + 1
        late = settings.late_every > 0 and number % settings.late_every == 0
        ordered_at = settings.start + timedelta(seconds=int(index * step))
        if late:
            ordered_at -= timedelta(hours=1)
        location = rng.choice(locations)
        order = _order(rng, settings.first_order_id + index, location, ordered_at)
        if _every(settings.near_limit_every, number):
            order["finalAmount"] = LARGEST_ACCEPTED_AMOUNT
        key = _key(settings.key_mode, location, locations, number)
        record = GeneratedRecord(key=key, value=order_json(order), order=order, is_late=late)
        yield record
        if _every(settings.duplicate_every, number):
            yield GeneratedRecord(record.key, record.value, order=order, is_duplicate=True, is_late=late)
        if _every(settings.conflicting_every, number):
            conflicting = {
                **order,
                "finalAmount": order["finalAmount"] + Decimal("1.23"),
                "orderedDateTime": (ordered_at - timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%S"),
            }
            yield GeneratedRecord(
                _key(settings.key_mode, location, locations, number + 1),
                order_json(conflicting),
                order=conflicting,
                is_duplicate=True,
                is_late=late,
            )
        if settings.bad_every > 0 and number % settings.bad_every == 0:
            kind = bad_kinds[(number // settings.bad_every - 1) % len(bad_kinds)]
            yield _bad_record(kind, rng, location, settings.first_order_id + index, settings.start)


def _every(n: int, number: int) -> bool:
    return n > 0 and number % n == 0


def _key(mode: str, location: str, locations: list[str], number: int) -> bytes | None:
    if mode == "none":
        return None
    if mode == "mismatched" and number % 2:
        return locations[(locations.index(location) + 1) % len(locations)].encode()
    return location.encode()


def record_count(settings: GeneratorSettings) -> int:
    """How many records `generate_orders(settings)` yields: orders, copies and malformed ones."""

    def extra(every: int) -> int:
        return settings.orders // every if every > 0 else 0

    return (
        settings.orders
        + extra(settings.duplicate_every)
        + extra(settings.conflicting_every)
        + extra(settings.bad_every)
    )


def expected_windows(
    records: Iterable[GeneratedRecord], window_seconds: int, include_late: bool = True
) -> dict[tuple[str, str, datetime], ExpectedWindow]:
    """Tumbling-window totals per (locationId, orderType, window_start), counting each orderId once:
    its first copy in `records` (the platform's rule when records arrive in this order)."""
    seen: set[int] = set()
    windows: dict[tuple[str, str, datetime], ExpectedWindow] = defaultdict(ExpectedWindow)
    for record in records:
        order = record.order
        if order is None or order["orderId"] in seen or (record.is_late and not include_late):
            continue
        seen.add(order["orderId"])
        ordered_at = datetime.strptime(order["orderedDateTime"], "%Y-%m-%dT%H:%M:%S")
        epoch = int((ordered_at - datetime(1970, 1, 1)).total_seconds())
        window_start = datetime(1970, 1, 1) + timedelta(seconds=epoch - epoch % window_seconds)
        window = windows[order["locationId"], order["orderType"], window_start]
        window.order_count += 1
        window.revenue += order["finalAmount"]
    return dict(windows)


def produce(
    bootstrap_servers: str,
    topic: str,
    records: Iterable[GeneratedRecord],
    total: int | None = None,
    progress: Callable[[str], None] | None = None,
    extra_config: dict[str, Any] | None = None,
    progress_bar: bool = False,
) -> int:
    """Produce `records` to `topic` (idempotent producer, acks=all); return how many were sent.

    With `progress_bar`, a tqdm bar on stderr shows records handed to the producer (of `total`).
    """
    from confluent_kafka import KafkaException, Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap_servers,
            "enable.idempotence": True,
            "linger.ms": 20,
            "compression.type": "lz4",
            **(extra_config or {}),
        }
    )
    errors: list[str] = []

    def on_delivery(error: Any, _message: Any) -> None:
        if error is not None:
            errors.append(str(error))

    sent = 0
    last_report = time.monotonic()
    bar = None
    if progress_bar:
        from tqdm import tqdm

        bar = tqdm(total=total, desc=f"produce {topic}", unit="rec", unit_scale=True, mininterval=0.5)
    for record in records:
        while True:
            try:
                # Unset: no timestamp argument, and the producer stamps the record with its clock.
                stamped: dict[str, Any] = (
                    {} if record.timestamp_ms is None else {"timestamp": record.timestamp_ms}
                )
                producer.produce(
                    topic, key=record.key, value=record.value, on_delivery=on_delivery, **stamped
                )
                break
            except BufferError:
                producer.poll(0.1)
        sent += 1
        producer.poll(0)
        if bar is not None:
            bar.update()
        elif progress and time.monotonic() - last_report >= 2:
            of_total = f"/{total}" if total else ""
            progress(f"[produce] {topic}: {sent}{of_total} records")
            last_report = time.monotonic()
    if bar is not None:
        bar.close()
    remaining = producer.flush(60)
    if remaining or errors:
        raise KafkaException(f"{remaining} records undelivered to {topic}; first errors: {errors[:3]}")
    if progress:
        progress(f"[produce] {topic}: {sent} records delivered")
    return sent


def main(argv: list[str] | None = None) -> int:
    """`python -m revenue_platform.orders_generator --bootstrap localhost:9092 --orders 1000`."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--bootstrap", default="localhost:9092")
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--stores-topic", default="stores")
    parser.add_argument("--orders", type=int, default=1000)
    parser.add_argument("--stores", type=int, default=5)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--bad-every", type=int, default=0)
    parser.add_argument("--duplicate-every", type=int, default=0)
    parser.add_argument("--late-every", type=int, default=0)
    args = parser.parse_args(argv)
    settings = GeneratorSettings(
        orders=args.orders,
        stores=args.stores,
        seed=args.seed,
        bad_every=args.bad_every,
        duplicate_every=args.duplicate_every,
        late_every=args.late_every,
    )
    produce(args.bootstrap, args.stores_topic, generate_stores(args.stores), progress=print)
    produce(
        args.bootstrap,
        args.topic,
        generate_orders(settings),
        total=record_count(settings),
        progress=print,
        progress_bar=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
