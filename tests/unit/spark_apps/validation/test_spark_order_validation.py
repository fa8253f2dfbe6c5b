"""Parsing, validation and dead-lettering of raw Kafka order records."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from datetime import datetime
from decimal import Decimal
from typing import Any, cast

import pytest
from pyspark.sql import Row
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual, assertSchemaEqual

from spark_apps.contract.records import (
    DEAD_LETTERS_OF_KIND,
    VALIDATOR_DLQ_REASON_KINDS,
    OrderRules,
    dlq_reason_kind,
)
from spark_apps.engine.observability import ingest_totals
from spark_apps.validation.orders import (
    DlqReason,
    exact_order_validation,
    invalid_orders,
    parse_and_validate_orders,
    valid_orders,
)
from spark_apps.validation.routing import DEAD_LETTER_ORIGINAL_BYTES, to_dlq_kafka_records, to_dlq_records
from spark_apps.validation.schemas import (
    DLQ_KAFKA_SINK_SCHEMA,
    DLQ_RECORD_SCHEMA,
    ORDER_COLUMNS,
    VALID_ORDER_SCHEMA,
    VALIDATED_ORDER_SCHEMA,
)

EXAMPLE_ORDER: dict[str, Any] = {
    "orderId": 12345,
    "locationId": "store_1234",
    "finalAmount": 27.00,
    "orderType": "GENERAL",
    "orderLineItems": [
        {"item": "Bananas", "count": 2, "amount": 2.00},
        {"item": "Iphone Charger", "count": 1, "amount": 25.00},
    ],
    "orderedDateTime": "2022-12-05T08:55:27",
}
# The literal text, so amounts keep their exact digits (json.dumps would print 27.0).
EXAMPLE_TEXT = (
    '{"orderId": 12345, "locationId": "store_1234", "finalAmount": 27.00, "orderType": "GENERAL", '
    '"orderLineItems": [{"item": "Bananas", "count": 2, "amount": 2.00}, '
    '{"item": "Iphone Charger", "count": 1, "amount": 25.00}], "orderedDateTime": "2022-12-05T08:55:27"}'
)


class Raw(str):
    """A JSON token spliced into the text unquoted (NaN, 19.999: things json.dumps can't write)."""


def _raw_tokens(value: Any) -> Iterator[Raw]:
    if isinstance(value, Raw):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _raw_tokens(item)
    elif isinstance(value, list):
        for item in value:
            yield from _raw_tokens(item)


def order_text(**changes: Any) -> str:
    """The example order with fields replaced; a value of ``...`` removes the field."""
    doc = {k: v for k, v in {**EXAMPLE_ORDER, **changes}.items() if v is not ...}
    text = json.dumps(doc)
    for raw in set(_raw_tokens(doc)):
        text = text.replace(json.dumps(raw), str(raw))
    return text


def test_example_order_is_valid_and_typed(kafka_df: Any) -> None:
    out = parse_and_validate_orders(kafka_df([{"value": EXAMPLE_TEXT.encode()}]))

    assertSchemaEqual(out.schema, VALIDATED_ORDER_SCHEMA)
    expected = Row(
        order_id=12345,
        location_id="store_1234",
        final_amount=Decimal("27.00"),
        order_type="GENERAL",
        order_line_items=[
            Row(item="Bananas", count=2, amount=Decimal("2.00")),
            Row(item="Iphone Charger", count=1, amount=Decimal("25.00")),
        ],
        ordered_at=datetime(2022, 12, 5, 8, 55, 27),
    )
    assertDataFrameEqual(out.select(*ORDER_COLUMNS), [expected])
    assert out.first()["dlq_reason"] is None  # type: ignore[index]


def test_ordered_at_is_interpreted_as_utc(kafka_df: Any) -> None:
    out = parse_and_validate_orders(kafka_df([{"value": EXAMPLE_TEXT.encode()}]))
    # 2022-12-05T08:55:27Z as epoch seconds, independent of any Python-side conversion.
    assert out.select(F.unix_timestamp("ordered_at")).first()[0] == 1670230527  # type: ignore[index]


# kafka_df's default key (b"store_1") counts toward the record's size.
DEFAULT_KEY_BYTES = len(b"store_1")
RULES = OrderRules()


def padded_to(record_bytes: int) -> dict[str, Any]:
    """Changes that make the example order a record (key + value) of exactly `record_bytes` bytes."""
    unpadded = len(order_text(padding="").encode()) + DEFAULT_KEY_BYTES
    return {"padding": "x" * (record_bytes - unpadded)}


ACCEPTED_CASES = [
    pytest.param(padded_to(RULES.max_record_bytes), {"order_id": 12345}, id="record-at-size-limit"),
    pytest.param(
        {"locationId": "s" * RULES.max_location_id_chars},
        {"location_id": "s" * RULES.max_location_id_chars},
        id="location-id-at-length-limit",
    ),
    pytest.param(
        {"orderLineItems": [{}] * RULES.max_line_items},
        {"order_id": 12345},
        id="line-items-at-limit",
    ),
    pytest.param(
        {"promoCode": "XMAS", "meta": {"a": [1, 2]}},
        {"order_id": 12345, "final_amount": Decimal("27.00")},
        id="unknown-extra-fields",
    ),
    pytest.param({"orderLineItems": ...}, {"order_line_items": None}, id="line-items-absent"),
    pytest.param({"orderLineItems": None}, {"order_line_items": None}, id="line-items-null"),
    pytest.param({"orderLineItems": []}, {"order_line_items": []}, id="line-items-empty"),
    pytest.param({"finalAmount": Raw("1.500")}, {"final_amount": Decimal("1.50")}, id="trailing-zeros"),
    pytest.param({"finalAmount": 0}, {"final_amount": Decimal("0.00")}, id="zero-amount"),
    pytest.param({"finalAmount": Raw("19.99")}, {"final_amount": Decimal("19.99")}, id="cents"),
    pytest.param(
        {"finalAmount": Raw("1000000.00")}, {"final_amount": Decimal("1000000.00")}, id="amount-at-cap"
    ),
    # The record's Kafka timestamp (kafka_df) is 2022-12-05 09:00:00; the default skew is 5 minutes.
    pytest.param(
        {"orderedDateTime": "2022-12-05T09:00:30"},
        {"ordered_at": datetime(2022, 12, 5, 9, 0, 30)},
        id="event-time-at-skew-limit",
    ),
    pytest.param(
        {"orderedDateTime": "2013-01-01T00:00:00"},
        {"ordered_at": datetime(2013, 1, 1)},
        id="old-order-within-ten-years-stays-valid",
    ),
    pytest.param({"orderType": "RESTAURANT"}, {"order_type": "RESTAURANT"}, id="restaurant"),
    pytest.param(
        {"orderedDateTime": "2022-12-05T08:55:27.250"},
        {"ordered_at": datetime(2022, 12, 5, 8, 55, 27, 250000)},
        id="fractional-seconds",
    ),
]


@pytest.mark.parametrize(("changes", "expected"), ACCEPTED_CASES)
def test_accepted_variants(
    validated_cases: CaseResults, changes: dict[str, Any], expected: dict[str, Any]
) -> None:
    row = validated_cases[order_text(**changes).encode()]
    assert row["dlq_reason"] is None
    for column, value in expected.items():
        assert row[column] == value


MISSING = DlqReason.missing_field
WRONG = DlqReason.wrong_type


DLQ_CASES = [
    pytest.param(None, DlqReason.EMPTY_VALUE, id="null-value"),
    pytest.param(b"", DlqReason.EMPTY_VALUE, id="zero-length-value"),
    pytest.param(b'{"orderId": 1, "locationId": "\xff\xfe"}', DlqReason.NOT_UTF8, id="not-utf8"),
    # Over the size bound, before anything parses it: neither UTF-8 nor JSON is looked at.
    pytest.param(
        b"\xff" * (RULES.max_record_bytes - DEFAULT_KEY_BYTES + 1),
        DlqReason.RECORD_TOO_LARGE,
        id="record-over-size-limit-not-json",
    ),
    # A well-formed order over the bound (the fast path certifies it: the size check still applies).
    pytest.param(
        order_text(**padded_to(RULES.max_record_bytes + 1)).encode(),
        DlqReason.RECORD_TOO_LARGE,
        id="order-over-size-limit",
    ),
    pytest.param(
        order_text(locationId="s" * (RULES.max_location_id_chars + 1)).encode(),
        DlqReason.LOCATION_ID_TOO_LONG,
        id="location-id-over-length-limit",
    ),
    pytest.param(
        order_text(orderLineItems=[{}] * (RULES.max_line_items + 1)).encode(),
        DlqReason.TOO_MANY_LINE_ITEMS,
        id="line-items-over-limit",
    ),
    pytest.param(b"not json at all", DlqReason.INVALID_JSON, id="not-json"),
    pytest.param(b"[1, 2, 3]", DlqReason.INVALID_JSON, id="json-array"),
    pytest.param(b'"a string"', DlqReason.INVALID_JSON, id="json-string"),
    pytest.param(EXAMPLE_TEXT[:-10].encode(), DlqReason.INVALID_JSON, id="truncated"),
    pytest.param((EXAMPLE_TEXT + " trailing").encode(), DlqReason.INVALID_JSON, id="trailing-garbage"),
    # try_parse_json stops after the first value; these end with a brace, so only reading past
    # the first value tells them from an order.
    pytest.param((EXAMPLE_TEXT + " }").encode(), DlqReason.INVALID_JSON, id="trailing-brace"),
    pytest.param((EXAMPLE_TEXT + '{"x": 1}').encode(), DlqReason.INVALID_JSON, id="trailing-object"),
    pytest.param((EXAMPLE_TEXT + ', {"x": 1}').encode(), DlqReason.INVALID_JSON, id="trailing-comma-object"),
    pytest.param((EXAMPLE_TEXT + "\x0b").encode(), DlqReason.INVALID_JSON, id="trailing-vertical-tab"),
    pytest.param(
        order_text(finalAmount=Raw("NaN")).encode() + b" }",
        DlqReason.INVALID_JSON,
        id="nan-and-trailing-brace",
    ),
    pytest.param(order_text(orderId=...).encode(), MISSING("orderId"), id="missing-orderId"),
    pytest.param(order_text(orderId=None).encode(), MISSING("orderId"), id="null-orderId"),
    pytest.param(order_text(locationId=...).encode(), MISSING("locationId"), id="missing-locationId"),
    pytest.param(order_text(locationId="  ").encode(), MISSING("locationId"), id="blank-locationId"),
    pytest.param(order_text(finalAmount=...).encode(), MISSING("finalAmount"), id="missing-finalAmount"),
    pytest.param(order_text(orderType=...).encode(), MISSING("orderType"), id="missing-orderType"),
    pytest.param(
        order_text(orderedDateTime=...).encode(), MISSING("orderedDateTime"), id="missing-orderedDateTime"
    ),
    pytest.param(order_text(orderId="12345").encode(), WRONG("orderId"), id="orderId-string"),
    pytest.param(order_text(orderId=Raw("12345.5")).encode(), WRONG("orderId"), id="orderId-fraction"),
    pytest.param(order_text(orderId=2**63).encode(), WRONG("orderId"), id="orderId-over-bigint"),
    pytest.param(order_text(locationId=1234).encode(), WRONG("locationId"), id="locationId-number"),
    pytest.param(order_text(finalAmount="27.00").encode(), WRONG("finalAmount"), id="amount-string"),
    pytest.param(order_text(finalAmount=True).encode(), WRONG("finalAmount"), id="amount-bool"),
    pytest.param(order_text(finalAmount=Raw("19.999")).encode(), WRONG("finalAmount"), id="amount-3dp"),
    pytest.param(order_text(finalAmount=Raw("2.7e1")).encode(), WRONG("finalAmount"), id="amount-exp"),
    pytest.param(order_text(finalAmount=10**17).encode(), WRONG("finalAmount"), id="amount-overflow"),
    pytest.param(order_text(orderType=1).encode(), WRONG("orderType"), id="orderType-number"),
    pytest.param(
        order_text(orderedDateTime=20221205).encode(), WRONG("orderedDateTime"), id="timestamp-number"
    ),
    pytest.param(order_text(orderLineItems={}).encode(), WRONG("orderLineItems"), id="items-object"),
    pytest.param(order_text(orderLineItems=[1]).encode(), WRONG("orderLineItems"), id="items-not-objects"),
    pytest.param(
        order_text(orderLineItems=[{"item": "a", "count": "2", "amount": 1}]).encode(),
        WRONG("orderLineItems"),
        id="item-count-string",
    ),
    pytest.param(
        order_text(orderLineItems=[{"item": "a", "count": 2**40, "amount": 1}]).encode(),
        WRONG("orderLineItems"),
        id="item-count-overflow",
    ),
    pytest.param(
        order_text(orderLineItems=[{"item": "a", "count": 1, "amount": Raw("0.001")}]).encode(),
        WRONG("orderLineItems"),
        id="item-amount-3dp",
    ),
    pytest.param(order_text(finalAmount=Raw("NaN")).encode(), DlqReason.NON_FINITE_AMOUNT, id="nan"),
    pytest.param(order_text(finalAmount=Raw("Infinity")).encode(), DlqReason.NON_FINITE_AMOUNT, id="inf"),
    pytest.param(order_text(finalAmount=Raw("-Infinity")).encode(), DlqReason.NON_FINITE_AMOUNT, id="-inf"),
    pytest.param(order_text(orderType="ONLINE").encode(), DlqReason.UNKNOWN_ORDER_TYPE, id="type-online"),
    pytest.param(order_text(orderType="general").encode(), DlqReason.UNKNOWN_ORDER_TYPE, id="type-case"),
    pytest.param(order_text(finalAmount=Raw("-0.01")).encode(), DlqReason.NEGATIVE_AMOUNT, id="negative"),
    pytest.param(
        order_text(orderedDateTime="2022-12-05 08:55:27").encode(),
        DlqReason.UNPARSEABLE_TIMESTAMP,
        id="timestamp-space",
    ),
    pytest.param(
        order_text(orderedDateTime="2022-12-05T08:55:27Z").encode(),
        DlqReason.UNPARSEABLE_TIMESTAMP,
        id="timestamp-with-zone",
    ),
    pytest.param(
        order_text(orderedDateTime="2022-02-30T08:55:27").encode(),
        DlqReason.UNPARSEABLE_TIMESTAMP,
        id="timestamp-impossible-date",
    ),
    pytest.param(
        order_text(orderedDateTime="yesterday").encode(), DlqReason.UNPARSEABLE_TIMESTAMP, id="timestamp-word"
    ),
    pytest.param(
        order_text(finalAmount=Raw("1000000.01")).encode(), DlqReason.AMOUNT_TOO_LARGE, id="amount-above-cap"
    ),
    pytest.param(
        order_text(finalAmount=Raw("9999999999999999.99")).encode(),
        DlqReason.AMOUNT_TOO_LARGE,
        id="max-money",
    ),
    pytest.param(
        order_text(orderedDateTime="2022-12-05T09:00:30.000001").encode(),
        DlqReason.EVENT_TIME_IN_FUTURE,
        id="event-time-past-skew",
    ),
    pytest.param(
        order_text(orderedDateTime="2099-01-01T00:00:00").encode(),
        DlqReason.EVENT_TIME_IN_FUTURE,
        id="year-2099",
    ),
    pytest.param(
        order_text(orderedDateTime="0001-01-01T00:00:00").encode(),
        DlqReason.EVENT_TIME_TOO_OLD,
        id="year-1",
    ),
    pytest.param(
        order_text(orderedDateTime="2012-12-01T00:00:00").encode(),
        DlqReason.EVENT_TIME_TOO_OLD,
        id="older-than-ten-years",
    ),
]


def test_trailing_json_whitespace_is_still_one_order(kafka_df: Any) -> None:
    # The exact checks (the fast path certifies this record, so it would not reach them).
    (row,) = exact_order_validation(kafka_df([{"value": (EXAMPLE_TEXT + " \n\t\r ").encode()}])).collect()
    assert row["dlq_reason"] is None
    assert row["order_id"] == 12345


@pytest.mark.parametrize(("value", "reason"), DLQ_CASES)
def test_dlq_reason(validated_cases: CaseResults, value: bytes | None, reason: str) -> None:
    row = validated_cases[value]
    assert row["dlq_reason"] == reason
    # A rejected row never exposes half-parsed typed values.
    assert all(row[c] is None for c in ORDER_COLUMNS)


def test_dead_letters_are_counted_per_reason_kind(kafka_df: Any) -> None:
    """The app's ingest observation over every DLQ case: each is counted under its reason's kind, the
    kinds are a closed set, and every kind has a case here."""
    values = [p.values[0] for p in DLQ_CASES]
    validated = parse_and_validate_orders(kafka_df([{"value": v} for v in values]))
    totals = validated.agg(*ingest_totals(F.col("dlq_reason"))).first()
    assert totals is not None
    expected = {kind: 0 for kind in VALIDATOR_DLQ_REASON_KINDS}
    for p in DLQ_CASES:
        expected[dlq_reason_kind(str(p.values[1]))] += 1
    assert set(expected) == set(VALIDATOR_DLQ_REASON_KINDS), "a reason outside the kinds the metrics label"
    assert all(expected.values()), "every kind has a case"
    assert {
        kind: totals[DEAD_LETTERS_OF_KIND.format(kind)] for kind in VALIDATOR_DLQ_REASON_KINDS
    } == expected
    assert (totals["records"], totals["dead_letters"]) == (len(values), len(values))


PRECEDENCE_CASES = [
    pytest.param({"orderId": ..., "orderType": "ONLINE"}, MISSING("orderId"), id="missing-before-type"),
    pytest.param({"orderId": ..., "locationId": ...}, MISSING("orderId"), id="fields-in-order"),
    pytest.param({"orderId": "x", "finalAmount": Raw("-1")}, WRONG("orderId"), id="wrong-before-negative"),
    pytest.param(
        {"finalAmount": Raw("NaN"), "orderType": "ONLINE"}, DlqReason.NON_FINITE_AMOUNT, id="nan-first"
    ),
    pytest.param({"finalAmount": Raw("NaN"), "locationId": 7}, WRONG("locationId"), id="wrong-before-nan"),
    pytest.param(
        {"finalAmount": Raw("-5"), "orderedDateTime": "bad"}, DlqReason.NEGATIVE_AMOUNT, id="negative-first"
    ),
    pytest.param(
        {"finalAmount": Raw("2000000"), "orderedDateTime": "bad"},
        DlqReason.AMOUNT_TOO_LARGE,
        id="too-large-before-unparseable",
    ),
    pytest.param(
        {"finalAmount": Raw("2000000"), "orderedDateTime": "2099-01-01T00:00:00"},
        DlqReason.AMOUNT_TOO_LARGE,
        id="too-large-before-future",
    ),
    pytest.param(
        {"orderType": "ONLINE", "orderedDateTime": "2099-01-01T00:00:00"},
        DlqReason.UNKNOWN_ORDER_TYPE,
        id="type-before-future",
    ),
]


@pytest.mark.parametrize(("changes", "reason"), PRECEDENCE_CASES)
def test_first_reason_wins(validated_cases: CaseResults, changes: dict[str, Any], reason: str) -> None:
    row = validated_cases[order_text(**changes).encode()]
    assert row["dlq_reason"] == reason


CaseResults = dict[bytes | None, Row]


@pytest.fixture(scope="module")
def validated_cases(kafka_df: Any) -> CaseResults:
    """Validate every parametrized case in one Spark job (one row per case), keyed by value:
    the result depends on the value alone, so per-case tests just look their row up."""
    values = [p.values[0] for p in DLQ_CASES] + [
        order_text(**cast(dict[str, Any], p.values[0])).encode() for p in ACCEPTED_CASES + PRECEDENCE_CASES
    ]
    rows = parse_and_validate_orders(kafka_df([{"value": v} for v in values])).collect()
    return {row["value"] if row["value"] is None else bytes(row["value"]): row for row in rows}


def test_rules_are_configuration(kafka_df: Any) -> None:
    """The largest DECIMAL(18,2) is accepted when the cap allows it; a zero skew refuses any future."""
    values = [
        order_text(finalAmount=Raw("9999999999999999.99")).encode(),
        order_text(orderedDateTime="2022-12-05T09:00:01").encode(),
        order_text(orderedDateTime="2022-12-05T09:00:00").encode(),
    ]
    rules = OrderRules(max_future_skew_s=0, max_order_amount=Decimal("9999999999999999.99"))
    rows = (
        parse_and_validate_orders(kafka_df([{"value": v} for v in values]), rules).orderBy("offset").collect()
    )
    assert [(r["dlq_reason"], r["final_amount"]) for r in rows] == [
        (None, Decimal("9999999999999999.99")),
        (DlqReason.EVENT_TIME_IN_FUTURE, None),
        (None, Decimal("27.00")),
    ]


def test_the_oldest_accepted_order_is_configuration(kafka_df: Any) -> None:
    """An order more than max_past_age behind its Kafka timestamp (09:00:00) is refused, not counted late."""
    values = [
        order_text(orderedDateTime="2022-12-05T08:58:59.999999").encode(),
        order_text(orderedDateTime="2022-12-05T08:59:00").encode(),
    ]
    rows = (
        parse_and_validate_orders(kafka_df([{"value": v} for v in values]), OrderRules(max_past_age_s=60))
        .orderBy("offset")
        .collect()
    )
    assert [r["dlq_reason"] for r in rows] == [DlqReason.EVENT_TIME_TOO_OLD, None]


def test_valid_and_invalid_split(kafka_df: Any) -> None:
    validated = parse_and_validate_orders(
        kafka_df([{"value": EXAMPLE_TEXT.encode()}, {"value": b"{}"}, {"value": None}])
    )

    valid = valid_orders(validated)
    assertSchemaEqual(valid.schema, VALID_ORDER_SCHEMA)
    assertDataFrameEqual(
        valid.select("order_id", "source_topic", "source_offset"),
        [Row(order_id=12345, source_topic="orders", source_offset=0)],
    )
    assertDataFrameEqual(
        invalid_orders(validated).select("offset", "dlq_reason"),
        [Row(offset=1, dlq_reason=MISSING("orderId")), Row(offset=2, dlq_reason=DlqReason.EMPTY_VALUE)],
    )


def test_dlq_records_keep_original_bytes(kafka_df: Any) -> None:
    bad_value = b"\xff\x00 not utf8 \xfe"
    validated = parse_and_validate_orders(
        kafka_df(
            [
                {"value": EXAMPLE_TEXT.encode()},
                {"key": b"\x01store", "value": bad_value, "partition": 3, "offset": 42},
            ]
        )
    )

    dlq = to_dlq_records(validated)
    assertSchemaEqual(dlq.schema, DLQ_RECORD_SCHEMA)
    expected = Row(
        original_key=bytearray(b"\x01store"),
        original_value=bytearray(bad_value),
        source_topic="orders",
        source_partition=3,
        source_offset=42,
        source_timestamp=datetime(2022, 12, 5, 9, 0, 0),
        dlq_reason=DlqReason.NOT_UTF8,
    )
    assertDataFrameEqual(dlq, [expected])


def test_dlq_kafka_records_shape(kafka_df: Any) -> None:
    # Long enough that Spark's default base64 would wrap lines.
    long_value = b"\x80" + b"x" * 300
    dlq = to_dlq_records(
        parse_and_validate_orders(kafka_df([{"key": b"store_9", "value": long_value, "offset": 7}]))
    )

    records = to_dlq_kafka_records(dlq)
    assertSchemaEqual(records.schema, DLQ_KAFKA_SINK_SCHEMA)
    (row,) = records.collect()
    assert bytes(row["key"]) == b"store_9"
    payload = json.loads(row["value"])
    assert payload == {
        "dlq_reason": DlqReason.NOT_UTF8,
        "source_topic": "orders",
        "source_partition": 0,
        "source_offset": 7,
        "source_timestamp": "2022-12-05T09:00:00.000Z",
        "original_key_base64": base64.b64encode(b"store_9").decode(),
        "original_value_base64": base64.b64encode(long_value).decode(),
        "original_key_bytes": 7,
        "original_value_bytes": len(long_value),
        "original_value_sha256": hashlib.sha256(long_value).hexdigest(),
    }
    headers = {h["key"]: bytes(h["value"]) for h in row["headers"]}
    assert headers == {
        "dlq_reason": b"not_utf8",
        "source_topic": b"orders",
        "source_partition": b"0",
        "source_offset": b"7",
    }


def test_a_dead_letter_of_an_oversized_record_fits_the_kafka_clients_limit(kafka_df: Any) -> None:
    """An 800 kB value under a 300 kB key: the dead letter carries the first bytes of each, their
    full sizes and the value's hash, and is far below librdkafka's 1,000,000-byte message limit."""
    key, value = b"k" * 300_000, bytes(range(256)) * 3_125  # 800,000 bytes, not UTF-8
    dlq = to_dlq_records(parse_and_validate_orders(kafka_df([{"key": key, "value": value}])))
    (row,) = to_dlq_kafka_records(dlq).collect()
    payload = json.loads(row["value"])
    assert payload["dlq_reason"] == DlqReason.RECORD_TOO_LARGE
    assert base64.b64decode(payload["original_value_base64"]) == value[:DEAD_LETTER_ORIGINAL_BYTES]
    assert base64.b64decode(payload["original_key_base64"]) == key[:DEAD_LETTER_ORIGINAL_BYTES]
    assert (payload["original_key_bytes"], payload["original_value_bytes"]) == (300_000, 800_000)
    assert payload["original_value_sha256"] == hashlib.sha256(value).hexdigest()
    assert bytes(row["key"]) == key[:DEAD_LETTER_ORIGINAL_BYTES]
    record_bytes = (
        len(row["key"])
        + len(row["value"].encode())
        + sum(len(h["key"]) + len(h["value"]) for h in row["headers"])
    )
    assert record_bytes < 370_000  # the bound DEAD_LETTER_ORIGINAL_BYTES states


def test_dlq_kafka_value_of_null_payload_is_explicit_null(kafka_df: Any) -> None:
    dlq = to_dlq_records(parse_and_validate_orders(kafka_df([{"value": None}])))
    (row,) = to_dlq_kafka_records(dlq).collect()
    payload = json.loads(row["value"])
    assert payload["dlq_reason"] == DlqReason.EMPTY_VALUE
    assert payload["original_value_base64"] is None
