"""The generator's hostile kinds: what each produces, and that the oracle counts the first copy."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from revenue_platform.orders_generator import (
    BAD_RECORD_KINDS,
    LARGEST_ACCEPTED_AMOUNT,
    GeneratorSettings,
    expected_windows,
    generate_orders,
    record_count,
)


def test_conflicting_copies_are_restamped_and_never_counted() -> None:
    settings = GeneratorSettings(orders=40, stores=3, seed=7, conflicting_every=10)
    records = list(generate_orders(settings))
    assert len(records) == record_count(settings) == 44
    copies = [r for r in records if r.is_duplicate]
    assert len(copies) == 4
    for copy in copies:
        original = next(r for r in records if r.order and r.order["orderId"] == copy.order["orderId"])  # type: ignore[index]
        assert original is not copy
        first, second = json.loads(original.value or b""), json.loads(copy.value or b"")
        assert Decimal(str(second["finalAmount"])) == Decimal(str(first["finalAmount"])) + Decimal("1.23")
        assert second["orderedDateTime"] < first["orderedDateTime"], "re-stamped earlier"
    originals_only = [r for r in records if not r.is_duplicate]
    assert expected_windows(records, 15) == expected_windows(originals_only, 15)


def test_key_modes_and_near_limit_amounts() -> None:
    none = list(generate_orders(GeneratorSettings(orders=10, key_mode="none")))
    assert all(r.key is None for r in none)
    mismatched = list(generate_orders(GeneratorSettings(orders=10, stores=3, key_mode="mismatched")))
    wrong = [r for r in mismatched if r.key != r.order["locationId"].encode()]  # type: ignore[index]
    assert len(wrong) == 5, "every other record is keyed by another store"
    largest = list(generate_orders(GeneratorSettings(orders=10, near_limit_every=5)))
    assert [r.order["finalAmount"] for r in largest if r.order["finalAmount"] == LARGEST_ACCEPTED_AMOUNT] == [  # type: ignore[index]
        LARGEST_ACCEPTED_AMOUNT
    ] * 2
    with pytest.raises(ValueError, match="key_mode"):
        GeneratorSettings(key_mode="random")


def test_the_absurd_event_time_kind_goes_to_the_future_rule() -> None:
    assert BAD_RECORD_KINDS["absurd_event_time"] == "event_time_in_future"
    records = list(generate_orders(GeneratorSettings(orders=len(BAD_RECORD_KINDS), bad_every=1)))
    absurd = next(r for r in records if r.bad_kind == "absurd_event_time")
    assert json.loads(absurd.value or b"")["orderedDateTime"].startswith("9999-")
