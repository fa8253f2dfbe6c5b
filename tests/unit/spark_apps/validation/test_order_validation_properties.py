"""Property-based tests of the order validator: any well-formed, plausible order is accepted and
typed exactly; any order pushed past one plausibility rule is refused with that rule's reason.

Hypothesis draws whole batches, so each example costs one Spark job, not one job per order.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_apps.contract.records import ORDER_TYPES
from spark_apps.validation.orders import DEFAULT_ORDER_RULES, DlqReason, parse_and_validate_orders

KAFKA_TIMESTAMP = datetime(2026, 11, 22, 12, 0, 0)  # every record's Kafka timestamp below
CAP = DEFAULT_ORDER_RULES.max_order_amount
SKEW = timedelta(seconds=DEFAULT_ORDER_RULES.max_future_skew_s)
OLDEST = KAFKA_TIMESTAMP - timedelta(seconds=DEFAULT_ORDER_RULES.max_past_age_s)

cents = st.integers(min_value=0, max_value=int(CAP * 100)).map(lambda c: Decimal(c).scaleb(-2))
event_times = st.datetimes(min_value=OLDEST, max_value=KAFKA_TIMESTAMP + SKEW).map(
    lambda t: t.replace(microsecond=0)
)
line_items = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "item": st.text(min_size=0, max_size=12),
            "count": st.integers(min_value=-(2**31), max_value=2**31 - 1),
            "amount": cents,
        },
    ),
    max_size=4,
)
orders = st.fixed_dictionaries(
    {
        "orderId": st.integers(min_value=0, max_value=2**63 - 1),
        "locationId": st.text(min_size=1, max_size=20).filter(lambda s: s.strip() != ""),
        "finalAmount": cents,
        "orderType": st.sampled_from(ORDER_TYPES),
        "orderedDateTime": event_times,
    },
    optional={"orderLineItems": line_items},
)


def _text(order: dict[str, Any]) -> bytes:
    """Seed-format JSON with money as exact number literals (json.dumps would go through float)."""
    raw: dict[str, str] = {}

    def encode(value: Any) -> Any:
        if isinstance(value, Decimal):
            token = f"@@{len(raw)}@@"
            raw[token] = f"{value:.2f}"
            return token
        if isinstance(value, datetime):
            return value.strftime("%Y-%m-%dT%H:%M:%S")
        if isinstance(value, dict):
            return {k: encode(v) for k, v in value.items()}
        if isinstance(value, list):
            return [encode(v) for v in value]
        return value

    text = json.dumps(encode(order))
    for token, number in raw.items():
        text = text.replace(json.dumps(token), number)
    return text.encode()


def _validate(kafka_df: Any, batch: list[dict[str, Any]]) -> list[Any]:
    frame = kafka_df([{"value": _text(order), "timestamp": KAFKA_TIMESTAMP} for order in batch])
    return parse_and_validate_orders(frame).orderBy("offset").collect()


PROPERTY_SETTINGS = settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@PROPERTY_SETTINGS
@given(batch=st.lists(orders, min_size=1, max_size=60))
def test_plausible_orders_are_accepted_and_typed_exactly(kafka_df: Any, batch: list[dict[str, Any]]) -> None:
    for order, row in zip(batch, _validate(kafka_df, batch), strict=True):
        assert row["dlq_reason"] is None, (order, row["dlq_reason"])
        assert row["order_id"] == order["orderId"]
        assert row["location_id"] == order["locationId"]
        assert row["final_amount"] == order["finalAmount"]
        assert row["order_type"] == order["orderType"]
        assert row["ordered_at"] == order["orderedDateTime"]


@PROPERTY_SETTINGS
@given(
    batch=st.lists(
        st.tuples(
            orders,
            st.sampled_from(["future", "amount"]),
            st.integers(min_value=1, max_value=10**9),
        ),
        min_size=1,
        max_size=60,
    )
)
def test_an_order_past_one_rule_is_refused_with_that_rules_reason(
    kafka_df: Any, batch: list[tuple[dict[str, Any], str, int]]
) -> None:
    hostile = []
    for order, rule, excess in batch:
        if rule == "future":  # ahead of its Kafka timestamp by more than the skew, up to ~31 years
            hostile.append(order | {"orderedDateTime": KAFKA_TIMESTAMP + SKEW + timedelta(seconds=excess)})
        else:  # above the cap, by a cent up to ten million
            hostile.append(order | {"finalAmount": CAP + Decimal(excess).scaleb(-2)})
    expected = {"future": DlqReason.EVENT_TIME_IN_FUTURE, "amount": DlqReason.AMOUNT_TOO_LARGE}
    for (_, rule, _), row in zip(batch, _validate(kafka_df, hostile), strict=True):
        assert row["dlq_reason"] == expected[rule]
        assert row["order_id"] is None, "a refused order exposes no typed fields"
