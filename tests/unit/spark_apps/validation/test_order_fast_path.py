"""Differential tests of the order validator's JVM fast path against the exact validator.

``parse_and_validate_orders`` (fast path first, exact checks for what it does not certify) must
give, for every input, the same typed columns and the same ``dlq_reason`` as
``exact_order_validation`` (every record through the exact variant-based checks). Hypothesis
draws hostile JSON — every field mutated in type and format, duplicate keys, odd numbers,
NaN/Infinity, trailing content, whitespace, unicode and escapes, odd line items — and raw byte
mutations of valid orders; all records of a property go into one DataFrame and one Spark job that
runs both validators (a union of the two). Each job also carries plain generated orders, which the
fast path must certify: a fast path that always falls back cannot pass.

``FAST_PATH_FUZZ_EXAMPLES`` sets the number of Hypothesis examples per property (default 200, each
a batch of 4 to 40 records) for a longer local run.
"""

from __future__ import annotations

import json
import os
import random
import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from revenue_platform.orders_generator import (
    BAD_RECORD_KINDS,
    GeneratorSettings,
    _bad_record,
    generate_orders,
)
from spark_apps.validation.orders import (
    FAST_PATH_FUNCTION,
    exact_order_validation,
    ordered_at_from_text,
    parse_and_validate_orders,
    register_order_fast_path,
)
from spark_apps.validation.schemas import ORDER_COLUMNS

KAFKA_TIMESTAMP = datetime(2026, 11, 22, 12, 0, 0)
FUZZ_EXAMPLES = int(os.environ.get("FAST_PATH_FUZZ_EXAMPLES", "200"))
FUZZ_SETTINGS = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)
# Columns compared between the two paths: every typed column and the reason.
COMPARED = (*ORDER_COLUMNS, "dlq_reason")


# ------------------------------------------------------------------------------ the comparison
def compare(
    kafka_df: Any, values: list[bytes | None], timestamps: list[datetime] | None = None
) -> list[bool]:
    """Validate `values` both ways in one job; assert identical outputs; return which were certified."""
    stamps = timestamps or [KAFKA_TIMESTAMP] * len(values)
    frame = kafka_df([{"value": v, "timestamp": t} for v, t in zip(values, stamps, strict=True)])
    register_order_fast_path(frame.sparkSession)
    frame = frame.withColumn("certified", F.call_function(FAST_PATH_FUNCTION, F.col("value")).isNotNull())

    def tagged(validated: DataFrame, path: str) -> DataFrame:
        return validated.select(F.lit(path).alias("path"), "offset", "certified", *COMPARED)

    both = tagged(parse_and_validate_orders(frame), "fast").unionByName(
        tagged(exact_order_validation(frame), "exact")
    )
    rows = both.collect()
    fast = {r["offset"]: r for r in rows if r["path"] == "fast"}
    exact = {r["offset"]: r for r in rows if r["path"] == "exact"}
    assert len(fast) == len(exact) == len(values)
    for offset, value in enumerate(values):
        got, want = fast[offset], exact[offset]
        assert [got[c] for c in COMPARED] == [want[c] for c in COMPARED], (
            f"fast path differs from the exact validator for {value!r} (certified={got['certified']}): "
            f"fast {got.asDict()} vs exact {want.asDict()}"
        )
    return [fast[offset]["certified"] for offset in range(len(values))]


def plain_orders(seed: int, count: int = 5) -> list[bytes]:
    """Ordinary valid orders exactly as the platform's generator writes them."""
    settings_ = GeneratorSettings(orders=count, stores=3, seed=seed, start=datetime(2026, 11, 22, 9, 0, 0))
    return [record.value for record in generate_orders(settings_) if record.value is not None]


def assert_plain_orders_certified(values: list[bytes], certified: list[bool], plain: list[bytes]) -> None:
    for value, is_certified in zip(values, certified, strict=True):
        if value in plain:
            assert is_certified, f"the fast path fell back on a plain valid order: {value!r}"


# ------------------------------------------------------------------------------ JSON fragments
def _dumps(text: str, ascii_only: bool) -> str:
    return json.dumps(text, ensure_ascii=ascii_only)


SHORT_TEXT = st.text(max_size=12)


def strings(draw_text: st.SearchStrategy[str] = SHORT_TEXT) -> st.SearchStrategy[str]:
    """A JSON string literal: raw UTF-8 or \\u-escaped, plus lone and paired surrogate escapes."""
    rendered = st.builds(_dumps, draw_text, st.booleans())
    odd = st.sampled_from(
        [
            '"\\ud800"',
            '"a\\udfff"',
            '"\\ud83d\\ude00"',
            '"\U0001f600"',
            '"\\u0000"',
            '"\\t"',
            '"\\\\u"',
            '"\\""',
        ]
    )
    return st.one_of(rendered, rendered, odd)


INTEGERS = st.one_of(
    st.integers(min_value=-(10**6), max_value=10**6),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from(
        [
            2**31 - 1,
            2**31,
            -(2**31),
            -(2**31) - 1,
            2**63 - 1,
            2**63,
            -(2**63),
            -(2**63) - 1,
            10**16 - 1,
            10**16,
            10**18,
        ]
    ),
).map(str) | st.just("-0")


@st.composite
def decimal_literals(draw: st.DrawFn) -> str:
    """Plain decimal literals: random fraction digits, trailing zeros, signs, very long ones."""
    sign = draw(st.sampled_from(["", "", "-"]))
    whole = str(draw(st.one_of(st.integers(0, 10**6), st.integers(0, 10**20), st.just(0))))
    fraction = draw(st.text("0123456789", min_size=1, max_size=4))
    zeros = "0" * draw(st.sampled_from([0, 0, 1, 2, 5, 36, 37, 40]))
    return f"{sign}{whole}.{fraction}{zeros}"


EXPONENTS = st.sampled_from(
    ["1e2", "2.7e1", "1E-2", "1.50E+1", "0e0", "-1e400", "1e-400", "1.0e0", "27.00e0"]
)
BIG_NUMBERS = st.integers(min_value=15, max_value=45).map(lambda n: "9" * n) | st.integers(1, 40).map(
    lambda n: "1." + "0" * n
)
NON_FINITE = st.sampled_from(["NaN", "Infinity", "-Infinity", "+Infinity", "INF", "-NaN"])
LITERALS = st.sampled_from(["null", "true", "false"])
CONTAINERS = st.sampled_from(["{}", "[]", '{"a": 1}', '[1, "x"]', '{"a": {"b": [null]}}', '{"a": 1, "a": 2}'])
NUMBER_STRINGS = st.sampled_from(['"27.00"', '"12345"', '"1e2"', '"NaN"', '""', '" "'])

ANY_VALUE = st.one_of(
    INTEGERS,
    decimal_literals(),
    EXPONENTS,
    BIG_NUMBERS,
    NON_FINITE,
    LITERALS,
    CONTAINERS,
    NUMBER_STRINGS,
    strings(),
)

CENTS = st.integers(min_value=-(10**9), max_value=10**9).map(lambda c: f"{c // 100}.{c % 100:02d}")
VALID_AMOUNTS = st.one_of(
    CENTS, st.integers(0, 10**6).map(str), st.sampled_from(["1000000.00", "1000000.01", "0.0"])
)
LOCATION_IDS = st.one_of(
    st.sampled_from(
        ["store_1001", "", " ", "  x", "x ", "\t", "\u00a0", "\u3000", "x\n", "\u00e9t\u00e9"]
    ).map(lambda s: _dumps(s, False)),
    strings(st.text(min_size=1, max_size=8)),
)
ORDER_TYPES_ = st.sampled_from(["GENERAL", "RESTAURANT", "general", "ONLINE", "", " GENERAL"]).map(
    lambda s: _dumps(s, False)
)
EVENT_TIMES = st.one_of(
    st.datetimes(min_value=datetime(1969, 12, 31), max_value=datetime(2026, 11, 22, 12, 6)).map(
        lambda t: t.strftime("%Y-%m-%dT%H:%M:%S")
    ),
    st.sampled_from(
        [
            "2026-11-22T09:00:00.123456",
            "2026-11-22T09:00:00.1234567",
            "2026-11-22T12:05:00",
            "2026-11-22T12:05:01",
            "2026-11-22T09:00:00Z",
            "2026-11-22 09:00:00",
            "2099-01-01T00:00:00",
            "9999-12-31T23:59:59",
            "2026-02-30T00:00:00",
            "",
            "yesterday",
        ]
    ),
).map(lambda s: _dumps(s, False))


def maybe(valid: st.SearchStrategy[str]) -> st.SearchStrategy[str | None]:
    """Mostly a valid fragment; sometimes any value, JSON null, or the field left out (None)."""
    return st.one_of(valid, valid, valid, ANY_VALUE, st.just("null"), st.none())


def maybe_absent(valid: st.SearchStrategy[str]) -> st.SearchStrategy[str | None]:
    """A valid fragment, now and then JSON null or left out (None): both valid in a line item."""
    return st.one_of(valid, valid, valid, valid, st.just("null"), st.none())


@st.composite
def line_items(draw: st.DrawFn, hostile: bool) -> str:
    """A line-item array; `hostile`: elements and their keys may be of any type or shape."""
    field = maybe if hostile else maybe_absent
    elements = []
    for _ in range(draw(st.integers(0, 3))):
        if hostile and draw(st.integers(0, 4)) == 0:
            elements.append(draw(ANY_VALUE))
            continue
        entries = [
            ("item", draw(field(strings()))),
            ("count", draw(field(st.integers(-(2**31), 2**31 - 1).map(str)))),
            ("amount", draw(field(VALID_AMOUNTS))),
        ]
        entries = [(k, v) for k, v in entries if v is not None]
        if hostile and draw(st.integers(0, 3)) == 0:
            entries.append((draw(st.sampled_from(["Item", "note", "amount ", "item"])), draw(ANY_VALUE)))
        elements.append(render_object(draw(st.permutations(entries)), draw(SEPARATORS)))
    return "[" + ", ".join(elements) + "]"


SEPARATORS = st.sampled_from(["", " ", " ", "\n", "\t", "\r\n  "])


def render_object(entries: Sequence[tuple[str, str]], ws: str) -> str:
    return "{" + ws + f",{ws}".join(f"{json.dumps(k)}{ws}:{ws}{v}" for k, v in entries) + ws + "}"


FIELDS = ("orderId", "locationId", "finalAmount", "orderType", "orderedDateTime", "orderLineItems")
VALID_FIELD_VALUES: dict[str, st.SearchStrategy[str]] = {
    "orderId": st.integers(0, 2**63 - 1).map(str),
    "locationId": LOCATION_IDS,
    "finalAmount": VALID_AMOUNTS,
    "orderType": ORDER_TYPES_,
    "orderedDateTime": EVENT_TIMES,
}


@st.composite
def order_texts(draw: st.DrawFn) -> bytes:
    """One order value: up to two fields mutated in type or format or left out, sometimes
    extra or duplicate keys, and now and then odd content before or after the object."""
    mutated = draw(st.sets(st.sampled_from(FIELDS), max_size=2))
    entries = []
    for name in FIELDS:
        if name == "orderLineItems":
            hostile = st.one_of(line_items(hostile=True), ANY_VALUE)
            value = draw(hostile if name in mutated else st.one_of(line_items(hostile=False), st.none()))
        elif name in mutated:
            value = draw(st.one_of(ANY_VALUE, st.just("null"), st.none()))
        else:
            value = draw(VALID_FIELD_VALUES[name])
        if value is not None:
            entries.append((name, value))
    for _ in range(draw(st.integers(0, 2))):
        key = draw(st.one_of(st.sampled_from(["promo", "orderid", "orderId ", "meta", "\u00e9"]), SHORT_TEXT))
        entries.append((key, draw(ANY_VALUE)))
    if entries and draw(st.integers(0, 10)) == 0:  # a duplicate key at the top level
        key, _ = draw(st.sampled_from(entries))
        entries.append((key, draw(ANY_VALUE)))
    entries = draw(st.permutations(entries))
    text = render_object(entries, draw(SEPARATORS))
    if draw(st.integers(0, 5)) == 0:
        text = draw(st.sampled_from(["", " ", "\ufeff", "\n"])) + text
    if draw(st.integers(0, 3)) == 0:
        text += draw(st.sampled_from([" ", "\n", "\r\n\t ", "\x0b", "\x0c", " x", "}", " }", "{}", "\x00"]))
    return text.encode()


INVALID_UTF8 = [b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82", b"\x80"]
VALID_MULTIBYTE = ["\u00e9".encode(), "\u20ac".encode(), "\U0001f600".encode(), b"\xef\xbb\xbf"]


@st.composite
def byte_mutations(draw: st.DrawFn) -> bytes:
    """A plain generated order with up to three raw byte edits."""
    value = bytearray(draw(st.sampled_from(plain_orders(seed=99, count=20))))
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(value)))
        operation = draw(st.sampled_from(["flip", "insert", "delete", "truncate", "invalid", "multibyte"]))
        if operation == "flip" and at < len(value):
            value[at] = draw(st.integers(0, 255))
        elif operation == "insert":
            value[at:at] = bytes([draw(st.integers(0, 255))])
        elif operation == "delete":
            del value[at : at + draw(st.integers(1, 4))]
        elif operation == "truncate":
            del value[at:]
        elif operation == "invalid":
            value[at:at] = draw(st.sampled_from(INVALID_UTF8))
        elif operation == "multibyte":
            value[at:at] = draw(st.sampled_from(VALID_MULTIBYTE))
    return bytes(value)


# ------------------------------------------------------------------------------ the properties
# Hypothesis draws the records; the Spark comparison runs once per property over all of them (a
# Spark job per example would cost a second each). A failure names the offending value; add it to
# EDGE_CASES to keep it.
def drawn(strategy: st.SearchStrategy[list[Any]]) -> list[Any]:
    """Every element of FUZZ_EXAMPLES Hypothesis examples of a list strategy, concatenated."""
    collected: list[Any] = []

    @FUZZ_SETTINGS
    @given(batch=strategy)
    def collect(batch: list[Any]) -> None:
        collected.extend(batch)

    collect()
    return collected


def test_fuzzed_orders_validate_identically(kafka_df: Any) -> None:
    plain = plain_orders(seed=11, count=40)
    values = [*drawn(st.lists(order_texts(), min_size=4, max_size=40)), *plain]
    assert len(values) >= 4 * FUZZ_EXAMPLES
    assert_plain_orders_certified(values, compare(kafka_df, values), plain)


def test_byte_mutations_validate_identically(kafka_df: Any) -> None:
    plain = plain_orders(seed=12, count=40)
    values = [*drawn(st.lists(byte_mutations(), min_size=4, max_size=40)), *plain]
    assert len(values) >= 4 * FUZZ_EXAMPLES
    assert_plain_orders_certified(values, compare(kafka_df, values), plain)


def test_event_time_near_the_skew_limit_validates_identically(kafka_df: Any) -> None:
    """The value rules still run on certified orders: Kafka timestamps around each order's event time."""
    plain = plain_orders(seed=13, count=200)
    offsets = drawn(st.lists(st.integers(min_value=-100, max_value=100), min_size=1, max_size=20))[
        : len(plain)
    ]
    event_times = [datetime.fromisoformat(json.loads(v)["orderedDateTime"]) for v in plain]
    # Event time minus the 5-minute skew plus/minus up to 100 s: either side of event_time_in_future.
    stamps = [t - timedelta(seconds=300 - o) for t, o in zip(event_times, offsets, strict=False)]
    values = plain[: len(stamps)]
    assert all(compare(kafka_df, values, stamps))


# ------------------------------------------------------------------------------ fixed cases
def test_every_generator_kind_and_mix_validates_identically(kafka_df: Any) -> None:
    rng = random.Random(5)
    kinds = [
        _bad_record(kind, rng, "store_1001", 7, datetime(2026, 11, 22, 9, 0, 0)).value
        for kind in sorted(BAD_RECORD_KINDS)
    ]
    mix = GeneratorSettings(
        orders=400,
        stores=4,
        seed=3,
        bad_every=7,
        duplicate_every=9,
        conflicting_every=11,
        late_every=13,
        near_limit_every=5,
    )
    mixed = [record.value for record in generate_orders(mix)]
    plain = plain_orders(seed=1, count=50)
    values = [*kinds, *mixed, *plain]
    certified = compare(kafka_df, values)
    assert_plain_orders_certified(values, certified, plain)
    # Structurally valid hostile kinds are certified too: only their value rules refuse them.
    by_kind = dict(zip(sorted(BAD_RECORD_KINDS), certified[: len(kinds)], strict=True))
    certified_kinds = {"unknown_type", "negative_amount", "amount_too_large", "future_event_time"}
    assert {
        kind for kind in ("empty", "not_json", "not_utf8", *certified_kinds) if by_kind[kind]
    } == certified_kinds


BASE = json.loads(plain_orders(seed=1, count=1)[0])


def with_text(**fields: str) -> bytes:
    """The base order with fields replaced by raw JSON fragments (a value of '' removes the field)."""
    entries = [(k, json.dumps(v)) for k, v in BASE.items() if k not in fields]
    entries += [(k, v) for k, v in fields.items() if v != ""]
    return render_object(entries, " ").encode()


# (value, certified?) — edge cases of each fast-path rule, decided on purpose.
EDGE_CASES: list[tuple[bytes | None, bool]] = [
    (None, False),
    (b"", False),
    (with_text(), True),
    (with_text(finalAmount="1.500"), True),
    (with_text(finalAmount="100.0"), True),
    (with_text(finalAmount="-0.00"), True),
    (with_text(finalAmount="9999999999999999.99"), True),
    (with_text(finalAmount="10000000000000000"), False),
    (with_text(finalAmount="1." + "0" * 37), True),
    (with_text(finalAmount="1." + "0" * 39), False),  # a 39-digit scale is a DOUBLE variant
    (with_text(finalAmount="2.7e1"), False),
    (with_text(finalAmount="19.999"), False),
    (with_text(finalAmount="NaN"), False),
    (with_text(finalAmount="-Infinity"), False),
    (with_text(finalAmount="INF", orderId='"x"'), False),
    (with_text(extra="NaN"), False),
    (with_text(orderId="9223372036854775807"), True),
    (with_text(orderId="9223372036854775808"), False),
    (with_text(orderId="1.0"), False),
    (with_text(locationId='"\\u00e9t\\u00e9"'), True),
    (with_text(locationId='"\\ud800"'), False),
    (with_text(locationId='"\\ud83d\\ude00"'), False),
    (with_text(locationId='"store_\U0001f600"'), False),
    (with_text(locationId='" store"'), False),
    (with_text(locationId='"\\t"'), False),
    (with_text(locationId='"  "'), False),
    (with_text(extra='{"a": "\\ud800"}'), False),
    (with_text(extra='{"\\ud800": 1, "\\udbff": 2}'), False),
    (with_text(extra='{"a": 1, "a": 2}'), False),
    (with_text(extra='[{"x": {"y": [1, 2, {"z": null}]}}]'), True),
    (with_text(orderLineItems="null"), True),
    (with_text(orderLineItems=""), True),
    (with_text(orderLineItems="[]"), True),
    (with_text(orderLineItems='[{"item": null, "count": null, "amount": null}]'), True),
    (with_text(orderLineItems='[{"amount": 1}]'), True),
    (with_text(orderLineItems='[{"item": "a", "note": 1}]'), False),
    (with_text(orderLineItems='[{"count": 2147483648}]'), False),
    (with_text(orderLineItems="[null]"), False),
    (with_text(orderLineItems="{}"), False),
    (with_text() + b" \n\t\r", True),
    (with_text() + b"\x0b", False),
    (with_text() + b" }", False),
    (b" " + with_text(), False),
    (b"\xef\xbb\xbf" + with_text(), False),
]


def test_edge_cases_validate_identically_and_fall_back_where_intended(kafka_df: Any) -> None:
    values = [value for value, _ in EDGE_CASES]
    certified = compare(kafka_df, values)
    assert certified == [expected for _, expected in EDGE_CASES]


# orderedDateTime texts around the plain form the fast path reads itself (the others are Spark's).
EVENT_TIME_EDGES = [
    "2026-11-22T09:00:00",
    "2026-11-22T09:00:00.1",
    "2026-11-22T09:00:00.000001",
    "2026-11-22T09:00:00.123456",
    "0001-01-01T00:00:00",
    "9999-12-31T23:59:59.999999",
    "1969-12-31T23:59:59.5",
    "2000-02-29T12:00:00",
    "2024-02-29T00:00:00",
    "1900-02-29T00:00:00",
    "2023-02-29T00:00:00",
    "2026-04-31T00:00:00",
    "2026-13-01T00:00:00",
    "2026-00-10T00:00:00",
    "2026-11-00T00:00:00",
    "0000-01-01T00:00:00",
    "2026-11-22T24:00:00",
    "2026-11-22T23:60:00",
    "2026-11-22T23:59:60",
    "2026-11-22T09:00:00.",
    "2026-11-22T09:00:00.1234567",
    "2026-11-22T09:00:00,1",
    "2026-11-22T09:00:00.-1",
    "2026-11-22T09:00:00.+1",
    "2026-1-22T09:00:00",
    "+2026-11-22T09:00:00",
    "12026-11-22T09:00:00",
    "2026-11-22t09:00:00",
    "2026-11-22 09:00:00",
    "2026-11-22T09:00:00Z",
    "2026-11-22T09:00:00 ",
    "2026-11-22T9:00:00",
    "\uff12026-11-22T09:00:00",
    "2026-11-22T09:00",
    "",
]
PLAIN_FORM = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?", re.ASCII)
PLAIN_EVENT_TIMES = st.builds(
    lambda t, digits: (
        t.strftime("%Y-%m-%dT%H:%M:%S") + (f".{t.microsecond:06d}"[: digits + 1] if digits else "")
    ),
    st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59)),
    st.integers(0, 6),
)


def test_the_fast_path_reads_a_plain_event_time_as_spark_parses_it(kafka_df: Any) -> None:
    """Where the fast path reads orderedDateTime itself (`ordered_at_us`), it reads Spark's instant;
    where Spark's parse finds none, it reads none; and it does read every plain form."""
    texts = [*EVENT_TIME_EDGES, *drawn(st.lists(PLAIN_EVENT_TIMES, min_size=1, max_size=20))]
    values = [with_text(orderedDateTime=json.dumps(text)) for text in texts]
    frame = kafka_df([{"value": value} for value in values])
    register_order_fast_path(frame.sparkSession)
    fast = F.call_function(FAST_PATH_FUNCTION, F.col("value"))
    rows = frame.select(
        "offset",
        fast["ordered_at_us"].alias("fast_us"),
        F.unix_micros(ordered_at_from_text(fast["ordered_at_text"])).alias("spark_us"),
    ).collect()
    by_offset = {row["offset"]: (row["fast_us"], row["spark_us"]) for row in rows}
    for offset, text in enumerate(texts):
        fast_us, spark_us = by_offset[offset]
        assert fast_us is None or fast_us == spark_us, f"{text!r}: fast {fast_us}, Spark {spark_us}"
        plain = (
            PLAIN_FORM.fullmatch(text) is not None and not text.startswith("0000") and spark_us is not None
        )
        assert (fast_us is not None) == plain, f"{text!r}: fast {fast_us}, Spark {spark_us}"


def test_registration_is_idempotent_and_names_make_jvm_when_the_class_is_missing(
    kafka_df: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spark_apps.validation import orders

    spark = kafka_df([]).sparkSession
    register_order_fast_path(spark)
    register_order_fast_path(spark)
    monkeypatch.setattr(orders, "FAST_PATH_FUNCTION", "test_missing_fast_path")
    monkeypatch.setattr(orders, "FAST_PATH_CLASS", "io.github.revenueplatform.validation.Missing")
    with pytest.raises(
        orders.OrderFastPathMissingError,
        match=r"validation\.Missing is not on the Spark classpath: run `make jvm`",
    ):
        orders.register_order_fast_path(spark)
