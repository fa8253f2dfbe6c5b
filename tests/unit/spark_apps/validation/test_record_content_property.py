"""Record content, property-based (issue 56): whatever bytes an order record holds, every reader of it
reaches one verdict, every verdict is a value or a dead letter with a known reason, and every record
the app writes because of it fits the Kafka clients' limits.

Hypothesis builds order records as text, so it can write what `json.dumps` never would: duplicate
keys, every JSON number form of an amount or id, escapes of lone surrogates and NUL, unknown fields
nested past Spark's parser's depth limit, zero or thousands of line items, strings past every size
bound, non-UTF-8 bytes. Each batch goes through

- the stream's validator (`parse_and_validate_orders`, with its Java fast path) and its exact checks
  (`exact_order_validation`, what the fast path falls back to): the same verdict and the same typed
  fields for every record;
- the quality suite's independent parser (`quality.loaders.parse_order_value`): for every record the
  validator accepts, it reads the same order (id, store, type, amount, event time) with no error;
- the app's writers: every split-topic record and dead letter (`side_output_records`), and the
  revenue record of each accepted order's store (`revenue_record`, with a store address at the stores
  topic's size bound) stays within librdkafka's 1,000,000-byte `message.max.bytes`.

Each example is one batch, so it costs a few Spark jobs, not a few per record.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from revenue_platform.quality.loaders import SPARK_JSON_MAX_DEPTH, parse_order_value
from spark_apps.contract.records import GOLD_COLUMNS, ORDER_TYPES, DlqReason
from spark_apps.revenue.stores import MAX_STORE_RECORD_BYTES
from spark_apps.storage.revenue_topic import revenue_record
from spark_apps.validation.orders import (
    DEFAULT_ORDER_RULES,
    exact_order_validation,
    parse_and_validate_orders,
)
from spark_apps.validation.routing import side_output_records

KAFKA_TIMESTAMP = datetime(2026, 11, 22, 12, 0, 0)
RULES = DEFAULT_ORDER_RULES
# librdkafka's default `message.max.bytes` (the smaller of the two clients' limits; the Java producer's
# `max.request.size` is 1,048,576): a record over it fails the batch that writes it.
KAFKA_CLIENT_LIMIT_BYTES = 1_000_000
KNOWN_REASONS = {
    value for name, value in vars(DlqReason).items() if name.isupper() and not name.endswith("_PREFIX")
}
REQUIRED = ("orderId", "locationId", "finalAmount", "orderType", "orderedDateTime")
TYPED_FIELDS = ("order_id", "location_id", "final_amount", "order_type", "ordered_at")

# --- the pieces of a record, as JSON text ---------------------------------------------------------
json_string = st.text(max_size=30).map(json.dumps)
hostile_string = st.one_of(
    json_string,
    st.sampled_from(['"\\u0000"', '"\\ud800"', '"a\\udc00b"', '"\\u202eRTL"', '" "', '""', '"\\n"']),
    # Around the locationId bound, in 1- to 4-byte characters.
    st.tuples(st.sampled_from(["x", "é", "€", "😀"]), st.sampled_from([255, 256, 257, 2_000])).map(
        lambda pair: json.dumps(pair[0] * pair[1], ensure_ascii=False)
    ),
)
amount_literal = st.one_of(
    st.sampled_from(
        [
            "0",
            "-0",
            "0.00",
            "1",
            "1.0",
            "1.00",
            "1.500",
            "19.99",
            "19.999",
            "0.001",
            "1e2",
            "1E+2",
            "2.7e1",
            "-5.00",
            "10.10",
            "99999999999999999999.99",
            "9999999999.99",
            "1e400",
            "NaN",
            "Infinity",
            "-Infinity",
            '"12.00"',
            "null",
            "true",
            "[1]",
            "{}",
        ]
    ),
    st.integers(min_value=0, max_value=10**12).map(lambda cents: f"{Decimal(cents).scaleb(-2)}"),
)
order_id_literal = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1).map(str),
    st.sampled_from(["9223372036854775808", "1.0", "1e3", '"123"', "null", "-0", "[]"]),
)
order_type_literal = st.one_of(
    st.sampled_from(ORDER_TYPES).map(json.dumps), st.sampled_from(['"general"', '"OTHER"', "1", "null"])
)
event_time_literal = st.one_of(
    st.integers(min_value=-3 * 86_400, max_value=3_600).map(
        lambda s: json.dumps((KAFKA_TIMESTAMP + timedelta(seconds=s)).strftime("%Y-%m-%dT%H:%M:%S"))
    ),
    st.sampled_from(
        [
            '"2026-11-22T11:59:59.123456"',
            '"2026-11-22T11:00:00Z"',
            '"2026-11-22 11:00:00"',
            '"2099-01-01T00:00:00"',
            '"0001-01-01T00:00:00"',
            '"2026-02-30T00:00:00"',
            "1732269600",
            "null",
        ]
    ),
)


def _nested(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


line_item = st.one_of(
    st.just("{}"),
    st.builds(
        lambda item, count, amount: f'{{"item": {item}, "count": {count}, "amount": {amount}}}',
        json_string,
        st.integers(min_value=-(2**31), max_value=2**31 - 1),
        amount_literal,
    ),
)
line_items_literal = st.one_of(
    st.lists(line_item, max_size=5).map(lambda items: "[" + ",".join(items) + "]"),
    # Many line items, around the bound (to_json writes each one's nulls: the output grows).
    st.sampled_from([RULES.max_line_items, RULES.max_line_items + 1, 3_000]).map(
        lambda n: "[" + ",".join(["{}"] * n) + "]"
    ),
    st.sampled_from(["null", '"[]"', "{}", "7"]),
)
unknown_field = st.one_of(
    st.builds(lambda value: f'"note": {value}', hostile_string),
    # Nesting just under and over Spark's parser's limit.
    st.sampled_from([10, SPARK_JSON_MAX_DEPTH - 3, SPARK_JSON_MAX_DEPTH + 5]).map(
        lambda depth: f'"deep": {_nested(depth)}'
    ),
    # Padding that takes the record past the size bound.
    st.sampled_from([RULES.max_record_bytes - 300, RULES.max_record_bytes + 10, 900_000]).map(
        lambda n: '"pad": "' + "p" * n + '"'
    ),
)


@st.composite
def order_records(draw: st.DrawFn) -> bytes:
    fields = {
        "orderId": draw(order_id_literal),
        "locationId": draw(st.one_of(st.text(min_size=1, max_size=20).map(json.dumps), hostile_string)),
        "finalAmount": draw(amount_literal),
        "orderType": draw(order_type_literal),
        "orderedDateTime": draw(event_time_literal),
    }
    members = [f"{json.dumps(name)}: {value}" for name, value in fields.items()]
    for name in draw(st.lists(st.sampled_from(REQUIRED), max_size=1)):
        members = [m for m in members if not m.startswith(json.dumps(name))]  # a missing field
    if draw(st.booleans()):
        members.append(f'"orderLineItems": {draw(line_items_literal)}')
    members += [draw(unknown_field) for _ in range(draw(st.integers(min_value=0, max_value=2)))]
    if draw(st.integers(min_value=0, max_value=9)) == 0:  # a duplicate key
        members.append(f'"orderId": {draw(order_id_literal)}')
    members = draw(st.permutations(members))
    text = "{" + ", ".join(members) + "}"
    shape = draw(st.integers(min_value=0, max_value=19))
    if shape == 0:
        return text.encode() + b" {}"  # trailing content
    if shape == 1:
        return b"\xff\xfe" + text.encode()  # not UTF-8
    if shape == 2:
        return b""
    return text.encode()


def _records(kafka_df: Any, values: list[bytes]) -> Any:
    return kafka_df([{"value": value, "timestamp": KAFKA_TIMESTAMP} for value in values])


def _store_row(location_id: str, order_type: str) -> tuple[Any, ...]:
    """A gold row of the store with an address at the stores topic's size bound."""
    field = "a" * (MAX_STORE_RECORD_BYTES // 6)
    start = KAFKA_TIMESTAMP.replace(tzinfo=UTC)
    values = {
        "location_id": location_id,
        "order_type": order_type,
        "window_start": start,
        "window_end": start + timedelta(seconds=15),
        "order_count": 2**62,
        "revenue": Decimal("9" * 36 + ".99"),
        "batch_id": 2**62,
    }
    return tuple(values.get(column, field) for column in GOLD_COLUMNS)


RECORD_CONTENT_SETTINGS = settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@RECORD_CONTENT_SETTINGS
@given(values=st.lists(order_records(), min_size=1, max_size=25))
def test_every_reader_reaches_one_verdict_and_every_output_fits_the_kafka_clients(
    kafka_df: Any, values: list[bytes]
) -> None:
    raw = _records(kafka_df, values)
    fast = parse_and_validate_orders(raw).orderBy("offset").collect()
    exact = exact_order_validation(raw).orderBy("offset").collect()
    written = side_output_records(raw.transform(parse_and_validate_orders), "dlq", "general", "restaurant")
    sizes = written.selectExpr(
        "topic", "coalesce(length(key), 0) + coalesce(length(value), 0) AS size"
    ).collect()

    assert len(fast) == len(exact) == len(values)
    for value, by_stream, by_reference in zip(values, fast, exact, strict=True):
        shown = value[:300]
        reason = by_stream["dlq_reason"]
        assert reason == by_reference["dlq_reason"], (shown, reason, by_reference["dlq_reason"])
        if reason is not None:
            # Every verdict is a value or a dead letter with a reason the contract names.
            assert reason in KNOWN_REASONS or reason.startswith(
                (DlqReason.MISSING_FIELD_PREFIX, DlqReason.WRONG_TYPE_PREFIX)
            ), (shown, reason)
            assert all(by_stream[field] is None for field in TYPED_FIELDS), shown
            continue
        assert [by_stream[f] for f in TYPED_FIELDS] == [by_reference[f] for f in TYPED_FIELDS], shown
        # The quality suite reads the same order from bronze's bytes.
        parsed = parse_order_value(value)
        assert parsed["parse_error"] is None, (shown, parsed["parse_error"])
        assert parsed["order_id"] == by_stream["order_id"], shown
        assert parsed["location_id"] == by_stream["location_id"], shown
        assert parsed["order_type"] == by_stream["order_type"], shown
        assert parsed["final_amount"] == by_stream["final_amount"], shown
        assert parsed["ordered_at"] == by_stream["ordered_at"].replace(tzinfo=UTC), shown
        key, revenue_value = revenue_record(_store_row(by_stream["location_id"], by_stream["order_type"]))
        assert len(key) + len(revenue_value) <= KAFKA_CLIENT_LIMIT_BYTES, shown

    assert len(sizes) == len(values)
    for row in sizes:
        assert row["size"] <= KAFKA_CLIENT_LIMIT_BYTES, (row["topic"], row["size"])


def test_the_generator_reaches_the_cases_it_is_for(kafka_df: Any) -> None:
    """The strategy is not vacuous: records it builds are accepted, and refused for size, depth,
    duplicate keys and bytes, each with its reason (a fixed sample, not a property)."""
    valid = (
        b'{"orderId": 1, "locationId": "s", "finalAmount": 1.500, "orderType": "GENERAL", '
        b'"orderedDateTime": "2026-11-22T11:00:00"}'
    )
    body = valid[1:-1].decode()
    cases = {
        valid: None,
        ("{" + body + ', "deep": ' + _nested(SPARK_JSON_MAX_DEPTH - 3) + "}").encode(): None,
        (
            "{" + body + ', "deep": ' + _nested(SPARK_JSON_MAX_DEPTH + 5) + "}"
        ).encode(): DlqReason.INVALID_JSON,
        ("{" + body + ', "orderId": 2}').encode(): DlqReason.INVALID_JSON,
        ("{" + body + ', "pad": "' + "p" * 900_000 + '"}').encode(): DlqReason.RECORD_TOO_LARGE,
        b"\xff\xfe" + valid: DlqReason.NOT_UTF8,
        valid.replace(b'"s"', json.dumps("x" * 257).encode()): DlqReason.LOCATION_ID_TOO_LONG,
    }
    rows = parse_and_validate_orders(_records(kafka_df, list(cases))).orderBy("offset").collect()
    assert [row["dlq_reason"] for row in rows] == list(cases.values())
    # The deepest accepted order is one the quality parser reads too.
    assert parse_order_value(list(cases)[1])["parse_error"] is None
